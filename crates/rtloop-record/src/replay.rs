//! Replay: any recorded file played into a live stream by one loop ([`play`]) at the
//! original pace, a multiple of it, or as fast as possible, with its events pushed when
//! their samples go out.
//!
//! A format is a [`ReplaySource`]: its stream description ([`SourceInfo`]), its rows, its
//! events (each at a row), and blocks of rows with the time each is due. Every format rtloop
//! replays is flat samples in a file (rtloop's own recordings, an XDF file converted to
//! one, SpikeGLX `.bin`, Open Ephys `continuous.dat`, an NWB dataset stored contiguously or
//! copied out by pynwb), so one source, [`FlatSource`], maps the file and hands out slices
//! of it: no copy before the stream's own.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use memmap2::Mmap;
use rtloop_stream::{DType, Event, EventValue, Stream, StreamConfig};
use serde::Serialize;

use crate::{LoadError, Recording};

// The files hold little-endian samples and the stream holds native ones: the same bytes
// only on a little-endian machine, the only kind rtloop builds for.
const _: () = assert!(
    cfg!(target_endian = "little"),
    "replay copies little-endian file bytes into native-endian streams"
);

/// What a replayed stream looks like, and where it came from.
#[derive(Debug, Clone)]
pub struct SourceInfo {
    /// The format (`"rtloop-recording"`, `"xdf"`, `"spikeglx"`, `"openephys"`, `"nwb"`).
    pub format: String,
    /// The file or directory it was read from.
    pub path: PathBuf,
    /// The series played (the default stream name is made from it).
    pub series: String,
    /// The stream to make: the samples' dtype as stored (replay never converts them),
    /// channels, rate, names (at most 31 bytes: longer ones are cut), each channel's
    /// physical unit once its gain is applied (`"uV"`, `"V"`, or empty), types, content
    /// type, source id and description; its capacity 0 (chosen when played).
    /// [`SourceInfo::stream_config`] adds the gains to the description.
    pub stream: StreamConfig,
    /// Per channel: physical value = raw × gain + offset (empty: none given).
    pub gains: Vec<f64>,
    /// Per channel offsets (empty: all zero).
    pub offsets: Vec<f64>,
}

/// An event of a source, at a row of it.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceEvent {
    /// The row (sample index from the start of the file) the event belongs to.
    pub row: u64,
    /// FieldTrip's `type`.
    pub kind: EventValue,
    /// FieldTrip's `value`.
    pub value: EventValue,
    /// Duration in samples.
    pub duration: u64,
    /// Offset in samples.
    pub offset: i64,
}

/// Rows of a source to write at once.
#[derive(Debug)]
pub struct Block<'a> {
    /// How many rows.
    pub rows: usize,
    /// When the last is due at the original pace, ns after the file's first row: a block
    /// goes out once all its rows would have been there, so none is early and the replay
    /// ends at the file's last sample.
    pub due_ns: u64,
    /// Their bytes, sample-major, native order.
    pub bytes: &'a [u8],
}

/// A recorded file that can be played into a stream.
pub trait ReplaySource {
    /// The stream it makes.
    fn info(&self) -> &SourceInfo;
    /// Rows (samples) in it.
    fn rows(&self) -> u64;
    /// Its events, in row order.
    fn events(&self) -> &[SourceEvent];
    /// The block starting at `row` (`row < rows()`): at most `max_rows` rows, fewer where the
    /// source's own blocks end (an rtloop recording's blocks are the commits it recorded).
    fn block(&self, row: u64, max_rows: usize) -> Result<Block<'_>, SourceError>;
    /// Seconds from the recording's first sample to its last at its original pace.
    fn span_seconds(&self) -> f64;
}

