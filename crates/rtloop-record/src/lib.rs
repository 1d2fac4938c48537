//! The recorder: a stream to disk at full rate, readable at any moment.
//!
//! A recording of stream `S` is a directory `DIR/S/`:
//!
//! | file | contents |
//! |---|---|
//! | `data.bin` | the samples, flat, little-endian, sample-major: `numpy.memmap(..., dtype, shape=(n, channels))` |
//! | `timestamps.bin` | one u64 per sample: CLOCK_MONOTONIC ns of the commit that carried it |
//! | `events.jsonl` | one JSON object per event (type, value, sample, offset, duration, stamp_ns) |
//! | `header.json` | dtype, channels, names, units, rate, first sample index and time, rtloop version; rewritten (write + rename) as the recording goes, with the sample count, lost samples and gaps |
//!
//! Samples are appended with plain writes, flushed every `flush_every` (so a `kill -9` loses
//! at most that much) and fsynced every `fsync_every` (power loss). A reader of the recording
//! takes the sample count from the file sizes, so a recording cut anywhere is readable up to
//! its last whole sample; `header.json` says whether it ended cleanly (`complete`).
//!
//! The recorder reads in latest-wins mode: it never holds the writer back. If it is lapped
//! anyway (the disk is slower than the stream) it records the gap and counts the lost samples.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rtloop_stream::{EventValue, Liveness, Pulled, ReadError, ReaderMode, Stream};
use rtloop_sys as sys;
use serde::{Deserialize, Serialize};

pub mod control;
pub mod formats;
pub mod replay;
pub mod xdf;

pub use replay::{
    play, play_with, replay, PlayOptions, ReplayError, ReplayPlan, ReplayReport, ReplaySelection,
    ReplaySource, SourceError,
};

/// The format name written in every header.
pub const FORMAT: &str = "rtloop-recording";

/// What `header.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Always [`FORMAT`].
    pub format: String,
    /// Format version (1).
    pub version: u32,
    /// The stream's name.
    pub stream: String,
    /// numpy dtype name (`"int16"`, ...), little-endian.
    pub dtype: String,
    /// Channels per sample.
    pub n_channels: usize,
    /// Channel names.
    pub ch_names: Vec<String>,
    /// Channel units.
    pub ch_units: Vec<String>,
    /// Channel types (empty: none given), as the stream had them.
    #[serde(default)]
    pub ch_types: Vec<String>,
    /// The stream's content type (LSL's stream type; empty: none given).
    #[serde(default)]
    pub content_type: String,
    /// The stream's source id (empty: none given).
    #[serde(default)]
    pub source_id: String,
    /// The stream's free-form description (empty: none given).
    #[serde(default)]
    pub description: String,
    /// Nominal rate, Hz (0 = irregular).
    pub sfreq: f64,
    /// The stream's absolute index of the first recorded sample.
    pub first_sample: u64,
    /// CLOCK_MONOTONIC ns when recording started.
    pub start_monotonic_ns: u64,
    /// Wall-clock ns since the Unix epoch when recording started.
    pub start_unix_ns: u64,
    /// Samples in `data.bin` at the last header update.
    pub samples: u64,
    /// Events in `events.jsonl` at the last header update.
    pub events: u64,
    /// Samples the recorder lost because the stream lapped it: the sum of `gaps`, plus any
    /// lost before the first recorded sample (which `first_sample` already skips).
    pub lost_samples: u64,
    /// Where samples were lost between recorded ones: (row of `data.bin` right after the
    /// gap, samples lost there). Row `r` holds stream sample `first_sample + r + (the lost
    /// counts of every gap at a row <= r)`: see [`Header::row_of`].
    pub gaps: Vec<(u64, u64)>,
    /// Events the recorder lost because the stream's event ring lapped it.
    #[serde(default)]
    pub lost_events: u64,
    /// The recording ended cleanly (false while it runs or if it was cut).
    pub complete: bool,
    /// Why it ended (`"stopped"`, `"writer closed"`, `"writer died"`, an error).
    pub ended: Option<String>,
    /// The rtloop version that wrote it.
    pub rtloop_version: String,
    /// Segment number (1-based): a long recording split by size or time continues in
    /// `NAME.0002`, `NAME.0003`, ... beside the first directory.
    #[serde(default = "one")]
    pub segment: u32,
}

fn one() -> u32 {
    1
}

impl Header {
    /// The row of `data.bin` for stream sample `sample`: [`row_of`] with this header's first
    /// sample and gaps.
    #[must_use]
    pub fn row_of(&self, sample: u64) -> (u64, bool) {
        row_of(self.first_sample, &self.gaps, sample)
    }

    /// The stream sample index held by row `row` (the inverse of [`Header::row_of`]).
    #[must_use]
    pub fn sample_of(&self, row: u64) -> u64 {
        sample_of(self.first_sample, &self.gaps, row)
    }
}

/// The row of `data.bin` for stream sample `sample`, in a recording whose first row holds
/// `first_sample` and that lost samples in `gaps` (`(row after the gap, samples lost)`, as
/// [`Header::gaps`]): `(row, true)` if that sample was recorded there; `(row, false)` if it
/// was not (lost in a gap, or before the first recorded sample), with `row` the first
/// recorded row after it. The one mapping from stream indices to rows: loading (also from
/// Python, `rtloop.recording.row_of`), replay and the XDF and NWB exports all use it.
#[must_use]
pub fn row_of(first_sample: u64, gaps: &[(u64, u64)], sample: u64) -> (u64, bool) {
    if sample < first_sample {
        return (0, false);
    }
    let (mut row, mut base) = (0u64, first_sample);
    for &(at, lost) in gaps {
        // rows [row, at) hold samples [base, base + at - row)
        let end = base + at.saturating_sub(row);
        if sample < end {
            return (row + (sample - base), true);
        }
        if sample < end + lost {
            return (at, false);
        }
        (row, base) = (at.max(row), end + lost);
    }
    (row + (sample - base), true)
}

/// The stream sample index held by row `row` (the inverse of [`row_of`]): `first_sample +
/// row` plus the samples lost in every gap at a row `<= row`.
#[must_use]
pub fn sample_of(first_sample: u64, gaps: &[(u64, u64)], row: u64) -> u64 {
    first_sample
        + row
        + gaps
            .iter()
            .filter(|&&(at, _)| at <= row)
            .map(|&(_, lost)| lost)
            .sum::<u64>()
}

