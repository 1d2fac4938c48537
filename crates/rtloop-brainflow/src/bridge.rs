//! `brainflow_in`: a BrainFlow board's data into rtloop streams, one per kind of data
//! (`PREFIX.eeg`, `PREFIX.accel`, ...) and one per preset for BrainFlow's bookkeeping rows
//! (`PREFIX.board`: package number, timestamp, marker). Every stream of a preset gets the
//! same samples in the same order, so sample `k` of `PREFIX.eeg` and of `PREFIX.board` are
//! one row of BrainFlow's data table.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtloop_stream::{Event, EventValue, Stream, StreamConfig, Writer};

use crate::boards::{Board, Params, PLAYBACK_FILE_BOARD, STREAMING_BOARD};
use crate::ffi::preset;
use crate::layout::{KindStream, PresetLayout};
use crate::{BrainFlow, BrainFlowError, Session};

/// Options of [`brainflow_in`].
#[derive(Debug, Clone)]
pub struct InOptions {
    /// The board, by name or id.
    pub board: String,
    /// BrainFlow's input parameters.
    pub params: Params,
    /// Strings sent with `config_board` after the session is prepared (OpenBCI channel
    /// settings, `loopback_true` for the playback board, ...).
    pub configs: Vec<String>,
    /// Stream names' prefix (default: the board's short name, `synthetic`).
    pub prefix: Option<String>,
    /// Samples each stream keeps (default: 10 s of data, at least 65536).
    pub capacity: Option<u64>,
    /// Stop after this long (None: until `stop`, or the end of a playback file).
    pub duration: Option<Duration>,
    /// Remove the streams when done.
    pub remove_at_end: bool,
    /// A board silent this long is reported and reconnected (default 2 s).
    pub stall: Duration,
    /// Time between reconnection attempts (default 1 s).
    pub retry: Duration,
}

impl InOptions {
    /// Options for `board` with BrainFlow's defaults otherwise.
    #[must_use]
    pub fn new(board: &str) -> InOptions {
        InOptions {
            board: board.to_string(),
            params: Params::default(),
            configs: Vec::new(),
            prefix: None,
            capacity: None,
            duration: None,
            remove_at_end: true,
            stall: Duration::from_secs(2),
            retry: Duration::from_secs(1),
        }
    }
}

/// What the bridge moved.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Report {
    /// The board (`SYNTHETIC_BOARD (-1)`).
    pub board: String,
    /// BrainFlow's version.
    pub brainflow: String,
    /// The streams written.
    pub streams: Vec<String>,
    /// Samples of the default preset.
    pub samples: u64,
    /// Samples of every preset.
    pub samples_by_preset: Vec<(String, u64)>,
    /// Markers (non-zero marker values) that became events.
    pub markers: u64,
    /// Samples lost on the way to BrainFlow, counted from gaps in the package numbers.
    pub lost_samples: u64,
    /// Times the board went silent or failed (each reported and retried).
    pub outages: u64,
    /// Times the session was prepared again after an outage and delivered again.
    pub reconnects: u64,
    /// Why it stopped: `stopped`, `duration`, `end of file`.
    pub ended: String,
}

/// The rtloop stamp (CLOCK_MONOTONIC ns) of a BrainFlow timestamp (UNIX seconds, taken on
/// this machine's CLOCK_REALTIME): the same instant in rtloop's clock. A timestamp that is not
/// within the last hour (a playback file with its recorded timestamps kept) is stamped with
/// the time rtloop took the sample instead.
#[must_use]
pub fn stamp_of(bf_seconds: f64, now_mono: u64, now_real: u64) -> u64 {
    let offset = now_real as f64 - now_mono as f64;
    let mono = bf_seconds * 1e9 - offset;
    if mono.is_finite()
        && mono > now_mono as f64 - 3.6e12
        && mono <= now_mono as f64 + 1e9
        && mono > 0.0
    {
        mono as u64
    } else {
        now_mono
    }
}

/// The samples lost between two package numbers: they count up by one per sample, and
/// OpenBCI's (and the synthetic board's) wrap after 255. A repeat or a reset counts none.
#[must_use]
pub fn lost_between(prev: f64, cur: f64) -> u64 {
    if !(prev.is_finite() && cur.is_finite()) || prev < 0.0 || cur < 0.0 {
        return 0;
    }
    let (p, c) = (prev as u64, cur as u64);
    if c > p {
        c - p - 1
    } else if c < p && p <= 255 {
        c + 256 - p - 1
    } else {
        0
    }
}

/// One stream being written: its plan and writer.
pub struct Out {
    /// Its name.
    pub name: String,
    /// Which rows of the preset's data it holds.
    pub kind: KindStream,
    writer: Writer,
    scratch: Vec<f64>,
}