/// Why a file cannot be replayed: each says what was wrong and what is allowed.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A file is missing or unreadable.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A file is there but malformed (metadata that does not parse, data shorter than the
    /// metadata says, ...).
    #[error("{path}: {detail}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, and what is allowed.
        detail: String,
    },
    /// The path holds no recording of a format rtloop replays.
    #[error("{path}: {detail}; rtloop replays an rtloop recording directory (header.json), an XDF file (.xdf), SpikeGLX (.bin with its .meta, or a directory of them), Open Ephys binary (structure.oebin, or a directory holding one) and NWB (.nwb)")]
    Unrecognised {
        /// The path.
        path: PathBuf,
        /// What was found.
        detail: String,
    },
    /// The file holds several series and none was picked.
    #[error("{path} holds {} series; pick one with --series: {}", series.len(), series.join(", "))]
    Ambiguous {
        /// The file.
        path: PathBuf,
        /// The series it holds.
        series: Vec<String>,
    },
    /// `--series` names none of the file's series.
    #[error("{path} has no series {wanted:?}; it has: {}", if series.is_empty() { "none".to_string() } else { series.join(", ") })]
    UnknownSeries {
        /// The file.
        path: PathBuf,
        /// The name asked for.
        wanted: String,
        /// The series it holds.
        series: Vec<String>,
    },
    /// An rtloop recording cannot be read.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// An XDF file cannot be read.
    #[error(transparent)]
    Xdf(#[from] crate::xdf::XdfError),
}

pub(crate) fn io_error(path: &Path) -> impl FnOnce(io::Error) -> SourceError + '_ {
    move |source| SourceError::Io {
        path: path.to_owned(),
        source,
    }
}

pub(crate) fn invalid(path: &Path, detail: impl Into<String>) -> SourceError {
    SourceError::Invalid {
        path: path.to_owned(),
        detail: detail.into(),
    }
}

/// Pick one of `series` (the names a file holds): the one named `wanted` (or the only one
/// ending in `/wanted` or `.wanted`: `imec0.ap` for `run_g0_t0.imec0.ap`), or the only one
/// there is.
pub(crate) fn pick_series(
    path: &Path,
    series: &[String],
    wanted: Option<&str>,
) -> Result<usize, SourceError> {
    match wanted {
        Some(w) => {
            if let Some(i) = series.iter().position(|s| s == w) {
                return Ok(i);
            }
            let tail: Vec<usize> = (0..series.len())
                .filter(|&i| {
                    series[i].ends_with(&format!("/{w}")) || series[i].ends_with(&format!(".{w}"))
                })
                .collect();
            match tail.as_slice() {
                [i] => Ok(*i),
                _ => Err(SourceError::UnknownSeries {
                    path: path.to_owned(),
                    wanted: w.to_owned(),
                    series: series.to_vec(),
                }),
            }
        }
        None => match series.len() {
            1 => Ok(0),
            0 => Err(SourceError::Unrecognised {
                path: path.to_owned(),
                detail: "it holds no series to replay".into(),
            }),
            _ => Err(SourceError::Ambiguous {
                path: path.to_owned(),
                series: series.to_vec(),
            }),
        },
    }
}

/// Refuse `path` unless it is a regular file (or, with `dirs`, a directory), before anything
/// opens it: opening a FIFO blocks until some other program opens its other end, and a
/// device or socket holds no recording.
///
/// # Errors
/// [`SourceError::Invalid`] naming what it is; [`SourceError::Io`] if it cannot be looked at.
pub(crate) fn regular(path: &Path, dirs: bool) -> Result<(), SourceError> {
    use std::os::unix::fs::FileTypeExt;
    let m = std::fs::metadata(path).map_err(io_error(path))?;
    let t = m.file_type();
    if t.is_file() || (dirs && t.is_dir()) {
        return Ok(());
    }
    let what = if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "a directory"
    };
    Err(invalid(
        path,
        format!(
            "is {what}, not a regular file; replay reads only regular files{}",
            if dirs { " and directories" } else { "" }
        ),
    ))
}

fn regular_file(path: &Path) -> Result<(), SourceError> {
    regular(path, false)
}

/// Map `path` read-only, advised for sequential reading: how replay reads every file.
///
/// # Errors
/// The file cannot be opened or mapped.
pub fn map_file(path: &Path) -> Result<Mmap, SourceError> {
    regular_file(path)?;
    let f = File::open(path).map_err(io_error(path))?;
    // SAFETY: the mapping is read-only and private to this process; what it could observe
    // is the file changing under it (another program truncating or rewriting a recording
    // while it is replayed), which at worst gives wrong sample values or a SIGBUS, never
    // undefined behaviour in Rust's sense for plain bytes read through `&[u8]` copies. A
    // recording being replayed is not written, as with numpy.memmap of the same file.
    let map = unsafe { Mmap::map(&f) }.map_err(io_error(path))?;
    let _ = map.advise(memmap2::Advice::Sequential);
    Ok(map)
}