/// Errors of recording.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The stream could not be opened or read.
    #[error("stream {stream:?}: {source}{hint}")]
    Stream {
        /// The stream.
        stream: String,
        /// The stream's error.
        source: Box<rtloop_stream::Error>,
        /// What to do about it, where there is something to say.
        hint: &'static str,
    },
    /// A recorder's thread panicked (a bug); what it recorded before stays readable.
    #[error("stream {stream:?}: the recorder's thread panicked")]
    Panicked {
        /// The stream.
        stream: String,
    },
    /// The place to write is not safe to write into: a directory of another user, or a
    /// symbolic link (or other non-directory) where a recording's directory goes. Nothing is
    /// written there.
    #[error("{path}: {reason}; rtloop record writes only into directories of its own user and never follows a link where it creates something (remove it, or choose another --out)")]
    Refused {
        /// The directory or link.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A file could not be written (not writable, disk full, ...). What was written so far
    /// stays readable.
    #[error("{path}: {source} (what was recorded before stays readable)")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
}

/// Why a session did not start ([`Session::wait_started`]).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The recorder of this stream ended before it started.
    #[error("the recorder of stream {0:?} ended before it started")]
    Ended(String),
    /// Not every recorder started in time.
    #[error("the recorders did not all start within {0:?}")]
    Timeout(std::time::Duration),
}

/// Recording several streams at once, one thread each (what `rtloop record` and
/// `rtloop.record` run): started by [`Session::start`], stopped by [`Session::stop`] (or
/// its duration, or when every writer is gone), its reports from [`Session::join`].
pub struct Session {
    streams: Vec<String>,
    controls: Vec<std::sync::Arc<Control>>,
    handles: Vec<std::thread::JoinHandle<Result<RecordReport, RecordError>>>,
}

impl Session {
    /// Check that every stream exists and `out` is writable, then start one recorder thread
    /// per stream into `out/<stream>/` (paused until [`Control::paused`] is cleared when
    /// `paused`).
    ///
    /// # Errors
    /// A stream that does not exist (named, with where to look), or `out` not creatable or
    /// not writable; nothing is started then.
    pub fn start(
        streams: &[String],
        out: &Path,
        cfg: &RecordConfig,
        paused: bool,
    ) -> Result<Session, RecordError> {
        for s in streams {
            if let Err(e) = rtloop_stream::Stream::open(s) {
                return Err(RecordError::Stream {
                    stream: s.clone(),
                    source: Box::new(e.into()),
                    hint: "; nothing to record (see `rtloop stream list`)",
                });
            }
        }
        let dir = open_out_dir(out)?;
        let probe = ".rtloop-write-test";
        create_private_at(&dir, probe).map_err(io_err(out))?;
        let _ = rustix::fs::unlinkat(&dir, probe, rustix::fs::AtFlags::empty());
        let controls: Vec<std::sync::Arc<Control>> = streams
            .iter()
            .map(|_| {
                let c = Control::default();
                c.paused.store(paused, Ordering::Relaxed);
                std::sync::Arc::new(c)
            })
            .collect();
        let handles = streams
            .iter()
            .zip(&controls)
            .map(|(s, c)| {
                let (s, out, cfg, c) = (s.clone(), out.to_path_buf(), cfg.clone(), c.clone());
                std::thread::spawn(move || record(&s, &out, &cfg, &c))
            })
            .collect();
        Ok(Session {
            streams: streams.to_vec(),
            controls,
            handles,
        })
    }

    /// The streams, in the order of [`Session::controls`].
    #[must_use]
    pub fn streams(&self) -> &[String] {
        &self.streams
    }

    /// Each recorder's control (pause, split, stop, live counters).
    #[must_use]
    pub fn controls(&self) -> &[std::sync::Arc<Control>] {
        &self.controls
    }

    /// Serve the control socket ([`control`]) for this session's recorders at `path`,
    /// until the returned socket is closed or dropped.
    ///
    /// # Errors
    /// The socket cannot be made at `path`.
    pub fn serve_control(&self, path: &Path) -> io::Result<control::ControlSocket> {
        control::ControlSocket::serve(path, self.streams.clone(), self.controls.clone())
    }

    /// Wait until every recorder has started (its reader registered, its header written), so
    /// that nothing written from now on is missed: the one way to know a session is
    /// recording. Polls every millisecond.
    ///
    /// # Errors
    /// A recorder ended before it started ([`StartError::Ended`]: [`Session::join`] says
    /// why), or `timeout` passed first.
    pub fn wait_started(&self, timeout: std::time::Duration) -> Result<(), StartError> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut all = true;
            for ((s, c), h) in self.streams.iter().zip(&self.controls).zip(&self.handles) {
                if !c.started.load(Ordering::Relaxed) {
                    if h.is_finished() {
                        return Err(StartError::Ended(s.clone()));
                    }
                    all = false;
                }
            }
            if all {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(StartError::Timeout(timeout));
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Ask every recorder to stop (they finish their files and end).
    pub fn stop(&self) {
        for c in &self.controls {
            c.stop.store(true, Ordering::Relaxed);
        }
    }

    /// True once every recorder has ended.
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.handles
            .iter()
            .all(std::thread::JoinHandle::is_finished)
    }

    /// Wait for every recorder: the reports of those that ended well, and the errors of
    /// the others (what they recorded before stays readable).
    #[must_use]
    pub fn join(self) -> (Vec<RecordReport>, Vec<RecordError>) {
        let mut reports = Vec::new();
        let mut errors = Vec::new();
        for (h, stream) in self.handles.into_iter().zip(self.streams) {
            match h.join() {
                Ok(Ok(r)) => reports.push(r),
                Ok(Err(e)) => errors.push(e),
                Err(_) => errors.push(RecordError::Panicked { stream }),
            }
        }
        (reports, errors)
    }
}

/// The most sample bytes the recorder takes from the ring (and writes) at once.
pub const MAX_WINDOW_BYTES: usize = 4 << 20;

