//! `rtloop record`: streams to disk.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use rtloop_metrics::Table;
use rtloop_record::{Control, RecordConfig, Session};

use crate::Global;

/// Options of `rtloop record`.
#[derive(Debug, Clone, clap::Args)]
pub struct RecordArgs {
    /// The streams to record (each into OUT/NAME/).
    #[arg(required = true, value_name = "STREAM")]
    pub streams: Vec<String>,
    /// The directory to record into.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Stop after this many seconds (else at Ctrl-C, SIGTERM, or when every writer is gone).
    #[arg(long, value_parser = crate::cmd_demo::seconds)]
    pub seconds: Option<f64>,
    /// Start a new segment (NAME.0002, ...) every this many MB of samples.
    #[arg(long, value_parser = crate::cmd_demo::positive_f64)]
    pub split_mb: Option<f64>,
    /// Start a new segment every this many seconds.
    #[arg(long, value_parser = crate::cmd_demo::seconds)]
    pub split_seconds: Option<f64>,
    /// Listen on this UNIX socket for commands, one per line: `status` (a JSON line back),
    /// `start`, `pause`, `split`, `stop` — for headless rigs.
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
    /// Do not write anything until `start` arrives on the control socket.
    #[arg(long, requires = "control")]
    pub wait_start: bool,
    /// Milliseconds between flushes to the OS (what a kill -9 can lose at most).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub flush_ms: u64,
    /// Milliseconds between fsyncs and header updates (what a power loss can lose at most).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub fsync_ms: u64,
}