/// How a [`FlatSource`]'s rows are paced.
#[derive(Debug)]
pub enum Pacing {
    /// Row `r` is due at `r / rate` seconds.
    Rate,
    /// One little-endian u64 stamp per row; rows with the same stamp were one commit and
    /// never share a block with another commit. A row's time is its commit's stamp, and in
    /// a stream with a rate the commit's earlier rows are back-dated one period per row
    /// after them (the stamp is the commit's, that is its last row's), as readers of a
    /// stream see them; row `r` is due at its time minus the first row's.
    Stamps(Mmap),
}

/// Flat samples in a mapped file: rows of `n_channels × itemsize` bytes from `offset` on.
#[derive(Debug)]
pub struct FlatSource {
    info: SourceInfo,
    map: Mmap,
    offset: usize,
    rows: u64,
    pacing: Pacing,
    events: Vec<SourceEvent>,
    /// The first row's time (ns; its stamp back-dated in its commit).
    t0: u64,
    /// The end of the commit [`FlatSource::time`] looked at last: rows are asked in order,
    /// so the next block's commit end is mostly known (the replay thread alone asks).
    commit_end: AtomicU64,
}

impl FlatSource {
    /// A source over `rows` rows of `map` from byte `offset` (checked to be there), with
    /// `events` (sorted here by row; those at or past the end dropped).
    ///
    /// # Errors
    /// [`SourceError::Invalid`] when the file is shorter than the rows, or the stamps fewer.
    pub fn new(
        mut info: SourceInfo,
        map: Mmap,
        offset: usize,
        rows: u64,
        pacing: Pacing,
        mut events: Vec<SourceEvent>,
    ) -> Result<FlatSource, SourceError> {
        let sb = (info.stream.dtype.itemsize() * info.stream.n_channels) as u64;
        let end = (offset as u64).saturating_add(rows.saturating_mul(sb));
        if info.stream.n_channels == 0 || end > map.len() as u64 {
            return Err(invalid(
                &info.path,
                format!(
                    "the samples are truncated: {rows} samples of {} channels need {end} bytes, the file has {}",
                    info.stream.n_channels,
                    map.len()
                ),
            ));
        }
        if let Pacing::Stamps(s) = &pacing {
            if (s.len() as u64) / 8 < rows {
                return Err(invalid(
                    &info.path,
                    format!("{} timestamps for {rows} samples", s.len() / 8),
                ));
            }
        }
        fit_labels(&mut info);
        events.retain(|e| e.row < rows);
        events.sort_by_key(|e| e.row);
        let mut src = FlatSource {
            info,
            map,
            offset,
            rows,
            pacing,
            events,
            t0: 0,
            commit_end: AtomicU64::new(0),
        };
        if rows > 0 {
            src.t0 = src.time(0);
        }
        Ok(src)
    }

    /// The series it plays.
    #[must_use]
    pub fn info_series(&self) -> &str {
        &self.info.series
    }

    /// Say the samples came from `path` in `format` (an XDF file converted to a recording).
    pub fn set_origin(&mut self, format: &str, path: &Path) {
        self.info.format = format.to_owned();
        self.info.path = path.to_owned();
    }

    fn stamp(&self, row: u64) -> u64 {
        match &self.pacing {
            Pacing::Rate => {
                if self.info.stream.nominal_rate > 0.0 {
                    (row as f64 * 1e9 / self.info.stream.nominal_rate) as u64
                } else {
                    0
                }
            }
            Pacing::Stamps(s) => {
                let at = row as usize * 8;
                u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"))
            }
        }
    }

    /// The end (exclusive) of the commit holding `row`: the run of rows with its stamp.
    fn commit_end_of(&self, row: u64) -> u64 {
        let stamp = self.stamp(row);
        // Ordering: a cache of a value derived from the read-only file: Relaxed.
        let cached = self.commit_end.load(Ordering::Relaxed);
        if row < cached
            && self.stamp(cached - 1) == stamp
            && (cached == self.rows || self.stamp(cached) != stamp)
        {
            return cached;
        }
        let mut end = row + 1;
        while end < self.rows && self.stamp(end) == stamp {
            end += 1;
        }
        self.commit_end.store(end, Ordering::Relaxed);
        end
    }