/// Recording settings.
#[derive(Debug, Clone)]
pub struct RecordConfig {
    /// Hand written data to the OS this often (bounds what a `kill -9` loses).
    pub flush_every: Duration,
    /// fsync this often (bounds what a power loss loses).
    pub fsync_every: Duration,
    /// Stop after this long (`None`: until stopped).
    pub duration: Option<Duration>,
    /// Start a new segment once the current one holds this many bytes of samples.
    pub split_bytes: Option<u64>,
    /// Start a new segment after this long.
    pub split_every: Option<Duration>,
    /// Read losslessly, holding the writer back (for measuring the recorder's ceiling; a
    /// recording of a live source uses latest-wins so it never slows the source).
    pub lossless: bool,
    /// Start at this sample instead of the newest (it must still be in the stream).
    pub start_at: Option<u64>,
}

impl Default for RecordConfig {
    fn default() -> Self {
        RecordConfig {
            flush_every: Duration::from_millis(100),
            fsync_every: Duration::from_secs(1),
            duration: None,
            split_bytes: None,
            split_every: None,
            lossless: false,
            start_at: None,
        }
    }
}

/// How a recording went.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RecordReport {
    /// The recording's directory.
    pub dir: PathBuf,
    /// Samples recorded.
    pub samples: u64,
    /// Events recorded.
    pub events: u64,
    /// Samples lost (the recorder was lapped).
    pub lost_samples: u64,
    /// Events lost (the event ring lapped the recorder).
    pub lost_events: u64,
    /// Bytes of sample data written.
    pub bytes: u64,
    /// Seconds recorded.
    pub seconds: f64,
    /// Why it ended.
    pub ended: String,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> RecordError + '_ {
    move |source| RecordError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Recordings are private to the user who made them, whatever the umask.
const FILE_MODE: u32 = 0o600;
/// See [`FILE_MODE`].
const DIR_MODE: u32 = 0o700;

fn owner_only(mode: u32) -> rustix::fs::Mode {
    rustix::fs::Mode::from_raw_mode(mode)
}

/// Refuse a directory this user does not own: files written into it could be replaced,
/// linked or read by its owner (and root must not write where another user prepared).
fn check_owner(dir: &OwnedFd, path: &Path) -> Result<(), RecordError> {
    let st = rustix::fs::fstat(dir).map_err(|e| io_err(path)(e.into()))?;
    let me = rustix::process::geteuid().as_raw();
    if st.st_uid != me {
        return Err(RecordError::Refused {
            path: path.to_owned(),
            reason: format!(
                "the directory belongs to uid {}, not to this user (uid {me})",
                st.st_uid
            ),
        });
    }
    Ok(())
}

/// The directory recordings go into (`--out`), open: created (with missing parents) 0700
/// whatever the umask if it is missing, refused if it belongs to another user. A link
/// given as `out` itself is followed (that is the user's own choice of path); every name
/// created inside it is not.
fn open_out_dir(out: &Path) -> Result<OwnedFd, RecordError> {
    use rustix::fs::{Mode, OFlags, CWD};
    use std::os::unix::fs::DirBuilderExt;
    let created = match rustix::fs::mkdir(out, owner_only(DIR_MODE)) {
        Ok(()) => true,
        Err(rustix::io::Errno::EXIST) => false,
        Err(rustix::io::Errno::NOENT) => {
            // missing parents: owner-only too (the umask can only take bits away)
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(DIR_MODE)
                .create(out)
                .map_err(io_err(out))?;
            true
        }
        Err(e) => return Err(io_err(out)(e.into())),
    };
    let dir = rustix::fs::openat(
        CWD,
        out,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io_err(out)(e.into()))?;
    check_owner(&dir, out)?;
    if created {
        rustix::fs::fchmod(&dir, owner_only(DIR_MODE)).map_err(|e| io_err(out)(e.into()))?;
    }
    Ok(dir)
}

/// Make (or reuse) the directory `name` in `parent`, owner-only, without following a link
/// planted there; an existing one must be this user's.
fn private_dir_at(parent: &OwnedFd, name: &str, path: &Path) -> Result<OwnedFd, RecordError> {
    use rustix::fs::{Mode, OFlags};
    match rustix::fs::mkdirat(parent, name, owner_only(DIR_MODE)) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
        Err(e) => return Err(io_err(path)(e.into())),
    }
    let dir = match rustix::fs::openat(
        parent,
        name,
        OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(d) => d,
        Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
            let what = match std::fs::symlink_metadata(path) {
                Ok(m) if m.file_type().is_symlink() => "is a symbolic link",
                _ => "exists and is not a directory",
            };
            return Err(RecordError::Refused {
                path: path.to_owned(),
                reason: format!("where the recording's directory goes {what}"),
            });
        }
        Err(e) => return Err(io_err(path)(e.into())),
    };
    check_owner(&dir, path)?;
    rustix::fs::fchmod(&dir, owner_only(DIR_MODE)).map_err(|e| io_err(path)(e.into()))?;
    Ok(dir)
}

/// Create `name` in `dir` owner-only, as a new file: O_EXCL|O_NOFOLLOW, so nothing planted
/// there (a link to another file) is ever opened. What is there already (a previous
/// recording's file, a link) is unlinked first, which never touches what a link points to.
fn create_private_at(dir: &OwnedFd, name: &str) -> io::Result<File> {
    use rustix::fs::OFlags;
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(dir, name, flags, owner_only(FILE_MODE)) {
        Err(rustix::io::Errno::EXIST) => {
            rustix::fs::unlinkat(dir, name, rustix::fs::AtFlags::empty())?;
            rustix::fs::openat(dir, name, flags, owner_only(FILE_MODE))?
        }
        r => r?,
    };
    // the umask may have taken bits away from 0600; the file is new, so this is its mode
    rustix::fs::fchmod(&fd, owner_only(FILE_MODE))?;
    Ok(File::from(fd))
}

fn write_header(dir: &OwnedFd, path: &Path, h: &Header) -> Result<(), RecordError> {
    let tmp = path.join("header.json.tmp");
    let text = serde_json::to_vec_pretty(h).expect("a header serialises");
    create_private_at(dir, "header.json.tmp")
        .and_then(|mut f| f.write_all(&text))
        .map_err(io_err(&tmp))?;
    // rename replaces a link at header.json itself, never what it points to
    rustix::fs::renameat(dir, "header.json.tmp", dir, "header.json")
        .map_err(|e| io_err(&path.join("header.json"))(e.into()))
}

