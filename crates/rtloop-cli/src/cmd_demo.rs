//! `rtloop demo`: the README's first command, a shell over [`rtloop_lab::demo`]: its options
//! made a config, Ctrl-C made its stop flag, its status a live line, its report a table or
//! JSON.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::bail;
use rtloop_lab::demo::{DemoConfig, DemoStatus};
use rtloop_metrics::{fmt_ns, Table};

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

/// Run the demo.
pub fn run(a: &DemoArgs, g: &Global) -> anyhow::Result<()> {
    let cfg = DemoConfig {
        seconds: a.seconds,
        channels: a.channels,
        rate: a.rate,
        chunk: a.chunk,
        spin_us: a.spin_us,
        pm_qos: a.pm_qos,
        plot: a.plot.clone(),
        keep: a.keep,
    };
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        // Ctrl-C ends the run early but still cleanly (summary printed, stream removed)
        let _ = ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed));
    }
    // live line on stderr (redrawn on a terminal, every few seconds when piped)
    let mut progress = crate::progress::Progress::new("demo");
    let r = rtloop_lab::demo::run(&cfg, &stop, &mut |s: &DemoStatus| {
        progress.tick(|| {
            let lat = s.latency.map_or_else(
                || "-".into(),
                |l| format!("p50 {} p99 {}", fmt_ns(l.p50_ns), fmt_ns(l.p99_ns)),
            );
            format!(
                "{:5.1} s  written {:>9}  read {:>9}  {:7.1} MB/s  latency {:<22}  occupancy {:5.1} %  errors {}",
                s.elapsed.as_secs_f64(),
                s.written,
                s.read,
                s.mb_per_s,
                lat,
                s.percent_used,
                s.errors
            )
        });
    });
    progress.finish();
    let r = r?;
    if g.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        let mut t = Table::new(&["", "value"]);
        t.row(&[
            "stream".to_owned(),
            format!(
                "{}: {} ch x {} @ {} Hz",
                r.stream, r.channels, r.dtype, r.rate_hz
            ),
        ]);
        t.row(&[
            "samples written / read".to_owned(),
            format!("{} / {}", r.samples_written, r.samples_read),
        ]);
        t.row(&[
            "lost / corrupted".to_owned(),
            format!("{} / {}", r.samples_lost, r.errors),
        ]);
        t.row(&[
            "throughput".to_owned(),
            format!(
                "{:.1} MB/s ({:.0} samples/s)",
                r.throughput_mb_per_s, r.samples_per_s
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
        t.row(&[
            "high-water occupancy".to_owned(),
            format!("{:.1} %", r.high_water_percent),
        ]);
        print!("{}", t.render());
        if let Some(dir) = &r.plots {
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
    if !r.reader_done && !stop.load(Ordering::Relaxed) {
        bail!("the reader did not report its results");
    }
    Ok(())
}