    /// Row `row`'s time in ns: its stamp at [`Pacing::Rate`]; at [`Pacing::Stamps`], its
    /// commit's stamp back-dated one period per later row of the commit (a stream with a
    /// rate) or the commit's stamp (an irregular stream).
    fn time(&self, row: u64) -> u64 {
        let rate = self.info.stream.nominal_rate;
        match self.pacing {
            Pacing::Stamps(_) if rate > 0.0 => {
                let after = self.commit_end_of(row) - row - 1;
                self.stamp(row)
                    .saturating_sub((after as f64 * 1e9 / rate).round() as u64)
            }
            _ => self.stamp(row),
        }
    }
}

impl ReplaySource for FlatSource {
    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn rows(&self) -> u64 {
        self.rows
    }

    fn events(&self) -> &[SourceEvent] {
        &self.events
    }

    fn block(&self, row: u64, max_rows: usize) -> Result<Block<'_>, SourceError> {
        let sb = self.info.stream.dtype.itemsize() * self.info.stream.n_channels;
        let mut n = (self.rows - row).min(max_rows.max(1) as u64) as usize;
        let first = self.stamp(row);
        if let Pacing::Stamps(_) = self.pacing {
            // the recorded commit: the rows carrying the same stamp
            if let Some(k) = (1..n).find(|&k| self.stamp(row + k as u64) != first) {
                n = k;
            }
        }
        let at = self.offset + row as usize * sb;
        Ok(Block {
            rows: n,
            due_ns: self.time(row + n as u64 - 1).saturating_sub(self.t0),
            bytes: &self.map[at..at + n * sb],
        })
    }

    fn span_seconds(&self) -> f64 {
        // from the first sample to the last, as the replay plays it
        match self.rows {
            0 => 0.0,
            n => self.time(n - 1).saturating_sub(self.t0) as f64 * 1e-9,
        }
    }
}

/// Cut `s` to at most `max` bytes at a character boundary.
fn cut(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

/// Names and units the stream header can hold (31 and 15 bytes).
fn fit_labels(info: &mut SourceInfo) {
    for n in &mut info.stream.ch_names {
        *n = cut(n, rtloop_stream::CH_NAME_MAX);
    }
    for u in &mut info.stream.ch_units {
        *u = cut(u, rtloop_stream::CH_UNIT_MAX);
    }
}

/// `[[value, count], ...]`: runs of equal values (a probe's 384 equal gains are one pair).
#[must_use]
pub fn runs(values: &[f64]) -> Vec<(f64, usize)> {
    let mut out: Vec<(f64, usize)> = Vec::new();
    for &v in values {
        match out.last_mut() {
            Some((x, n)) if x.to_bits() == v.to_bits() => *n += 1,
            _ => out.push((v, 1)),
        }
    }
    out
}

impl SourceInfo {
    /// The stream to create: the source's shape and labels, and for a source with gains a
    /// JSON description `{"replay": {format, series, file}, "gain": [[g, n], ...],
    /// "offset": [[o, n], ...]}` (runs of equal values; physical = raw × gain + offset, in
    /// the channel's unit). `capacity`: samples the stream keeps (default: 10 s, at least
    /// 65,536).
    ///
    /// # Errors
    /// The gains do not fit the stream header's description (more than a few hundred
    /// different values).
    pub fn stream_config(&self, capacity: Option<u64>) -> Result<StreamConfig, SourceError> {
        let mut cfg = self.stream.clone();
        let rate = cfg.nominal_rate;
        cfg.capacity = capacity.unwrap_or(((rate * 10.0) as u64).max(65_536));
        if !self.gains.is_empty() {
            let pairs = |v: &[f64]| -> serde_json::Value {
                runs(v)
                    .into_iter()
                    .map(|(x, n)| serde_json::json!([x, n]))
                    .collect()
            };
            let mut desc = serde_json::json!({
                "replay": {"format": self.format, "series": self.series, "file": self.path},
                "gain": pairs(&self.gains),
            });
            if self.offsets.iter().any(|&o| o != 0.0) {
                desc["offset"] = pairs(&self.offsets);
            }
            let budget = rtloop_stream::META_TEXT_MAX
                - cfg.ch_types.iter().map(|t| t.len() + 1).sum::<usize>();
            let mut text = desc.to_string();
            if text.len() > budget {
                // a long path is the first thing to go
                desc["replay"]["file"] = serde_json::json!(self
                    .path
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned()));
                text = desc.to_string();
            }
            if text.len() > budget {
                return Err(invalid(
                    &self.path,
                    format!(
                        "{} different channel gains do not fit the stream header ({} bytes of JSON, {budget} allowed)",
                        runs(&self.gains).len(),
                        text.len()
                    ),
                ));
            }
            cfg.description = text;
        }
        Ok(cfg)
    }

    /// The stream name made from the series ([`rtloop_stream::sanitize_name`]).
    #[must_use]
    pub fn default_stream_name(&self) -> String {
        rtloop_stream::sanitize_name(&self.series, "replay")
    }
}