fn event_json(e: &rtloop_stream::Event) -> serde_json::Value {
    let v = |x: &EventValue| match x {
        EventValue::Text(s) => serde_json::json!(s),
        EventValue::Array { .. } => serde_json::json!(x.to_f64s().unwrap_or_default()),
    };
    serde_json::json!({
        "type": v(&e.kind), "value": v(&e.value), "sample": e.sample,
        "offset": e.offset, "duration": e.duration as i64, "stamp_ns": e.stamp_ns,
    })
}

/// Live control of a recording (the control socket and the Python API use it).
#[derive(Debug, Default)]
pub struct Control {
    // Ordering: flags and counters with no data published through them: Relaxed.
    /// End the recording.
    pub stop: AtomicBool,
    /// Discard samples instead of writing them (a recorder started with `--wait-start`).
    pub paused: AtomicBool,
    /// Close the current segment and start the next one.
    pub split: AtomicBool,
    /// Samples written so far (all segments).
    pub samples: std::sync::atomic::AtomicU64,
    /// Samples lost so far.
    pub lost: std::sync::atomic::AtomicU64,
    /// Events lost so far.
    pub lost_events: std::sync::atomic::AtomicU64,
    /// 0: none; else the recording ends once every sample before this one was written (the
    /// runtime's recorder sink stops exactly at the model's last tick).
    pub end_sample: std::sync::atomic::AtomicU64,
    /// Set once the recorder's reader is registered and its first header written: from then
    /// on nothing the writer commits is missed. [`Session::wait_started`] waits for it.
    pub started: AtomicBool,
}

/// One segment's open files and header.
struct Segment {
    dir: PathBuf,
    fd: OwnedFd,
    header: Header,
    data: (BufWriter<File>, PathBuf),
    stamps: (BufWriter<File>, PathBuf),
    events: (BufWriter<File>, PathBuf),
    bytes: u64,
    opened: Instant,
}

impl Segment {
    /// Open segment `name` (a directory in `out`) with fresh files.
    fn open(
        out: &OwnedFd,
        dir: PathBuf,
        name: &str,
        header: Header,
    ) -> Result<Segment, RecordError> {
        let fd = private_dir_at(out, name, &dir)?;
        let open = |f: &str| -> Result<(BufWriter<File>, PathBuf), RecordError> {
            let p = dir.join(f);
            let file = create_private_at(&fd, f).map_err(io_err(&p))?;
            Ok((BufWriter::with_capacity(1 << 20, file), p))
        };
        let (data, stamps, events) = (
            open("data.bin")?,
            open("timestamps.bin")?,
            open("events.jsonl")?,
        );
        let seg = Segment {
            fd,
            data,
            stamps,
            events,
            header,
            bytes: 0,
            opened: Instant::now(),
            dir,
        };
        write_header(&seg.fd, &seg.dir, &seg.header)?;
        Ok(seg)
    }

    fn flush(&mut self, sync: bool) -> Result<(), RecordError> {
        for (w, p) in [&mut self.data, &mut self.stamps, &mut self.events] {
            w.flush().map_err(io_err(p))?;
            if sync {
                w.get_ref().sync_data().map_err(io_err(p))?;
            }
        }
        if sync {
            write_header(&self.fd, &self.dir, &self.header)?;
        }
        Ok(())
    }

    fn close(mut self, ended: &str) -> Result<Header, RecordError> {
        self.header.complete = true;
        self.header.ended = Some(ended.to_owned());
        self.flush(true)?;
        Ok(self.header)
    }
}

/// The directory of segment `k` (1-based) of stream `name`: `out/name`, then `out/name.0002`...
#[must_use]
pub fn segment_dir(out: &Path, name: &str, k: u32) -> PathBuf {
    out.join(segment_name(name, k))
}

/// The directory name of segment `k` (1-based) of stream `name` (see [`segment_dir`]).
fn segment_name(name: &str, k: u32) -> String {
    if k <= 1 {
        name.to_owned()
    } else {
        format!("{name}.{k:04}")
    }
}

