//! `rtloop demo`: the README's first command. A synthetic 384-channel int16 30 kHz writer
//! (this process) and a reader in another process, for a few seconds: live throughput,
//! latency (commit stamp to reader, same CLOCK_MONOTONIC) and occupancy, then a summary.
//! Every value the reader receives is checked against the writer's deterministic signal.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use rtloop_metrics::{fmt_ns, LatencyHistogram, Table};
use rtloop_stream::{DType, ReadError, ReaderMode, Stream, StreamConfig, WaitError};
use rtloop_sys as sys;
use serde::{Deserialize, Serialize};

use crate::Global;

/// Options of `rtloop demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// How long to stream, in seconds.
    #[arg(long, default_value_t = 5.0, value_parser = positive_f64)]
    pub seconds: f64,
    /// Channels per sample.
    #[arg(long, default_value_t = 384, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub channels: u32,
    /// Sample rate in Hz.
    #[arg(long, default_value_t = 30_000.0, value_parser = positive_f64)]
    pub rate: f64,
    /// Samples per write (30 at 30 kHz = one commit per millisecond).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub chunk: u32,
    /// Microseconds the reader spins before sleeping on the futex.
    #[arg(long, default_value_t = 50)]
    pub spin_us: u64,
    /// Hold /dev/cpu_dma_latency at 0 during the run (keeps idle CPUs out of deep sleep, so
    /// a sleeping reader wakes in a few µs instead of tens; needs permission).
    #[arg(long)]
    pub pm_qos: bool,
    /// Write latency histogram and occupancy PNGs into this directory.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Keep the demo stream afterwards (it is removed by default).
    #[arg(long)]
    pub keep: bool,
}

/// The longest duration a command takes, in seconds (about 31 years): more is a typo, and
/// would overflow the clock arithmetic.
pub(crate) const MAX_SECONDS: f64 = 1e9;

/// A duration option: seconds, > 0 and at most [`MAX_SECONDS`].
pub(crate) fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= MAX_SECONDS => Ok(v),
        _ => Err(format!(
            "expected a number of seconds > 0 and at most {MAX_SECONDS:e} (about 31 years), got {s:?}"
        )),
    }
}

pub(crate) fn positive_f64(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("expected a number > 0, got {s:?}")),
    }
}

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
    latency: Option<rtloop_metrics::Summary>,
    /// 1 µs bins from 0 to 1000 µs (the last holds everything above).
    bins_1us: Vec<u64>,
}

/// Run the demo.
pub fn run(a: &DemoArgs, g: &Global) -> anyhow::Result<()> {
    let name = format!("demo-{}", sys::pid());
    let capacity = a.rate.ceil() as u64; // one second of history
    let mut cfg = StreamConfig::new(DType::I16, a.channels as usize, a.rate, capacity);
    cfg.ch_units = vec!["uV".into(); a.channels as usize];
    cfg.keep = a.keep;
    let stream = Stream::create(&name, &cfg)?;
    let result = run_with(&stream, a, g);
    if !a.keep {
        let _ = Stream::remove(&name);
    }
    result
}