/// How a replay went.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReplayReport {
    /// The stream written.
    pub stream: String,
    /// The format played.
    pub format: String,
    /// The series played.
    pub series: String,
    /// Samples written.
    pub samples: u64,
    /// Events written.
    pub events: u64,
    /// Seconds it took, from the moment its first sample was due to its last write.
    pub seconds: f64,
    /// Seconds from the recording's first sample to its last at its original pace (a paced
    /// replay at speed 1 takes at least this long).
    pub recorded_seconds: f64,
    /// Bytes of samples written.
    pub bytes: u64,
}

/// Errors of replaying.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The recording cannot be read.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The stream cannot be created or written.
    #[error("stream {stream:?}: {source}")]
    Stream {
        /// The stream.
        stream: String,
        /// The stream's error.
        source: Box<rtloop_stream::Error>,
    },
    /// A stream name that cannot be one.
    #[error("stream name {name:?}: {source}")]
    Name {
        /// The name given.
        name: String,
        /// Why it cannot be.
        source: rtloop_stream::NameError,
    },
    /// One stream name given for several series.
    #[error("--stream names one stream; with several series ({series}) each stream is named after its series")]
    OneStreamForSeveral {
        /// How many series were chosen.
        series: usize,
    },
    /// At the pace asked for, the next sample would come after so long a wait that the
    /// recording's timestamps or rate must be wrong.
    #[error("{path}: sample {row} is due {wait_s:.3e} s after the sample before it (the recorded pace, at --speed {speed}): its timestamps jump, or its rate ({rate} Hz) is too low; allowed: at most {} s between samples (--fast plays it without waiting)", MAX_PACED_WAIT_S)]
    Pace {
        /// The recording.
        path: PathBuf,
        /// The sample (its row in the recording).
        row: u64,
        /// The wait, seconds.
        wait_s: f64,
        /// The speed asked for.
        speed: f64,
        /// The recording's nominal rate.
        rate: f64,
    },
    /// Two series whose streams would have the same name.
    #[error("two series would play into stream {name:?}; pick them apart with --series")]
    SameStream {
        /// The stream.
        name: String,
    },
}

impl From<LoadError> for ReplayError {
    fn from(e: LoadError) -> Self {
        ReplayError::Source(SourceError::Load(e))
    }
}

/// How to play.
#[derive(Debug, Clone, Default)]
pub struct PlayOptions {
    /// A multiple of the original pace (`None`: as fast as possible).
    pub speed: Option<f64>,
    /// Samples the stream keeps (default: 10 s, at least 65,536).
    pub capacity: Option<u64>,
    /// The moment the first sample is due (default: when the stream is made). Replays of
    /// several series of one recording given the same moment play in step.
    pub start: Option<Instant>,
    /// Keep the stream's name once the replay ends (by default it ends with the replay:
    /// readers attached read it to the end, and nobody finds it afterwards).
    pub keep: bool,
}

/// The longest a paced replay waits between two samples, in seconds (a day): a recording
/// paused for a while replays its pause, but a longer wait is a jump in its timestamps or a
/// rate no recording has, which would hold the replay silently for ever.
pub const MAX_PACED_WAIT_S: f64 = 86_400.0;

