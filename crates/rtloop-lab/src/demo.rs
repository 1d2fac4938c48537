//! The demo (`rtloop demo`, the README's first command): a synthetic writer (this process)
//! and a reader in another process, for a few seconds: throughput, latency (commit stamp to
//! reader, same CLOCK_MONOTONIC) and occupancy, live and then summed up. Every value the
//! reader receives is checked against the writer's deterministic signal. The command line
//! renders [`run`]'s [`DemoReport`].

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rtloop_metrics::{LatencyHistogram, Summary};
use rtloop_stream::{DType, ReadError, ReaderMode, Stream, StreamConfig, WaitError};
use rtloop_sys as sys;
use serde::{Deserialize, Serialize};

/// What to run.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    /// How long to stream, in seconds.
    pub seconds: f64,
    /// Channels per sample.
    pub channels: u32,
    /// Sample rate in Hz.
    pub rate: f64,
    /// Samples per write.
    pub chunk: u32,
    /// Microseconds the reader spins before sleeping on the futex.
    pub spin_us: u64,
    /// Hold /dev/cpu_dma_latency at 0 during the run.
    pub pm_qos: bool,
    /// Write latency histogram and occupancy PNGs into this directory.
    pub plot: Option<PathBuf>,
    /// Keep the demo stream afterwards.
    pub keep: bool,
}

impl Default for DemoConfig {
    /// A Neuropixels probe: 384 channels of int16 at 30 kHz, one commit per millisecond,
    /// for 5 s.
    fn default() -> Self {
        DemoConfig {
            seconds: 5.0,
            channels: 384,
            rate: 30_000.0,
            chunk: 30,
            spin_us: 50,
            pm_qos: false,
            plot: None,
            keep: false,
        }
    }
}

impl DemoConfig {
    /// Refuse settings the demo cannot run with.
    ///
    /// # Errors
    /// The setting, what was given and what is allowed.
    pub fn validate(&self) -> Result<(), DemoError> {
        let bad = |name: &'static str, given: String, allowed: &'static str| {
            Err(DemoError::Config {
                name,
                given,
                allowed,
            })
        };
        if !(self.seconds.is_finite() && self.seconds > 0.0 && self.seconds <= 1e9) {
            return bad(
                "seconds",
                self.seconds.to_string(),
                "a number > 0 and at most 1e9",
            );
        }
        if !(1..=65_536).contains(&self.channels) {
            return bad("channels", self.channels.to_string(), "1 to 65536");
        }
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return bad("rate", self.rate.to_string(), "a number of Hz > 0");
        }
        if !(1..=1_000_000).contains(&self.chunk) {
            return bad("chunk", self.chunk.to_string(), "1 to 1000000");
        }
        Ok(())
    }
}

/// What the demo measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DemoReport {
    /// The demo's stream.
    pub stream: String,
    /// Channels per sample.
    pub channels: usize,
    /// Sample type.
    pub dtype: String,
    /// Nominal rate.
    pub rate_hz: f64,
    /// How long it streamed.
    pub seconds: f64,
    /// Samples the writer wrote.
    pub samples_written: u64,
    /// Samples the reader read.
    pub samples_read: u64,
    /// Samples the reader lost (latest mode: overwritten before it read them).
    pub samples_lost: u64,
    /// Values that were not what the writer wrote.
    pub errors: u64,
    /// The first such value, described.
    pub first_error: Option<String>,
    /// MB/s written.
    pub throughput_mb_per_s: f64,
    /// Samples per second written.
    pub samples_per_s: f64,
    /// Commit-to-reader latency.
    pub latency: Option<Summary>,
    /// The highest occupancy seen, % of capacity.
    pub high_water_percent: f64,
    /// Whether /dev/cpu_dma_latency was held.
    pub pm_qos: bool,
    /// Whether the reader reported its results (false: stopped early, or it failed).
    pub reader_done: bool,
    /// Where the plots went.
    pub plots: Option<PathBuf>,
}