/// Record stream `name` into `out/<name>/` (and `out/<name>.0002`... when split) until
/// `control.stop` is set, the duration passes or the stream's writer goes away; `control` also
/// pauses and splits the recording while it runs.
pub fn record(
    name: &str,
    out: &Path,
    cfg: &RecordConfig,
    control: &Control,
) -> Result<RecordReport, RecordError> {
    let serr = |e: rtloop_stream::Error| RecordError::Stream {
        stream: name.to_owned(),
        source: Box::new(e),
        hint: "",
    };
    let stream = Stream::open(name).map_err(|e| serr(e.into()))?;
    let info = stream.info().clone();
    let mode = if cfg.lossless {
        ReaderMode::Lossless
    } else {
        ReaderMode::Latest
    };
    let mut reader = stream.reader(mode).map_err(|e| serr(e.into()))?;
    if let Some(first) = cfg.start_at {
        reader.seek(first).map_err(|e| serr(e.into()))?;
    }
    let mut header = Header {
        format: FORMAT.into(),
        version: 1,
        stream: name.into(),
        dtype: info.dtype.name().into(),
        n_channels: info.n_channels,
        ch_names: info.ch_names.clone(),
        ch_units: info.ch_units.clone(),
        ch_types: info.ch_types.clone(),
        content_type: info.content_type.clone(),
        source_id: info.source_id.clone(),
        description: info.description.clone(),
        sfreq: info.nominal_rate,
        first_sample: reader.cursor(),
        start_monotonic_ns: sys::monotonic_ns(),
        start_unix_ns: sys::realtime_ns(),
        samples: 0,
        events: 0,
        lost_samples: 0,
        gaps: Vec::new(),
        lost_events: 0,
        complete: false,
        ended: None,
        rtloop_version: env!("CARGO_PKG_VERSION").into(),
        segment: 1,
    };
    let out_fd = open_out_dir(out)?;
    let first_dir = segment_dir(out, name, 1);
    let mut seg = Segment::open(&out_fd, first_dir.clone(), name, header.clone())?;
    control.started.store(true, Ordering::Relaxed);
    let sb = info.sample_bytes;
    let chunk = (MAX_WINDOW_BYTES / sb).clamp(1, info.capacity as usize);
    let mut buf = vec![0u8; chunk * sb];
    let mut st = vec![0u64; chunk];
    let mut st_bytes = Vec::with_capacity(chunk * 8);
    let started = Instant::now();
    let (mut last_flush, mut last_sync) = (Instant::now(), Instant::now());
    let (mut total, mut total_events, mut total_lost, mut total_bytes) = (0u64, 0u64, 0u64, 0u64);
    let mut total_lost_events = 0u64;
    let ended = loop {
        if control.stop.load(Ordering::Relaxed) {
            break "stopped".to_string();
        }
        let end = control.end_sample.load(Ordering::Relaxed);
        if end > 0 && reader.cursor() >= end {
            break "stopped".to_string();
        }
        if cfg.duration.is_some_and(|d| started.elapsed() >= d) {
            break "stopped".to_string();
        }
        let paused = control.paused.load(Ordering::Relaxed);
        let due_split = control.split.swap(false, Ordering::Relaxed)
            || cfg.split_bytes.is_some_and(|b| seg.bytes >= b)
            || cfg.split_every.is_some_and(|d| seg.opened.elapsed() >= d);
        if due_split && !paused {
            let k = seg.header.segment + 1;
            let mut h = seg.header.clone();
            h.segment = k;
            h.first_sample = reader.cursor();
            h.start_monotonic_ns = sys::monotonic_ns();
            h.start_unix_ns = sys::realtime_ns();
            (h.samples, h.events, h.lost_samples, h.gaps) = (0, 0, 0, Vec::new());
            h.lost_events = 0;
            let next = match Segment::open(
                &out_fd,
                segment_dir(out, name, k),
                &segment_name(name, k),
                h,
            ) {
                Ok(n) => n,
                Err(e) => {
                    // what was recorded so far ends cleanly, saying why it stopped
                    let _ = seg.close(&format!("stopped: the next segment: {e}"));
                    return Err(e);
                }
            };
            let old = std::mem::replace(&mut seg, next);
            old.close("split")?;
        }
        let want = if end > 0 {
            (end.saturating_sub(reader.cursor()) as usize).min(chunk)
        } else {
            chunk
        };
        // A lossless recorder writes the samples to the file where they lie in the ring (the
        // writer waits for this reader's cursor, so they stay put until `seek` below): one
        // copy fewer than pulling them out first. Anything else (a latest-mode recorder, a
        // pause, a window that is no longer kept) takes the validated copy.
        let in_place = if cfg.lossless && !paused {
            let first = reader.cursor();
            let n = reader.available().min(want as u64);
            match (n > 0).then(|| reader.window(first, first + n)) {
                Some(Ok(win)) => {
                    // the stamps first: a read error then ends the recording (below) with
                    // nothing of this window written, as for the copying path
                    match reader.read_stamps(first, first + n, &mut st[..n as usize]) {
                        Err(e) => Some(Err(e)),
                        Ok(()) => {
                            // SAFETY: a lossless reader's window starting at its cursor: the
                            // writer does not store to these samples until the cursor moves
                            // past them, which happens only after the write below (`seek`).
                            let bytes = unsafe { win.bytes() };
                            let (w, path) = &mut seg.data;
                            w.write_all(bytes).map_err(io_err(path))?;
                            Some(reader.seek(first + n).map(|()| Pulled {
                                first,
                                n: n as usize,
                            }))
                        }
                    }
                }
                _ => None,
            }
        } else {
            None
        };
        let written_already = in_place.is_some();
        let pulled = match in_place {
            Some(p) => p,
            None => reader.pull_into(&mut buf, Some(&mut st), want),
        };
        match pulled {
            Ok(p) if p.n > 0 && paused => {
                // waiting for `start`: the samples pass by unrecorded
                if seg.header.samples == 0 {
                    seg.header.first_sample = p.first + p.n as u64;
                }
            }
            Ok(p) if p.n > 0 => {
                if seg.header.samples == 0 {
                    seg.header.first_sample = p.first;
                    seg.header.start_monotonic_ns = st[0];
                }
                if !written_already {
                    let (w, path) = &mut seg.data;
                    w.write_all(&buf[..p.n * sb]).map_err(io_err(path))?;
                }
                st_bytes.clear();
                for s in &st[..p.n] {
                    st_bytes.extend_from_slice(&s.to_le_bytes());
                }
                let (w, path) = &mut seg.stamps;
                w.write_all(&st_bytes).map_err(io_err(path))?;
                seg.header.samples += p.n as u64;
                seg.bytes += (p.n * sb) as u64;
                total += p.n as u64;
                total_bytes += (p.n * sb) as u64;
                control.samples.store(total, Ordering::Relaxed);
            }
            Ok(_) => {
                match reader.writer_liveness() {
                    Liveness::Closed => break "writer closed".to_string(),
                    Liveness::Dead { pid } => break format!("writer died (pid {pid})"),
                    _ => {}
                }
                let _ = reader.wait_available(1, Some(Duration::from_millis(50)));
            }
            Err(ReadError::Overrun { lost, .. }) => {
                tracing::warn!(stream = name, lost, "the recorder was lapped");
                if !paused {
                    seg.header.lost_samples += lost;
                    // before the first recorded sample there is no gap between rows: the
                    // first write sets `first_sample` past the loss (a gap at row 0 as well
                    // would count it twice and misplace every row)
                    if seg.header.samples > 0 {
                        let at = seg.header.samples;
                        seg.header.gaps.push((at, lost));
                    }
                    total_lost += lost;
                    control.lost.store(total_lost, Ordering::Relaxed);
                }
            }
            Err(e) => break format!("read error: {e}"),
        }
        let (evs, lost) = pull_events_counting(&mut reader, name);
        if !paused {
            keep_events(
                &mut seg,
                control,
                evs,
                lost,
                (&mut total_events, &mut total_lost_events),
            )?;
        }
        if last_flush.elapsed() >= cfg.flush_every {
            last_flush = Instant::now();
            let sync = last_sync.elapsed() >= cfg.fsync_every;
            if sync {
                last_sync = Instant::now();
            }
            seg.flush(sync)?;
        }
    };
    // the events pushed before the writer closed (or the stop) that no pull took yet: the
    // loop may end right after a sample read saw the writer gone
    if !control.paused.load(Ordering::Relaxed) {
        let (evs, lost) = pull_events_counting(&mut reader, name);
        keep_events(
            &mut seg,
            control,
            evs,
            lost,
            (&mut total_events, &mut total_lost_events),
        )?;
    }
    header = seg.close(&ended)?;
    let _ = header;
    Ok(RecordReport {
        dir: first_dir,
        samples: total,
        events: total_events,
        lost_samples: total_lost,
        lost_events: total_lost_events,
        bytes: total_bytes,
        seconds: started.elapsed().as_secs_f64(),
        ended,
    })
}