/// How often a paced replay waiting for its next sample looks at its stop flag (ns).
const STOP_POLL_NS: u64 = 100_000_000;

/// A paced replay sleeps to this long before each block is due, then spins to it: a sleep
/// wakes tens of µs late on a VM, and the spin keeps the block on time at a few
/// per cent of a core.
const PACE_SPIN: Duration = Duration::from_micros(50);

/// Rows written at once as fast as possible: about 1 MiB.
pub const FAST_BLOCK_BYTES: usize = 1 << 20;

/// Play `src` into a new stream `name` (replacing one of that name nobody writes any
/// more): blocks of about a millisecond, each no earlier than its time at the original pace
/// divided by `speed` (or about 1 MiB blocks as fast as possible); an event goes out right
/// after the block holding its sample, at that sample (the stream's rows count from 0, as
/// the file's). `stop` ends it early. Paced, it sleeps between blocks and sets the calling
/// thread's timer slack to 1 µs (the thread keeps it), so those sleeps end on time.
///
/// # Errors
/// The stream cannot be created or written, or the source fails while being read.
pub fn play(
    src: &dyn ReplaySource,
    name: &str,
    opts: &PlayOptions,
    stop: &AtomicBool,
) -> Result<ReplayReport, ReplayError> {
    play_with(src, name, opts, stop, &|_| {})
}

/// [`play`], calling `created` with the stream's name once the stream exists and this
/// replay holds its writer (before the first sample: a caller can open its reader then).
///
/// # Errors
/// As [`play`].
pub fn play_with(
    src: &dyn ReplaySource,
    name: &str,
    opts: &PlayOptions,
    stop: &AtomicBool,
    created: &dyn Fn(&str),
) -> Result<ReplayReport, ReplayError> {
    let info = src.info();
    let serr = |e: rtloop_stream::Error| ReplayError::Stream {
        stream: name.to_owned(),
        source: Box::new(e),
    };
    let mut cfg = info.stream_config(opts.capacity)?;
    cfg.keep = opts.keep;
    // a stream of that name left by an earlier replay (closed or dead) is replaced; one
    // that a live writer holds is never touched
    let stream = Stream::create_replacing(name, &cfg).map_err(|e| serr(e.into()))?;
    let mut writer = stream.writer().map_err(|e| serr(e.into()))?;
    created(name);
    let sb = stream.info().sample_bytes;
    let cap = stream.info().capacity as usize;
    let max_rows = match opts.speed {
        // about a millisecond of samples per block
        Some(_) => ((cfg.nominal_rate / 1000.0).ceil() as usize).max(1),
        None => (FAST_BLOCK_BYTES / sb).max(1),
    }
    .min((cap / 4).max(1));
    let events = src.events();
    let (mut row, mut next_event, mut bytes) = (0u64, 0usize, 0u64);
    let started = opts.start.unwrap_or_else(Instant::now);
    // `started` on CLOCK_MONOTONIC (Instant's clock on Linux), where the waits sleep to; a
    // shared start may still be ahead (`elapsed` would say 0 for it)
    let (now, now_ns) = (Instant::now(), rtloop_sys::monotonic_ns());
    let origin_ns = match started.checked_duration_since(now) {
        Some(ahead) => now_ns + ahead.as_nanos() as u64,
        None => now_ns.saturating_sub(now.duration_since(started).as_nanos() as u64),
    };
    if opts.speed.is_some() {
        // an ordinary thread's sleeps may wake 50 µs late; the spin covers less
        let _ = rtloop_sys::set_timer_slack(Duration::from_micros(1));
    }
    let mut last_due = 0u64;
    'rows: while row < src.rows() {
        // Ordering: a flag with nothing published through it: Relaxed.
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let b = src.block(row, max_rows)?;
        if let Some(speed) = opts.speed {
            let wait_s = b.due_ns.saturating_sub(last_due) as f64 * 1e-9 / speed;
            // NaN cannot come from a finite speed > 0, but would be refused as well
            if wait_s.is_nan() || wait_s > MAX_PACED_WAIT_S {
                return Err(ReplayError::Pace {
                    path: info.path.clone(),
                    row,
                    wait_s,
                    speed,
                    rate: info.stream.nominal_rate,
                });
            }
            last_due = b.due_ns;
            let due = origin_ns.saturating_add((b.due_ns as f64 / speed) as u64);
            loop {
                let now = rtloop_sys::monotonic_ns();
                if now >= due {
                    break;
                }
                // a long wait still answers Ctrl-C and SIGTERM
                if stop.load(Ordering::Relaxed) {
                    break 'rows;
                }
                // a kernel sleep to just before the block, then a short spin: a spin for the
                // whole wait keeps a core busy at a 1 ms pace, and at SCHED_FIFO the kernel's
                // real-time throttling then stops the replay for ~50 ms once a second
                rtloop_sys::sleep_until(due.min(now + STOP_POLL_NS), PACE_SPIN);
            }
        }
        writer
            .write_bytes(b.bytes, None)
            .map_err(|e| serr(e.into()))?;
        row += b.rows as u64;
        bytes += b.bytes.len() as u64;
        while let Some(e) = events.get(next_event).filter(|e| e.row < row) {
            let mut ev = Event::new(e.kind.clone(), e.value.clone(), e.row);
            ev.offset = e.offset;
            ev.duration = e.duration;
            writer.push_event(&ev).map_err(|er| serr(er.into()))?;
            next_event += 1;
        }
    }
    Ok(ReplayReport {
        stream: name.to_owned(),
        format: info.format.clone(),
        series: info.series.clone(),
        samples: row,
        events: next_event as u64,
        // from the moment the first sample was due: a thread that began after a shared
        // start caught up with it, and its replay still took the span (from its own
        // beginning, it would seem shorter than the span)
        seconds: started.elapsed().as_secs_f64(),
        recorded_seconds: src.span_seconds(),
        bytes,
    })
}