/// Create the streams of `layouts` (`PREFIX.SUFFIX`, float64), each with its channel names,
/// types, units, rate and a JSON description naming the board, preset and rows.
pub fn create_streams(
    layouts: &[PresetLayout],
    board: Board,
    data_board: Board,
    prefix: &str,
    capacity: Option<u64>,
    version: &str,
    keep: bool,
) -> Result<Vec<Vec<Out>>, BrainFlowError> {
    let mut made: Vec<String> = Vec::new();
    let mut all = Vec::new();
    let result = (|| {
        for l in layouts {
            let mut outs = Vec::new();
            for k in &l.streams {
                let name = format!("{prefix}.{}", k.suffix);
                rtloop_stream::validate_name(&name)
                    .map_err(|e| BrainFlowError::stream(&name, e))?;
                let cap = capacity.unwrap_or_else(|| ((l.rate * 10.0) as u64).max(65536));
                let mut cfg =
                    StreamConfig::new(rtloop_stream::DType::F64, k.rows.len(), l.rate, cap);
                cfg.ch_names = k.names.clone();
                cfg.ch_types = vec![k.ch_type.to_string(); k.rows.len()];
                if !k.unit.is_empty() {
                    cfg.ch_units = vec![k.unit.to_string(); k.rows.len()];
                }
                cfg.content_type = k.content_type.to_string();
                cfg.source_id = format!("brainflow:{}", data_board.name);
                // `--keep`: the streams outlive the bridge's clean close
                cfg.keep = keep;
                cfg.description = serde_json::json!({
                    "brainflow": {
                        "board": board.name,
                        "board_id": board.id,
                        "data_board": data_board.name,
                        "device": l.device,
                        "preset": l.preset_name,
                        "kind": k.kind,
                        "rows": k.rows,
                        "also": k.also,
                        "version": version,
                    }
                })
                .to_string();
                let stream =
                    Stream::create(&name, &cfg).map_err(|e| BrainFlowError::stream(&name, e))?;
                made.push(name.clone());
                let writer = stream
                    .writer()
                    .map_err(|e| BrainFlowError::stream(&name, e))?;
                outs.push(Out {
                    name,
                    kind: k.clone(),
                    writer,
                    scratch: Vec::new(),
                });
            }
            all.push(outs);
        }
        Ok(())
    })();
    if let Err(e) = result {
        drop(all);
        for n in made {
            let _ = Stream::remove(&n);
        }
        return Err(e);
    }
    Ok(all)
}

/// What one preset's writing keeps between chunks.
#[derive(Debug, Default, Clone)]
struct PresetState {
    samples: u64,
    last_package: Option<f64>,
}

/// Write `n` samples of one preset (BrainFlow's row-major `data`) into its streams: each
/// stream its rows, sample-major; every sample stamped with its BrainFlow timestamp in rtloop's
/// clock; markers as events on the preset's first stream; package-number gaps counted.
fn write_chunk(
    l: &PresetLayout,
    outs: &mut [Out],
    data: &mut [f64],
    n: usize,
    st: &mut PresetState,
    report: &mut Report,
    file_markers: &[f64],
) -> Result<(), BrainFlowError> {
    if let (Some(r), false) = (l.marker_row, file_markers.is_empty()) {
        // the playback board's file markers, which BrainFlow replaced, at their samples
        for i in 0..n {
            let k = (st.samples + i as u64) as usize % file_markers.len();
            if data[r * n + i] == 0.0 {
                data[r * n + i] = file_markers[k];
            }
        }
    }
    let (now_mono, now_real) = (rtloop_sys::monotonic_ns(), rtloop_sys::realtime_ns());
    let stamps: Vec<u64> = (0..n)
        .map(|i| match l.timestamp_row {
            Some(r) => stamp_of(data[r * n + i], now_mono, now_real),
            None => now_mono,
        })
        .collect();
    let first = outs.first().map_or(0, |o| o.writer.written());
    for o in outs.iter_mut() {
        let ch = o.kind.rows.len();
        o.scratch.clear();
        o.scratch.resize(n * ch, 0.0);
        for (c, &r) in o.kind.rows.iter().enumerate() {
            for i in 0..n {
                o.scratch[i * ch + c] = data[r * n + i];
            }
        }
        let bytes: Vec<u8> = o.scratch.iter().flat_map(|v| v.to_ne_bytes()).collect();
        // one sample at a time: each carries its own stamp
        for (sample, &stamp) in bytes.chunks_exact(ch * 8).zip(&stamps) {
            o.writer
                .write_bytes(sample, Some(stamp))
                .map_err(|e| BrainFlowError::stream(o.name.clone(), e))?;
        }
    }
    if let Some(r) = l.package_row {
        for i in 0..n {
            let cur = data[r * n + i];
            if let Some(prev) = st.last_package {
                let lost = lost_between(prev, cur);
                if lost > 0 {
                    report.lost_samples += lost;
                    tracing::warn!(
                        "{}: package numbers jump from {prev} to {cur} at sample {}: {lost} \
                         samples lost between the board and BrainFlow",
                        l.preset_name,
                        first + i as u64
                    );
                    if let Some(o) = outs.first_mut() {
                        let ev = Event::new(
                            "lost_samples",
                            EventValue::f64(lost as f64),
                            first + i as u64,
                        );
                        let _ = o.writer.push_event(&ev);
                    }
                }
            }
            st.last_package = Some(cur);
        }
    }
    if let (Some(r), Some(o)) = (l.marker_row, outs.first_mut()) {
        for i in 0..n {
            let v = data[r * n + i];
            if v != 0.0 && !v.is_nan() {
                let ev = Event::new("marker", EventValue::f64(v), first + i as u64);
                o.writer
                    .push_event(&ev)
                    .map_err(|e| BrainFlowError::stream(o.name.clone(), e))?;
                report.markers += 1;
            }
        }
    }
    st.samples += n as u64;
    Ok(())
}

