//! `recorder` sink: records its input signals' streams to disk with rtloop's recorder
//! (flat little-endian files, `numpy.memmap`-able, readable after a crash; docs/recording.md),
//! exactly the model's ticks: from the first tick's first row to the last tick's last row.
//! The disk I/O runs on one thread per signal inside the sink's process, reading the
//! signal's stream directly; the tick itself only notes where the tick ends, so a slow disk
//! never delays the tick (a recorder that falls behind by more than the stream keeps reports
//! its lost samples).

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::{parse_options, DriverCtx, DriverError, InView, RecordingFailure, Sink, TickInfo};
use crate::model::Signal;
use rtloop_record::{Control, RecordConfig, RecordReport};

/// `options:` of `recorder`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// Directory of the recording (relative to the run's output directory); one sub-directory
    /// per signal.
    out: String,
    /// Start a new segment every this many MB of a signal's samples.
    split_mb: Option<f64>,
    /// Start a new segment every this many seconds.
    split_seconds: Option<f64>,
    /// Hand data to the OS this often (bounds what a kill -9 loses), default 100 ms.
    #[serde(default = "default_flush")]
    flush_ms: u64,
    /// fsync this often (bounds what a power loss loses), default 1000 ms.
    #[serde(default = "default_fsync")]
    fsync_ms: u64,
}

fn default_flush() -> u64 {
    100
}
fn default_fsync() -> u64 {
    1000
}

/// Validate `recorder` options.
pub fn check(options: &serde_json::Value, signals: &[&Signal]) -> Result<(), String> {
    let o: Options = parse_options(options)?;
    if o.out.trim().is_empty() {
        return Err("out: give the recording's directory".into());
    }
    if signals.is_empty() {
        return Err("reads at least one signal (in: [...])".into());
    }
    let positive = |v: f64| v.is_finite() && v > 0.0;
    if o.split_mb.is_some_and(|m| !positive(m)) || o.split_seconds.is_some_and(|s| !positive(s)) {
        return Err("split_mb and split_seconds must be > 0".into());
    }
    Ok(())
}

/// Open `recorder`: the directory must be creatable and writable.
pub fn open(
    options: &serde_json::Value,
    signals: &[Signal],
    ctx: &DriverCtx,
) -> Result<Box<dyn Sink>, DriverError> {
    let o: Options = parse_options(options).map_err(DriverError::Config)?;
    let out = ctx.out_dir.join(&o.out);
    std::fs::create_dir_all(&out)
        .map_err(|e| DriverError::io(format!("cannot create {}", out.display()), e))?;
    let probe = out.join(".rtloop-write-test");
    std::fs::write(&probe, b"")
        .map_err(|e| DriverError::io(format!("{} is not writable", out.display()), e))?;
    let _ = std::fs::remove_file(&probe);
    let cfg = RecordConfig {
        flush_every: Duration::from_millis(o.flush_ms),
        fsync_every: Duration::from_millis(o.fsync_ms),
        duration: None,
        split_bytes: o.split_mb.map(|m| (m * 1e6) as u64),
        split_every: o.split_seconds.map(Duration::from_secs_f64),
        lossless: false,
        start_at: None,
    };
    Ok(Box::new(Recorder {
        out,
        cfg,
        streams: signals
            .iter()
            .map(|s| crate::process::stream_name(&ctx.model, &s.name))
            .collect(),
        running: Vec::new(),
        ends: vec![0; signals.len()],
    }))
}

type Running = (
    Arc<Control>,
    std::thread::JoinHandle<Result<RecordReport, rtloop_record::RecordError>>,
);

struct Recorder {
    out: PathBuf,
    cfg: RecordConfig,
    streams: Vec<String>,
    running: Vec<Running>,
    ends: Vec<u64>,
}

impl Sink for Recorder {
    fn tick(&mut self, _t: &TickInfo, inputs: &[InView<'_>]) -> Result<(), DriverError> {
        if self.running.is_empty() {
            // the first tick: each recording starts at this tick's first row
            for (name, view) in self.streams.iter().zip(inputs) {
                let control = Arc::new(Control::default());
                let (n, out, c) = (name.clone(), self.out.clone(), control.clone());
                let cfg = RecordConfig {
                    start_at: Some(view.first),
                    ..self.cfg.clone()
                };
                let h = std::thread::Builder::new()
                    .name(format!("record {name}"))
                    .spawn(move || rtloop_record::record(&n, &out, &cfg, &c))
                    .map_err(|e| DriverError::io("cannot start the recorder thread", e))?;
                self.running.push((control, h));
            }
        }
        for (end, view) in self.ends.iter_mut().zip(inputs) {
            *end = view.first + view.rows as u64;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<String, DriverError> {
        let mut parts = Vec::new();
        let mut lost = 0;
        let mut errors = Vec::new();
        for ((control, h), (end, name)) in self
            .running
            .drain(..)
            .zip(self.ends.iter().zip(&self.streams))
        {
            // everything up to the last tick, then stop (an empty recording stops at once)
            if *end == 0 {
                control.stop.store(true, Ordering::Relaxed);
            }
            control.end_sample.store((*end).max(1), Ordering::Relaxed);
            match h.join() {
                Ok(Ok(r)) => {
                    lost += r.lost_samples;
                    parts.push(format!("{} samples of {name}", r.samples));
                }
                Ok(Err(e)) => errors.push(RecordingFailure {
                    stream: name.clone(),
                    error: Some(e),
                }),
                Err(_) => errors.push(RecordingFailure {
                    stream: name.clone(),
                    error: None,
                }),
            }
        }
        if !errors.is_empty() {
            return Err(DriverError::Recording(errors));
        }
        Ok(format!(
            "recorded {} to {} ({lost} lost)",
            parts.join(", "),
            self.out.display()
        ))
    }
}