/// A moment of the run, for a live line.
#[derive(Debug, Clone)]
pub struct DemoStatus {
    /// Since the start.
    pub elapsed: Duration,
    /// Samples written.
    pub written: u64,
    /// Samples the reader has read.
    pub read: u64,
    /// MB/s written so far.
    pub mb_per_s: f64,
    /// The reader's latency so far.
    pub latency: Option<Summary>,
    /// Occupancy now, % of capacity.
    pub percent_used: f64,
    /// Wrong values so far.
    pub errors: u64,
}

/// Why the demo could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// A setting the demo cannot run with.
    #[error("{name} = {given}: {allowed}")]
    Config {
        /// The setting.
        name: &'static str,
        /// What was given.
        given: String,
        /// What is allowed.
        allowed: &'static str,
    },
    /// The stream.
    #[error(transparent)]
    Stream(#[from] rtloop_stream::Error),
    /// The reader process could not be started.
    #[error("cannot start the reader process: {0}")]
    Launch(#[from] rtloop_launch::LaunchError),
    /// The reader process failed.
    #[error("the reader process failed ({0})")]
    ReaderFailed(std::process::ExitStatus),
    /// A file or process operation.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A plot.
    #[error(transparent)]
    Chart(#[from] rtloop_metrics::charts::ChartError),
}

macro_rules! stream_errors {
    ($($t:ident),*) => {$(
        impl From<rtloop_stream::$t> for DemoError {
            fn from(e: rtloop_stream::$t) -> Self {
                DemoError::Stream(e.into())
            }
        }
    )*};
}
stream_errors!(
    CreateError,
    OpenError,
    ReadError,
    WaitError,
    WriteError,
    ClaimError
);

/// The demo signal: a sine per channel (own frequency), deterministic noise, and a spike
/// every few thousand samples — cheap to produce and to check (integer table lookups).
struct Signal {
    sine: Vec<i16>,
}

impl Signal {
    fn new() -> Self {
        let sine = (0..4096)
            .map(|k| ((k as f64 / 4096.0 * std::f64::consts::TAU).sin() * 2000.0) as i16)
            .collect();
        Signal { sine }
    }

    #[inline]
    fn value(&self, sample: u64, ch: u32) -> i16 {
        let phase = sample.wrapping_mul(u64::from(ch % 16 + 1) * 3) as usize & 4095;
        let h = splitmix(sample.wrapping_mul(65_537) ^ u64::from(ch));
        let noise = (h & 0xff) as i16 - 128;
        let spike = if h % 3001 == 0 { -6000 } else { 0 };
        self.sine[phase].wrapping_add(noise).wrapping_add(spike)
    }
}

#[inline]
fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// What the reader child reports (JSON lines on its stdout, after it said it is ready).
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct ReaderReport {
    done: bool,
    read: u64,
    lost: u64,
    errors: u64,
    first_error: Option<String>,
    latency: Option<Summary>,
    /// 1 µs bins from 0 to 1000 µs (the last holds everything above).
    bins_1us: Vec<u64>,
}

/// Run the demo until its time is up or `stop` is set (Ctrl-C: it ends early but cleanly,
/// the stream removed unless kept), calling `status` twice a second.
///
/// # Errors
/// A setting out of range, the stream or the reader process failing.
pub fn run(
    cfg: &DemoConfig,
    stop: &AtomicBool,
    status: &mut dyn FnMut(&DemoStatus),
) -> Result<DemoReport, DemoError> {
    cfg.validate()?;
    let name = format!("demo-{}", sys::pid());
    let capacity = cfg.rate.ceil() as u64; // one second of history
    let mut sc = StreamConfig::new(DType::I16, cfg.channels as usize, cfg.rate, capacity);
    sc.ch_units = vec!["uV".into(); cfg.channels as usize];
    sc.keep = cfg.keep;
    let stream = Stream::create(&name, &sc)?;
    let result = run_with(&stream, cfg, stop, status);
    if !cfg.keep {
        let _ = Stream::remove(&name);
    }
    result
}

fn run_with(
    stream: &Stream,
    a: &DemoConfig,
    stop: &AtomicBool,
    status: &mut dyn FnMut(&DemoStatus),
) -> Result<DemoReport, DemoError> {
    let name = stream.name().to_owned();
    let _pm_qos = if a.pm_qos {
        match sys::hold_cpu_dma_latency() {
            Ok(f) => Some(f),
            Err(e) => {
                tracing::warn!("cannot hold /dev/cpu_dma_latency ({e}); running without it");
                None
            }
        }
    } else {
        None
    };
    let total = (a.seconds * a.rate).round() as u64;
    // its reader registered before the first sample is written
    let (mut child, out) = rtloop_launch::spawn_ready(&ReaderRole {
        stream: name.clone(),
        total,
        spin_us: a.spin_us,
        plot: a.plot.clone(),
    })?;
    let latest = Arc::new(Mutex::new(ReaderReport::default()));
    let reader_thread = {
        let latest = latest.clone();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if let Ok(r) = serde_json::from_str::<ReaderReport>(&line) {
                    *latest.lock().expect("report lock") = r;
                }
            }
        })
    };
    let sig = Signal::new();
    let mut writer = stream.writer()?;
    let chunk = u64::from(a.chunk);
    let chans = a.channels;
    let started = Instant::now();
    let mut next_progress = Duration::from_millis(500);
    let mut occupancy: Vec<(f64, f64)> = Vec::new();
    let mut high = 0f64;
    while writer.written() < total && !stop.load(Ordering::Relaxed) {
        let first = writer.written();
        let n = chunk.min(total - first);
        // pace on absolute deadlines: sample `first + n` is due at (first + n) / rate
        let due = Duration::from_secs_f64((first + n) as f64 / a.rate);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            std::thread::sleep(wait);
        }
        let mut guard = writer.reserve(n as usize)?;
        let values = guard.as_mut_slice::<i16>()?;
        for (k, s) in values.chunks_exact_mut(chans as usize).enumerate() {
            let i = first + k as u64;
            for (c, v) in s.iter_mut().enumerate() {
                *v = sig.value(i, c as u32);
            }
        }
        guard.commit();
        let t = started.elapsed();
        if t >= next_progress {
            next_progress += Duration::from_millis(500);
            let st = stream.stats();
            occupancy.push((t.as_secs_f64(), st.percent_used));
            high = high.max(st.percent_used);
            let r = latest.lock().expect("report lock").clone();
            let written = writer.written();
            status(&DemoStatus {
                elapsed: t,
                written,
                read: r.read,
                mb_per_s: written as f64 * stream.info().sample_bytes as f64
                    / t.as_secs_f64()
                    / 1e6,
                latency: r.latency,
                percent_used: st.percent_used,
                errors: r.errors,
            });
        }
    }
    let elapsed = started.elapsed();
    let written = writer.written();
    drop(writer); // readers see the writer closed
    let exit = child.wait()?;
    let _ = reader_thread.join();
    let r = latest.lock().expect("report lock").clone();
    if !exit.success() && !r.done {
        return Err(DemoError::ReaderFailed(exit));
    }
    let st = stream.stats();
    high = high.max(st.high_water as f64 * 100.0 / st.capacity as f64);
    let info = stream.info();
    let bytes = written as f64 * info.sample_bytes as f64;
    if let Some(dir) = &a.plot {
        std::fs::create_dir_all(dir)?;
        let p = dir.join("demo-occupancy.png");
        rtloop_metrics::charts::time_series_png(
            &p,
            "demo stream occupancy (PercentUsed)",
            "time (s)",
            "% of capacity",
            &[(name.as_str(), &occupancy)],
        )?;
    }
    Ok(DemoReport {
        stream: name,
        channels: info.n_channels,
        dtype: info.dtype.name().to_string(),
        rate_hz: info.nominal_rate,
        seconds: elapsed.as_secs_f64(),
        samples_written: written,
        samples_read: r.read,
        samples_lost: r.lost,
        errors: r.errors,
        first_error: r.first_error,
        throughput_mb_per_s: bytes / elapsed.as_secs_f64() / 1e6,
        samples_per_s: written as f64 / elapsed.as_secs_f64(),
        latency: r.latency,
        high_water_percent: high,
        pm_qos: a.pm_qos,
        reader_done: r.done,
        plots: a.plot.clone(),
    })
}