fn run_with(stream: &Stream, a: &DemoArgs, g: &Global) -> anyhow::Result<()> {
    let name = stream.name().to_owned();
    let _pm_qos = if a.pm_qos {
        match sys::hold_cpu_dma_latency() {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("warning: cannot hold /dev/cpu_dma_latency ({e}); running without it");
                None
            }
        }
    } else {
        None
    };
    let total = (a.seconds * a.rate).round() as u64;
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        // Ctrl-C ends the run early but still cleanly (summary printed, stream removed)
        let _ = ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed));
    }
    // its reader registered before the first sample is written
    let (mut child, out) = rtloop_launch::spawn_ready(&ReaderRole {
        stream: name.clone(),
        total,
        spin_us: a.spin_us,
        plot: a.plot.clone(),
    })
    .context("cannot start the reader process")?;
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
    // live line on stderr (redrawn on a terminal, every few seconds when piped)
    let mut progress = crate::progress::Progress::new("demo");
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
            let sample_bytes = stream.info().sample_bytes as f64;
            let percent_used = st.percent_used;
            progress.tick(|| {
                let mbs = written as f64 * sample_bytes / t.as_secs_f64() / 1e6;
                let lat = r.latency.map_or_else(
                    || "-".into(),
                    |l| format!("p50 {} p99 {}", fmt_ns(l.p50_ns), fmt_ns(l.p99_ns)),
                );
                format!(
                    "{:5.1} s  written {:>9}  read {:>9}  {:7.1} MB/s  latency {:<22}  occupancy {:5.1} %  errors {}",
                    t.as_secs_f64(),
                    written,
                    r.read,
                    mbs,
                    lat,
                    percent_used,
                    r.errors
                )
            });
        }
    }
    let elapsed = started.elapsed();
    let written = writer.written();
    drop(writer); // readers see the writer closed
    let status = child.wait()?;
    let _ = reader_thread.join();
    progress.finish();
    let r = latest.lock().expect("report lock").clone();
    if !status.success() && !r.done {
        bail!("the reader process failed ({status})");
    }
    let st = stream.stats();
    high = high.max(st.high_water as f64 * 100.0 / st.capacity as f64);
    let info = stream.info();
    let bytes = written as f64 * info.sample_bytes as f64;
    let summary = serde_json::json!({
        "stream": name,
        "channels": info.n_channels,
        "dtype": info.dtype.name(),
        "rate_hz": info.nominal_rate,
        "seconds": elapsed.as_secs_f64(),
        "samples_written": written,
        "samples_read": r.read,
        "samples_lost": r.lost,
        "errors": r.errors,
        "first_error": r.first_error,
        "throughput_mb_per_s": bytes / elapsed.as_secs_f64() / 1e6,
        "samples_per_s": written as f64 / elapsed.as_secs_f64(),
        "latency": r.latency,
        "high_water_percent": high,
        "pm_qos": a.pm_qos,
    });
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
    if g.json {
        println!("{summary}");
    } else {
        let mut t = Table::new(&["", "value"]);
        t.row(&[
            "stream".to_owned(),
            format!(
                "{name}: {} ch x {} @ {} Hz",
                info.n_channels, info.dtype, info.nominal_rate
            ),
        ]);
        t.row(&[
            "samples written / read".to_owned(),
            format!("{written} / {}", r.read),
        ]);
        t.row(&[
            "lost / corrupted".to_owned(),
            format!("{} / {}", r.lost, r.errors),
        ]);
        t.row(&[
            "throughput".to_owned(),
            format!(
                "{:.1} MB/s ({:.0} samples/s)",
                bytes / elapsed.as_secs_f64() / 1e6,
                written as f64 / elapsed.as_secs_f64()
            ),
        ]);
        if let Some(l) = r.latency {
            t.row(&[
                "latency commit -> reader".to_owned(),
                format!(
                    "p50 {}  p99 {}  p99.9 {}  max {}",
                    fmt_ns(l.p50_ns),
                    fmt_ns(l.p99_ns),
                    fmt_ns(l.p999_ns),
                    fmt_ns(l.max_ns)
                ),
            ]);
        }
        t.row(&["high-water occupancy".to_owned(), format!("{high:.1} %")]);
        print!("{}", t.render());
        if let Some(dir) = &a.plot {
            println!("plots: {}", dir.display());
        }
    }
    if r.errors > 0 {
        bail!(
            "{} corrupted values received; first: {}",
            r.errors,
            r.first_error.unwrap_or_default()
        );
    }
    if !r.done && !stop.load(Ordering::Relaxed) {
        bail!("the reader did not report its results");
    }
    Ok(())
}

fn emit(r: &ReaderReport) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", serde_json::to_string(r).expect("serialisable"));
    let _ = out.flush();
}

/// The `demo-reader` child role: `<stream> <total samples> <spin µs> [--plot DIR]`.
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
pub fn reader_role(role: &ReaderRole) -> anyhow::Result<()> {
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