/// Take what each preset's buffer holds (up to `max` samples) and write it; returns the
/// samples taken, or the error of a session that failed.
fn drain(
    session: &Session,
    layouts: &[PresetLayout],
    outs: &mut [Vec<Out>],
    states: &mut [PresetState],
    buf: &mut Vec<f64>,
    report: &mut Report,
    file_markers: &[f64],
) -> Result<u64, BrainFlowError> {
    let mut got = 0u64;
    for ((l, o), st) in layouts.iter().zip(outs.iter_mut()).zip(states.iter_mut()) {
        let n = session.count(l.preset)?.min(4096);
        if n == 0 {
            continue;
        }
        session.take(l.preset, n, l.num_rows, buf)?;
        let fm = if l.preset == preset::DEFAULT {
            file_markers
        } else {
            &[]
        };
        write_chunk(l, o, buf, n, st, report, fm)?;
        got += n as u64;
    }
    Ok(got)
}

/// The presets a board's session fills: a playback or streaming board only its default one
/// (rtloop passes it one file or one multicast address).
#[must_use]
pub fn presets_of(board: Board) -> Option<&'static [i32]> {
    (board.id == PLAYBACK_FILE_BOARD || board.id == STREAMING_BOARD).then_some(&[preset::DEFAULT])
}