/// The events pushed since the last pull, and how many of them the event ring lapped
/// before they could be read: every pushed event is in one or the other, also when the
/// ring laps the reader again between two pulls (each lap is counted, and the pull goes on
/// from the oldest event kept).
fn pull_events_counting(
    reader: &mut rtloop_stream::Reader,
    name: &str,
) -> (Vec<rtloop_stream::Event>, u64) {
    let mut lost = 0;
    // a writer that laps the ring on every try keeps its events for the next round
    for _ in 0..16 {
        match reader.pull_events() {
            Ok(evs) => return (evs, lost),
            Err(ReadError::Overrun { lost: n, .. }) => {
                tracing::warn!(
                    stream = name,
                    lost = n,
                    "the recorder lost events (event ring lapped)"
                );
                lost += n;
            }
            Err(e) => {
                tracing::warn!(stream = name, "cannot read events: {e}");
                break;
            }
        }
    }
    (Vec::new(), lost)
}

/// Write the events one pull took and count the ones it lost, in the segment's header, the
/// run's totals `(recorded, lost)` and the control's live count.
fn keep_events(
    seg: &mut Segment,
    control: &Control,
    evs: Vec<rtloop_stream::Event>,
    lost: u64,
    (recorded, total_lost): (&mut u64, &mut u64),
) -> Result<(), RecordError> {
    seg.header.lost_events += lost;
    *total_lost += lost;
    control.lost_events.store(*total_lost, Ordering::Relaxed);
    for e in evs {
        write_event(seg, &e)?;
        *recorded += 1;
    }
    Ok(())
}

fn write_event(seg: &mut Segment, e: &rtloop_stream::Event) -> Result<(), RecordError> {
    let mut line = serde_json::to_vec(&event_json(e)).expect("json");
    line.push(b'\n');
    let (w, path) = &mut seg.events;
    w.write_all(&line).map_err(io_err(path))?;
    seg.header.events += 1;
    Ok(())
}

/// A recording opened for reading: the one reader of the format (`rtloop.load`, replay and
/// the exports all open recordings through it). The sample count comes from the file sizes,
/// so a recording cut by `kill -9` or a power loss reads up to its last whole sample.
#[derive(Debug, Clone)]
pub struct Recording {
    /// The header as last written.
    pub header: Header,
    /// Whole samples in `data.bin` (and stamps in `timestamps.bin`).
    pub samples: u64,
    /// The directory.
    pub dir: PathBuf,
}

/// Why a path is not a readable recording.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file is missing or unreadable.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The path is neither a recording nor a directory holding exactly one.
    #[error("{path} is not an rtloop recording (no header.json); recordings inside: {}{}", if inside.is_empty() { "none".to_owned() } else { inside.join(", ") }, if inside.len() > 1 { " (load one of them by its directory)" } else { "" })]
    NotARecording {
        /// The path given.
        path: PathBuf,
        /// The names of the recordings directly inside it (sorted).
        inside: Vec<String>,
    },
    /// A file of the recording is not a regular file (a FIFO would block the reader for
    /// ever).
    #[error("{path}: is {what}, not a regular file; a recording is made of regular files")]
    NotAFile {
        /// The file.
        path: PathBuf,
        /// What it is instead.
        what: &'static str,
    },
    /// The header is not JSON (damaged: the recorder replaces it whole, so something else
    /// wrote it or the disk lost it).
    #[error("{path}: not an rtloop recording header: damaged, not JSON ({detail})")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What the JSON parser found.
        detail: String,
    },
    /// The header is not an rtloop recording's.
    #[error("{path}: not an rtloop recording header: {detail}")]
    Foreign {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
}

impl Recording {
    /// Open `path`: a recording's directory (`OUT/STREAM`), or a directory holding exactly
    /// one (`OUT` after recording one stream).
    ///
    /// # Errors
    /// [`LoadError::NotARecording`] (naming the recordings inside, if several), or what
    /// [`Recording::open`] finds wrong with the recording.
    pub fn load(path: &Path) -> Result<Recording, LoadError> {
        if path.join("header.json").exists() {
            return Recording::open(path);
        }
        let mut inside: Vec<String> = std::fs::read_dir(path)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().join("header.json").exists())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        inside.sort();
        match inside.as_slice() {
            [one] => Recording::open(&path.join(one)),
            _ => Err(LoadError::NotARecording {
                path: path.to_owned(),
                inside,
            }),
        }
    }

    /// Open `dir` (a directory with `header.json`).
    ///
    /// # Errors
    /// A missing or unreadable file, a header that is not JSON ([`LoadError::Damaged`]), or
    /// one of another format, version or dtype ([`LoadError::Foreign`]).
    pub fn open(dir: &Path) -> Result<Recording, LoadError> {
        let hp = dir.join("header.json");
        let text = read_regular(&hp)?;
        let value: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| LoadError::Damaged {
                path: hp.clone(),
                detail: e.to_string(),
            })?;
        // the format first: a foreign header is named as such, not by its first missing field
        let format = value.get("format").and_then(serde_json::Value::as_str);
        if format != Some(FORMAT) {
            return Err(LoadError::Foreign {
                path: hp,
                detail: format!(
                    "format {}, expected {FORMAT:?}",
                    value.get("format").unwrap_or(&serde_json::Value::Null)
                ),
            });
        }
        let header: Header = serde_json::from_value(value).map_err(|e| LoadError::Foreign {
            path: hp.clone(),
            detail: e.to_string(),
        })?;
        let dtype: rtloop_stream::DType =
            header
                .dtype
                .parse()
                .map_err(|e: rtloop_stream::UnknownDType| LoadError::Foreign {
                    path: hp.clone(),
                    detail: e.to_string(),
                })?;
        let sb = (dtype.itemsize() * header.n_channels.max(1)) as u64;
        let len = |f: &str| -> Result<u64, LoadError> {
            let p = dir.join(f);
            std::fs::metadata(&p)
                .map(|m| m.len())
                .map_err(|source| LoadError::Io { path: p, source })
        };
        let samples = (len("data.bin")? / sb).min(len("timestamps.bin")? / 8);
        Ok(Recording {
            header,
            samples,
            dir: dir.to_owned(),
        })
    }

    /// The events of `events.jsonl`, one JSON object per line (type, value, sample, offset,
    /// duration, stamp_ns), up to a line cut by a crash: everything before it is whole.
    /// No file: no events.
    ///
    /// # Errors
    /// `events.jsonl` exists but cannot be read.
    pub fn events(&self) -> Result<Vec<serde_json::Value>, LoadError> {
        let path = self.dir.join("events.jsonl");
        let text = match read_regular(&path) {
            Ok(t) => t,
            Err(LoadError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                return Ok(Vec::new())
            }
            Err(e) => return Err(e),
        };
        let text = text.strip_suffix(b"\n").unwrap_or(&text);
        if text.is_empty() {
            return Ok(Vec::new());
        }
        Ok(text
            .split(|&b| b == b'\n')
            .map_while(|line| serde_json::from_slice(line).ok())
            .collect())
    }
}