/// An event's `type` or `value` as events.jsonl holds it.
fn json_value(v: &serde_json::Value) -> EventValue {
    match v {
        serde_json::Value::String(s) => EventValue::Text(s.clone()),
        serde_json::Value::Array(a) => EventValue::Array {
            dtype: DType::F64,
            bytes: a
                .iter()
                .flat_map(|x| x.as_f64().unwrap_or(0.0).to_ne_bytes())
                .collect(),
        },
        other => EventValue::Text(other.to_string()),
    }
}

/// An rtloop recording directory as a source: its samples in the blocks they were
/// committed in, at their recorded times, and its events at the rows holding their samples.
///
/// # Errors
/// The directory is not a readable recording.
pub fn open_recording(dir: &Path) -> Result<FlatSource, SourceError> {
    let rec = Recording::open(dir)?;
    let h = &rec.header;
    let hp = dir.join("header.json");
    let dtype: DType = h
        .dtype
        .parse()
        .map_err(|e: rtloop_stream::UnknownDType| invalid(&hp, e.to_string()))?;
    let events = rec
        .events()?
        .into_iter()
        .map(|e| SourceEvent {
            // the event's row (the one mapping, `Header::row_of`); in the new stream that
            // row is sample `row` (replay writes the rows back to back from 0)
            row: h.row_of(e["sample"].as_u64().unwrap_or(0)).0,
            kind: json_value(&e["type"]),
            value: json_value(&e["value"]),
            offset: e["offset"].as_i64().unwrap_or(0),
            duration: e["duration"].as_u64().unwrap_or(0),
        })
        .collect();
    let info = SourceInfo {
        format: crate::FORMAT.into(),
        path: dir.to_owned(),
        series: h.stream.clone(),
        stream: StreamConfig {
            ch_names: h.ch_names.clone(),
            ch_units: h.ch_units.clone(),
            ch_types: h.ch_types.clone(),
            content_type: h.content_type.clone(),
            source_id: h.source_id.clone(),
            description: h.description.clone(),
            ..StreamConfig::new(dtype, h.n_channels, h.sfreq, 0)
        },
        gains: Vec::new(),
        offsets: Vec::new(),
    };
    let data = map_file(&dir.join("data.bin"))?;
    let stamps = map_file(&dir.join("timestamps.bin"))?;
    FlatSource::new(info, data, 0, rec.samples, Pacing::Stamps(stamps), events)
}