/// A BrainFlow board's data into rtloop streams until `stop`, the duration, or the end of a
/// playback file (unless it loops). `ready` is called with the stream names once they exist
/// and the board streams. A board that goes silent for `stall` (or whose session fails) is
/// reported, released and prepared again every `retry` until it delivers again; what was
/// written stays in the streams, and new samples follow in the same streams.
pub fn brainflow_in(
    bf: &Arc<BrainFlow>,
    o: &InOptions,
    stop: &AtomicBool,
    ready: &mut dyn FnMut(&[String]),
) -> Result<Report, BrainFlowError> {
    let board = Board::parse(&o.board)?;
    let master = o.params.check(board)?;
    let data_board = master.unwrap_or(board);
    let layouts = bf.layout(data_board, presets_of(board))?;
    let playback = if board.id == PLAYBACK_FILE_BOARD {
        let (rows, marker) = layouts
            .first()
            .map_or((0, None), |l| (l.num_rows, l.marker_row));
        Some(crate::check_playback_file(
            Path::new(&o.params.file),
            rows,
            marker,
        )?)
    } else {
        None
    };
    let playback_rows = playback.as_ref().map(|p| p.samples);
    let file_markers: &[f64] = playback.as_ref().map_or(&[], |p| &p.markers);
    let loops = o.configs.iter().any(|c| c == "loopback_true");
    let buffer = crate::buffer_samples(&layouts);
    let prefix = o.prefix.clone().unwrap_or_else(|| board.short());
    // names are checked before the board is opened: a bad prefix touches no device
    for k in layouts.iter().flat_map(|l| &l.streams) {
        let name = format!("{prefix}.{}", k.suffix);
        rtloop_stream::validate_name(&name).map_err(|e| BrainFlowError::stream(name.clone(), e))?;
    }
    let mut session = Session::open(bf.clone(), board, &o.params, &o.configs, buffer)?;
    let version = bf.version();
    let mut outs = create_streams(
        &layouts,
        board,
        data_board,
        &prefix,
        o.capacity,
        &version,
        !o.remove_at_end,
    )?;
    let names: Vec<String> = outs.iter().flatten().map(|x| x.name.clone()).collect();
    let mut report = Report {
        board: board.to_string(),
        brainflow: version,
        streams: names.clone(),
        ..Report::default()
    };
    ready(&names);
    let mut states = vec![PresetState::default(); layouts.len()];
    let mut buf = Vec::new();
    let started = Instant::now();
    let mut last_data = Instant::now();
    let mut last_beat = Instant::now();
    let result = loop {
        if stop.load(Ordering::Relaxed) {
            break Ok("stopped");
        }
        if o.duration.is_some_and(|d| started.elapsed() >= d) {
            break Ok("duration");
        }
        let failed = match drain(
            &session,
            &layouts,
            &mut outs,
            &mut states,
            &mut buf,
            &mut report,
            file_markers,
        ) {
            Ok(n) if n > 0 => {
                last_data = Instant::now();
                None
            }
            Ok(_) => (last_data.elapsed() >= o.stall).then(|| {
                format!(
                    "no data from board {board} for {:.1} s",
                    o.stall.as_secs_f64()
                )
            }),
            Err(e @ BrainFlowError::Stream { .. }) => break Err(e),
            Err(e) => Some(e.to_string()),
        };
        if let (Some(total), false) = (playback_rows, loops) {
            if states.first().is_some_and(|s| s.samples >= total) {
                break Ok("end of file");
            }
        }
        if let Some(why) = failed {
            if board.id == PLAYBACK_FILE_BOARD {
                // restarting would play the file again from its start
                tracing::warn!("{why}; the playback board is not restarted");
                last_data = Instant::now();
                report.outages += 1;
                continue;
            }
            report.outages += 1;
            tracing::warn!(
                "{why}: it stopped or disconnected; what was received stays in the streams \
                 ({prefix}.*); preparing the session again every {:.1} s",
                o.retry.as_secs_f64()
            );
            let mut attempt = 0u64;
            loop {
                if stop.load(Ordering::Relaxed)
                    || o.duration.is_some_and(|d| started.elapsed() >= d)
                {
                    break;
                }
                attempt += 1;
                match session.restart() {
                    Ok(()) => {
                        report.reconnects += 1;
                        // the samples lost in the outage are the outage; package numbers
                        // start again
                        for st in &mut states {
                            st.last_package = None;
                        }
                        tracing::warn!(
                            "board {board} is back (attempt {attempt}); bridging again into the same streams"
                        );
                        break;
                    }
                    Err(e) => {
                        if attempt == 1 || attempt % 10 == 0 {
                            tracing::warn!("board {board}: attempt {attempt} to reconnect: {e}");
                        }
                        for o in outs.iter().flatten() {
                            o.writer.heartbeat();
                        }
                        std::thread::sleep(o.retry);
                    }
                }
            }
            last_data = Instant::now();
            continue;
        }
        if last_beat.elapsed() > Duration::from_millis(500) {
            last_beat = Instant::now();
            for o in outs.iter().flatten() {
                o.writer.heartbeat();
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    session.release();
    report.samples = states.first().map_or(0, |s| s.samples);
    report.samples_by_preset = layouts
        .iter()
        .zip(&states)
        .map(|(l, s)| (l.preset_name.to_string(), s.samples))
        .collect();
    drop(outs);
    if o.remove_at_end {
        for n in &names {
            let _ = Stream::remove(n);
        }
    }
    report.ended = result?.to_string();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_numbers_count_lost_samples_across_the_wrap() {
        assert_eq!(lost_between(3.0, 4.0), 0);
        assert_eq!(lost_between(3.0, 7.0), 3);
        assert_eq!(lost_between(255.0, 0.0), 0);
        assert_eq!(lost_between(254.0, 1.0), 2);
        assert_eq!(lost_between(5.0, 5.0), 0);
        assert_eq!(lost_between(70_000.0, 3.0), 0);
    }

    #[test]
    fn brainflow_timestamps_become_the_same_instant_in_rtloops_clock() {
        let (mono, real) = (1_000_000_000_000u64, 1_700_000_000_000_000_000u64);
        // 0.25 s before now, in UNIX seconds
        let t = (real as f64 - 0.25e9) / 1e9;
        let s = stamp_of(t, mono, real);
        assert!((s as f64 - (mono as f64 - 0.25e9)).abs() < 1e3, "{s}");
        // a recorded timestamp from long ago: the time rtloop took it
        assert_eq!(stamp_of(1_600_000_000.0, mono, real), mono);
        assert_eq!(stamp_of(f64::NAN, mono, real), mono);
    }
}