fn emit(r: &ReaderReport) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", serde_json::to_string(r).expect("serialisable"));
    let _ = out.flush();
}

/// The demo's reader process.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ReaderRole {
    /// The stream.
    pub stream: String,
    /// Samples the writer will write.
    pub total: u64,
    /// Microseconds to spin before sleeping.
    pub spin_us: u64,
    /// Write the latency histogram here.
    pub plot: Option<PathBuf>,
}

impl rtloop_launch::ChildRole for ReaderRole {
    const NAME: &'static str = "demo-reader";
}

rtloop_launch::register_role!(ReaderRole, reader_role);

/// The demo's reader: latest mode, latency and occupancy, one JSON line per report.
pub fn reader_role(role: &ReaderRole) -> Result<(), DemoError> {
    let (name, total, spin, plot) = (&role.stream, role.total, role.spin_us, role.plot.clone());
    // Ctrl-C reaches the whole process group; the writer decides when to stop (SIGTERM
    // still ends this process: ctrlc's handler would catch it too)
    rtloop_sys::ignore_interrupt();
    let stream = Stream::open(name)?;
    let chans = stream.info().n_channels;
    let mut reader = stream.reader(ReaderMode::Latest)?;
    reader.set_spin(Duration::from_micros(spin));
    rtloop_launch::ready();
    let mut rep = ReaderReport::default();
    let sig = Signal::new();
    let max = 4096usize;
    let mut buf = vec![0u8; max * stream.info().sample_bytes];
    let mut stamps = vec![0u64; max];
    let mut hist = LatencyHistogram::new();
    let mut last_emit = Instant::now();
    while reader.cursor() < total {
        match reader.wait_available(1, Some(Duration::from_millis(200))) {
            Ok(_) => {}
            Err(WaitError::Timeout { .. }) => {
                if matches!(reader.writer_liveness(), rtloop_stream::Liveness::Closed)
                    && reader.available() == 0
                {
                    break; // the writer stopped early (Ctrl-C)
                }
                continue;
            }
            // the writer stopped early (Ctrl-C), even before its first sample
            Err(WaitError::WriterClosed { .. }) => break,
            Err(e) => return Err(e.into()),
        }
        let now = sys::monotonic_ns();
        match reader.pull_into(&mut buf, Some(&mut stamps), max) {
            Ok(p) => {
                let mut prev_stamp = 0;
                for k in 0..p.n {
                    // one latency per commit: samples of a commit share its stamp
                    if stamps[k] != prev_stamp {
                        prev_stamp = stamps[k];
                        hist.record(now.saturating_sub(stamps[k]));
                    }
                    let i = p.first + k as u64;
                    let sample = &buf[k * chans * 2..(k + 1) * chans * 2];
                    for (c, v) in sample.chunks_exact(2).enumerate() {
                        let got = i16::from_ne_bytes([v[0], v[1]]);
                        let want = sig.value(i, c as u32);
                        if got != want {
                            rep.errors += 1;
                            if rep.first_error.is_none() {
                                rep.first_error = Some(format!(
                                    "sample {i} channel {c}: got {got}, expected {want}"
                                ));
                            }
                        }
                    }
                }
                rep.read += p.n as u64;
            }
            Err(ReadError::Overrun { lost, .. }) => rep.lost += lost,
            Err(e) => return Err(e.into()),
        }
        if last_emit.elapsed() >= Duration::from_millis(250) {
            last_emit = Instant::now();
            rep.latency = Some(hist.summary());
            emit(&rep);
        }
    }
    rep.latency = Some(hist.summary());
    rep.bins_1us = hist.bins(1_000, 1_000_000);
    rep.done = true;
    if let Some(dir) = plot {
        std::fs::create_dir_all(&dir)?;
        let p: &Path = &dir.join("demo-latency.png");
        rtloop_metrics::charts::latency_histogram_png(p, "demo: commit -> reader latency", &hist)?;
    }
    emit(&rep);
    Ok(())
}