/// Play recording `dir` into a new stream `name` (replacing one of that name): at the
/// original pace times `speed`, or as fast as possible with `speed = None`. Samples go out in
/// the blocks they were committed in, each no earlier than its recorded offset from the first
/// divided by `speed`; events go out when their sample does.
///
/// # Errors
/// The recording cannot be read, or the stream created or written.
pub fn replay(
    dir: &Path,
    name: &str,
    speed: Option<f64>,
    stop: &AtomicBool,
) -> Result<ReplayReport, ReplayError> {
    let src = open_recording(dir)?;
    play(
        &src,
        name,
        &PlayOptions {
            speed,
            ..PlayOptions::default()
        },
        stop,
    )
}

/// Which series of a file or directory to replay, and into which streams (what `rtloop
/// replay`'s `--series`, `--all` and `--stream` choose).
#[derive(Debug, Clone, Default)]
pub struct ReplaySelection {
    /// Series to play, each into its own stream (empty: the file's only series; a file of
    /// several refuses to guess and lists them).
    pub series: Vec<String>,
    /// Every series of the file, each into its own stream.
    pub all: bool,
    /// The stream's name (one series only; default: the recorded stream's name, or the
    /// series name made a valid stream name).
    pub stream: Option<String>,
}

/// Every chosen series opened and its stream name checked, before anything plays.
pub struct ReplayPlan {
    plays: Vec<(String, crate::replay::FlatSource)>,
}

impl ReplayPlan {
    /// Open what `sel` chooses of `path`.
    ///
    /// # Errors
    /// The file cannot be read or holds no such series; a stream name is not a valid one,
    /// or two series would go into one stream.
    pub fn open(path: &Path, sel: &ReplaySelection) -> Result<ReplayPlan, ReplayError> {
        let wanted: Vec<Option<String>> = if sel.all {
            crate::formats::series(path)?
                .into_iter()
                .map(Some)
                .collect()
        } else if sel.series.is_empty() {
            vec![None]
        } else {
            sel.series.iter().cloned().map(Some).collect()
        };
        if wanted.len() > 1 && sel.stream.is_some() {
            return Err(ReplayError::OneStreamForSeveral {
                series: wanted.len(),
            });
        }
        let mut plays: Vec<(String, FlatSource)> = Vec::new();
        for w in &wanted {
            let src = crate::formats::open(path, w.as_deref())?;
            let name = sel
                .stream
                .clone()
                .unwrap_or_else(|| src.info().default_stream_name());
            rtloop_stream::validate_name(&name).map_err(|source| ReplayError::Name {
                name: name.clone(),
                source,
            })?;
            if plays.iter().any(|(n, _)| *n == name) {
                return Err(ReplayError::SameStream { name });
            }
            plays.push((name, src));
        }
        Ok(ReplayPlan { plays })
    }

    /// The streams and the sources that play into them.
    pub fn plays(&self) -> impl Iterator<Item = (&str, &FlatSource)> {
        self.plays.iter().map(|(n, s)| (n.as_str(), s))
    }

    /// Play every series, each on its own thread into its own stream; paced series
    /// (`speed` given) start together, their first samples due at one moment a little after
    /// the streams are made; `created` is called with each stream's name once it exists.
    /// The first error stops the others.
    ///
    /// # Errors
    /// The first series that failed, as [`play`] fails.
    pub fn play(
        &self,
        speed: Option<f64>,
        capacity: Option<u64>,
        keep: bool,
        stop: &AtomicBool,
        created: &(dyn Fn(&str) + Sync),
    ) -> Result<Vec<ReplayReport>, ReplayError> {
        let opts = PlayOptions {
            speed,
            capacity,
            start: speed.map(|_| Instant::now() + Duration::from_millis(50)),
            keep,
        };
        let results: Vec<_> = std::thread::scope(|sc| {
            let handles: Vec<_> = self
                .plays
                .iter()
                .map(|(name, src)| {
                    let opts = &opts;
                    sc.spawn(move || {
                        let r = play_with(src, name, opts, stop, created);
                        if r.is_err() {
                            // Relaxed: a flag polled by the other replays; nothing is
                            // published through it
                            stop.store(true, Ordering::Relaxed);
                        }
                        r
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a replay thread panicked"))
                .collect()
        });
        results.into_iter().collect()
    }
}