/// Record until done; one thread per stream.
pub fn run(a: &RecordArgs, g: &Global) -> Result<()> {
    let cfg = RecordConfig {
        flush_every: Duration::from_millis(a.flush_ms),
        fsync_every: Duration::from_millis(a.fsync_ms),
        duration: a.seconds.map(Duration::from_secs_f64),
        split_bytes: a.split_mb.map(|m| (m * 1e6) as u64),
        split_every: a.split_seconds.map(Duration::from_secs_f64),
        lossless: false,
        start_at: None,
    };
    let session = Session::start(&a.streams, &a.out, &cfg, a.wait_start)?;
    // said once every recorder's reader is registered: from then on nothing is missed (a
    // recorder that ended before that says why when the session is joined below)
    let started = session.wait_started(Duration::from_secs(30)).is_ok();
    if !g.json && started {
        eprintln!(
            "recording {} into {} (Ctrl-C stops)",
            a.streams.join(", "),
            a.out.display()
        );
    }
    let controls: Vec<Arc<Control>> = session.controls().to_vec();
    // Ctrl-C / SIGTERM stop every recorder
    {
        let controls = controls.clone();
        // Ordering: flags with nothing published through them: Relaxed.
        let _ = ctrlc::set_handler(move || {
            for c in &controls {
                c.stop.store(true, Ordering::Relaxed);
            }
        });
    }
    let control = a
        .control
        .as_deref()
        .map(|path| session.serve_control(path))
        .transpose()?;
    // live progress on stderr while the recorders run (a plain line every few seconds when
    // piped): what a long unattended recording has written and lost so far
    {
        let mut progress = crate::progress::Progress::new("record");
        let paused = |c: &Control| c.paused.load(Ordering::Relaxed);
        while !session.is_finished() {
            progress.tick(|| {
                a.streams
                    .iter()
                    .zip(&controls)
                    .map(|(s, c)| {
                        format!(
                            "{s}: {} samples, lost {}, lost events {}{}",
                            crate::progress::grouped(c.samples.load(Ordering::Relaxed)),
                            c.lost.load(Ordering::Relaxed),
                            c.lost_events.load(Ordering::Relaxed),
                            if paused(c) { " (paused)" } else { "" }
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            });
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let (reports, errors) = session.join();
    if let Some(c) = control {
        c.close();
    }
    if g.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        let mut t = Table::new(&[
            "recording",
            "samples",
            "events",
            "lost",
            "lost events",
            "MB/s",
            "ended",
        ]);
        for r in &reports {
            t.row(&[
                r.dir.display().to_string(),
                r.samples.to_string(),
                r.events.to_string(),
                r.lost_samples.to_string(),
                r.lost_events.to_string(),
                format!("{:.1}", r.bytes as f64 / r.seconds.max(1e-9) / 1e6),
                r.ended.clone(),
            ]);
        }
        println!("{}", t.render());
    }
    if !errors.is_empty() {
        let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
        bail!("{}", errors.join("; "));
    }
    Ok(())
}

/// Options of `rtloop replay`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Formats (found from the name and contents of PATH):\n  \
    rtloop recording   a directory `rtloop record` wrote (header.json)\n  \
    XDF                FILE.xdf: a numeric stream, its marker streams as events\n  \
    SpikeGLX           FILE.bin beside its FILE.meta, or a run directory (--series imec0.ap)\n  \
    Open Ephys binary  structure.oebin, or a directory above it (--series STREAM-FOLDER); TTL and text events\n  \
    NWB                FILE.nwb (read with pynwb): an ElectricalSeries or TimeSeries (--series NAME); \
trials, epochs, annotations and events tables as events\n\n\
Samples are written as stored (int16 stays int16); channel names and units go into the stream, \
and each channel's gain (physical = raw x gain + offset) into its description as JSON \
(rtloop.replay.scale in Python). A file holding several series lists them when --series is missing; \
--all (or --series given more than once) plays each into its own stream, in step. See docs/replay.md.")]
pub struct ReplayArgs {
    /// What to replay: a recording directory, an XDF, NWB or SpikeGLX file, or an Open
    /// Ephys or SpikeGLX directory.
    #[arg(value_name = "PATH")]
    pub dir: PathBuf,
    /// The series to play when PATH holds several (an NWB series, an Open Ephys stream
    /// folder, a SpikeGLX .bin's name such as imec0.ap, an XDF stream); given more than once,
    /// each plays into its own stream, all in step.
    #[arg(long, value_name = "NAME")]
    pub series: Vec<String>,
    /// Play every series PATH holds (every probe of a SpikeGLX run, every Open Ephys stream,
    /// every NWB series), each into a stream named after it, all in step.
    #[arg(long, conflicts_with = "series")]
    pub all: bool,
    /// For an XDF file: the stream to play (the same as --series).
    #[arg(long, hide = true)]
    pub xdf_stream: Option<String>,
    /// The stream to create and write (default: the recorded stream's name, or the series
    /// name with characters a stream name may not hold replaced by `_`).
    #[arg(long)]
    pub stream: Option<String>,
    /// Play at this multiple of the original pace (2 = twice as fast).
    #[arg(long, default_value_t = 1.0, value_parser = crate::cmd_demo::positive_f64)]
    pub speed: f64,
    /// As fast as possible (ignores --speed).
    #[arg(long)]
    pub fast: bool,
    /// Samples the stream keeps (default: 10 s of the rate, at least 65536); readers can
    /// read that much history.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub capacity: Option<u64>,
    /// Keep the stream once the replay ends (by default it ends with the replay: readers
    /// attached read it to the end, and it is not found afterwards).
    #[arg(long)]
    pub keep: bool,
}

/// Replay a recorded file into a stream (or several series into a stream each, in step).
pub fn replay(a: &ReplayArgs, g: &Global) -> Result<()> {
    use rtloop_record::ReplaySource as _;
    // --xdf-stream is the old spelling of one --series
    let series = if a.series.is_empty() {
        a.xdf_stream.iter().cloned().collect()
    } else {
        a.series.clone()
    };
    let sel = rtloop_record::replay::ReplaySelection {
        series,
        all: a.all,
        stream: a.stream.clone(),
    };
    // every source opened (and every name checked) before anything plays
    let plan = rtloop_record::replay::ReplayPlan::open(&a.dir, &sel)?;
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        // Ordering: a flag with nothing published through it: Relaxed.
        let _ = ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed));
    }
    if !g.json {
        for (name, src) in plan.plays() {
            let info = src.info();
            eprintln!(
                "replaying {} {} {:?} ({} samples of {} channels at {} Hz) into stream {name:?} {}",
                info.format,
                a.dir.display(),
                info.series,
                src.rows(),
                info.stream.n_channels,
                info.stream.nominal_rate,
                if a.fast {
                    "as fast as possible".to_string()
                } else {
                    format!("at {}x", a.speed)
                }
            );
        }
    }
    let reports = plan.play(
        (!a.fast).then_some(a.speed),
        a.capacity,
        a.keep,
        &stop,
        &|_| {},
    )?;
    if g.json {
        if let [r] = reports.as_slice() {
            println!("{}", serde_json::to_string_pretty(r)?);
        } else {
            println!("{}", serde_json::to_string_pretty(&reports)?);
        }
    } else {
        for r in &reports {
            println!(
                "{} samples and {} events in {:.3} s ({:.1} MB/s; recorded span {:.3} s) into stream {:?}",
                r.samples,
                r.events,
                r.seconds,
                r.bytes as f64 / r.seconds.max(1e-9) / 1e6,
                r.recorded_seconds,
                r.stream
            );
        }
    }
    Ok(())
}