/// The contents of `path`, refused unless it is a regular file: reading a FIFO blocks until
/// some other program opens its other end.
fn read_regular(path: &Path) -> Result<Vec<u8>, LoadError> {
    use std::os::unix::fs::FileTypeExt;
    let io = |source| LoadError::Io {
        path: path.to_owned(),
        source,
    };
    let t = std::fs::metadata(path).map_err(io)?.file_type();
    if !t.is_file() {
        let what = if t.is_fifo() {
            "a FIFO (named pipe)"
        } else if t.is_socket() {
            "a socket"
        } else if t.is_dir() {
            "a directory"
        } else {
            "a device"
        };
        return Err(LoadError::NotAFile {
            path: path.to_owned(),
            what,
        });
    }
    std::fs::read(path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recording directory as the recorder leaves it: int32 data holding each row's
    /// stream sample index (`first` + gaps), one stamp per row, and `events` lines.
    fn write_recording(dir: &Path, first: u64, gaps: &[(u64, u64)], rows: u64, events: &str) {
        std::fs::create_dir_all(dir).unwrap();
        let header = serde_json::json!({
            "format": FORMAT, "version": 1, "stream": "eeg", "dtype": "int32",
            "n_channels": 2, "ch_names": ["a", "b"], "ch_units": ["uV", "uV"],
            "sfreq": 100.0, "first_sample": first, "start_monotonic_ns": 0, "start_unix_ns": 0,
            "samples": rows, "events": 0, "lost_samples": gaps.iter().map(|g| g.1).sum::<u64>(),
            "gaps": gaps, "complete": true, "ended": "stopped", "rtloop_version": "test"
        });
        std::fs::write(dir.join("header.json"), header.to_string()).unwrap();
        let data: Vec<u8> = (0..rows)
            .flat_map(|r| {
                let s = sample_of(first, gaps, r) as i32;
                [s, -s]
            })
            .flat_map(i32::to_le_bytes)
            .collect();
        std::fs::write(dir.join("data.bin"), data).unwrap();
        let stamps: Vec<u8> = (0..rows).flat_map(|r| (r * 10).to_le_bytes()).collect();
        std::fs::write(dir.join("timestamps.bin"), stamps).unwrap();
        std::fs::write(dir.join("events.jsonl"), events).unwrap();
    }

    fn cut(path: &Path, len: u64) {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .set_len(len)
            .unwrap();
    }

    #[test]
    fn a_recording_cut_anywhere_reads_up_to_its_last_whole_sample() {
        let d = rtloop_testkit::TempDir::new("rec-cut");
        let dir = d.join("eeg");
        write_recording(&dir, 0, &[], 10, "");
        assert_eq!(Recording::open(&dir).unwrap().samples, 10);
        // half of sample 7's second channel written (8 bytes a sample)
        cut(&dir.join("data.bin"), 7 * 8 + 6);
        assert_eq!(Recording::open(&dir).unwrap().samples, 7);
        // the stamps cut shorter still: the shorter file decides
        cut(&dir.join("timestamps.bin"), 5 * 8 + 3);
        assert_eq!(Recording::open(&dir).unwrap().samples, 5);
        cut(&dir.join("data.bin"), 0);
        assert_eq!(Recording::open(&dir).unwrap().samples, 0);
        // a missing data file is named
        std::fs::remove_file(dir.join("data.bin")).unwrap();
        let e = Recording::open(&dir).unwrap_err();
        assert!(
            matches!(&e, LoadError::Io { path, source } if path.ends_with("data.bin") && source.kind() == io::ErrorKind::NotFound),
            "{e:?}"
        );
    }

    #[test]
    fn events_are_read_up_to_a_line_cut_by_a_crash() {
        let d = rtloop_testkit::TempDir::new("rec-events");
        let dir = d.join("eeg");
        let lines = "{\"type\":\"cue\",\"value\":\"left\",\"sample\":3,\"offset\":0,\"duration\":0,\"stamp_ns\":1}\n\
                     {\"type\":\"v\",\"value\":[1.0,2.5],\"sample\":5,\"offset\":-1,\"duration\":2,\"stamp_ns\":2}\n";
        write_recording(&dir, 0, &[], 10, lines);
        let ev = Recording::open(&dir).unwrap().events().unwrap();
        assert_eq!(ev.len(), 2);
        assert_eq!(
            (ev[0]["type"].as_str(), ev[0]["value"].as_str()),
            (Some("cue"), Some("left"))
        );
        assert_eq!(ev[1]["value"], serde_json::json!([1.0, 2.5]));
        assert_eq!(ev[1]["offset"].as_i64(), Some(-1));
        // a third line cut in the middle by kill -9: the two before it are whole
        let cut_line = format!("{lines}{{\"type\":\"cue\",\"value\":\"ri");
        std::fs::write(dir.join("events.jsonl"), &cut_line).unwrap();
        assert_eq!(Recording::open(&dir).unwrap().events().unwrap(), ev);
        // a damaged line stops the reading there, even with whole lines after it
        std::fs::write(dir.join("events.jsonl"), format!("{cut_line}\n{lines}")).unwrap();
        assert_eq!(Recording::open(&dir).unwrap().events().unwrap(), ev);
        // the last line whole but its newline not yet written: it counts
        std::fs::write(dir.join("events.jsonl"), lines.trim_end()).unwrap();
        assert_eq!(Recording::open(&dir).unwrap().events().unwrap(), ev);
        // a FIFO there is refused, not waited on for ever
        std::fs::remove_file(dir.join("events.jsonl")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.join("events.jsonl"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let e = Recording::open(&dir)
            .unwrap()
            .events()
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("events.jsonl: is a FIFO (named pipe), not a regular file; a recording is made of regular files"),
            "{e}"
        );
        std::fs::remove_file(dir.join("events.jsonl")).unwrap();
        // empty, or no file at all: no events
        std::fs::write(dir.join("events.jsonl"), "").unwrap();
        assert!(Recording::open(&dir).unwrap().events().unwrap().is_empty());
        std::fs::remove_file(dir.join("events.jsonl")).unwrap();
        assert!(Recording::open(&dir).unwrap().events().unwrap().is_empty());
    }

    #[test]
    fn rows_and_samples_map_across_the_gaps_of_a_lapped_recording() {
        let d = rtloop_testkit::TempDir::new("rec-gaps");
        let dir = d.join("eeg");
        // rows 0..4 hold samples 100..104, 5 lost, rows 4..7 hold 109..111, 2 lost, 114..
        let gaps = [(4, 5), (7, 2)];
        write_recording(&dir, 100, &gaps, 10, "");
        let rec = Recording::open(&dir).unwrap();
        assert_eq!(rec.header.gaps, gaps);
        let data: Vec<i32> = std::fs::read(dir.join("data.bin"))
            .unwrap()
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let held: Vec<i32> = data.iter().step_by(2).copied().collect();
        assert_eq!(held, [100, 101, 102, 103, 109, 110, 111, 114, 115, 116]);
        for (row, &s) in held.iter().enumerate() {
            assert_eq!(
                rec.header.row_of(s as u64),
                (row as u64, true),
                "sample {s}"
            );
            assert_eq!(rec.header.sample_of(row as u64), s as u64, "row {row}");
        }
        // lost samples map to the first recorded row after them; before the first, row 0
        assert_eq!(rec.header.row_of(104), (4, false));
        assert_eq!(rec.header.row_of(108), (4, false));
        assert_eq!(rec.header.row_of(112), (7, false));
        assert_eq!(rec.header.row_of(99), (0, false));
        // the free functions are the same mapping, for a header known only by these fields
        assert_eq!(row_of(100, &gaps, 110), (5, true));
        assert_eq!(sample_of(100, &gaps, 5), 110);
    }

    #[test]
    fn a_foreign_or_damaged_header_is_named_for_what_it_is() {
        let d = rtloop_testkit::TempDir::new("rec-foreign");
        let dir = d.join("eeg");
        write_recording(&dir, 0, &[], 3, "");
        let hp = dir.join("header.json");
        std::fs::write(&hp, r#"{"format": "xdf"}"#).unwrap();
        let e = Recording::open(&dir).unwrap_err();
        assert!(matches!(e, LoadError::Foreign { .. }), "{e:?}");
        assert!(
            e.to_string().ends_with(
                "not an rtloop recording header: format \"xdf\", expected \"rtloop-recording\""
            ),
            "{e}"
        );
        std::fs::write(&hp, "[1, 2]").unwrap();
        let e = Recording::open(&dir).unwrap_err().to_string();
        assert!(
            e.contains("format null, expected \"rtloop-recording\""),
            "{e}"
        );
        std::fs::write(&hp, r#"{"format": "rtloop-recording", "version": 1}"#).unwrap();
        let e = Recording::open(&dir).unwrap_err().to_string();
        assert!(
            e.contains("not an rtloop recording header: missing field"),
            "{e}"
        );
        // cut or overwritten: not JSON at all
        std::fs::write(&hp, r#"{"format": "rtloop-recording", "vers"#).unwrap();
        let e = Recording::open(&dir).unwrap_err();
        assert!(matches!(e, LoadError::Damaged { .. }), "{e:?}");
        assert!(
            e.to_string()
                .contains("header.json: not an rtloop recording header: damaged, not JSON (EOF"),
            "{e}"
        );
        // a dtype rtloop does not know
        write_recording(&dir, 0, &[], 3, "");
        let text = std::fs::read_to_string(&hp).unwrap();
        std::fs::write(&hp, text.replace("\"int32\"", "\"int24\"")).unwrap();
        let e = Recording::open(&dir).unwrap_err();
        assert!(
            matches!(&e, LoadError::Foreign { detail, .. } if detail.contains("int24")),
            "{e:?}"
        );
    }

    #[test]
    fn a_directory_is_a_recording_or_holds_exactly_one() {
        let d = rtloop_testkit::TempDir::new("rec-resolve");
        let out = d.join("out");
        // nothing there at all, then an empty directory
        let e = Recording::load(&out).unwrap_err();
        assert!(
            matches!(&e, LoadError::NotARecording { inside, .. } if inside.is_empty()),
            "{e:?}"
        );
        std::fs::create_dir_all(out.join("not-a-recording")).unwrap();
        let e = Recording::load(&out).unwrap_err().to_string();
        assert!(
            e.ends_with("out is not an rtloop recording (no header.json); recordings inside: none"),
            "{e}"
        );
        // OUT holding one: that one; OUT/STREAM: itself
        write_recording(&out.join("eeg"), 0, &[], 4, "");
        assert_eq!(Recording::load(&out).unwrap().dir, out.join("eeg"));
        assert_eq!(Recording::load(&out.join("eeg")).unwrap().samples, 4);
        // two inside: refused, both named (sorted), and how to choose
        write_recording(&out.join("emg"), 0, &[], 2, "");
        let e = Recording::load(&out).unwrap_err();
        assert!(
            matches!(&e, LoadError::NotARecording { inside, .. } if inside == &["eeg", "emg"]),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .ends_with("recordings inside: eeg, emg (load one of them by its directory)"),
            "{e}"
        );
        assert_eq!(Recording::load(&out.join("emg")).unwrap().samples, 2);
        // a file is no recording either
        let f = d.join("file");
        std::fs::write(&f, "x").unwrap();
        assert!(matches!(
            Recording::load(&f),
            Err(LoadError::NotARecording { .. })
        ));
    }
}
