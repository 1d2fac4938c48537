//! `lsl_in` (source) and `lsl_out` (sink): Lab Streaming Layer inside a model (liblsl from
//! the pylsl wheel; docs/lsl.md). `lsl_in` takes every sample that arrived since the last
//! tick (up to the signal's rows) without waiting; `lsl_out` pushes a tick's rows, stamped
//! from the tick's start at the signal's rate.

use std::sync::Arc;

use rtloop_lsl::io::{Inlet, Outlet, OutletSpec};
use rtloop_lsl::Lsl;

use super::{parse_options, DriverCtx, DriverError, InView, OutBuf, Sink, Source, TickInfo};
use crate::model::Signal;

/// `options:` of `lsl_in`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct InOptions {
    /// The outlet's name, or type.
    query: String,
    /// `name` or `type`: match only that property.
    by: Option<String>,
    /// Seconds to wait for the outlet when the model starts (default 5).
    #[serde(default = "default_timeout")]
    timeout: f64,
}

fn default_timeout() -> f64 {
    5.0
}

/// `options:` of `lsl_out`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct OutOptions {
    /// Outlet name (default MODEL.SIGNAL).
    name: Option<String>,
    /// Content type (default EEG).
    #[serde(rename = "type", default = "default_type")]
    kind: String,
    /// Source id (default rtloop:MODEL.SIGNAL).
    source_id: Option<String>,
}

fn default_type() -> String {
    "EEG".into()
}

fn lsl_dtype_ok(s: &Signal) -> Result<(), String> {
    rtloop_lsl::bridge::format_of(s.dtype)
        .map(|_| ())
        .map_err(|e| format!("signal {:?}: {e}", s.name))
}

/// Validate `lsl_in` options: one variable `[max, channels]` signal of an LSL dtype.
pub fn check_in(options: &serde_json::Value, signals: &[&Signal]) -> Result<(), String> {
    let o: InOptions = parse_options(options)?;
    if o.by.as_deref().is_some_and(|b| b != "name" && b != "type") {
        return Err("by: `name` or `type`".into());
    }
    let [s] = signals else {
        return Err(format!("writes exactly one signal, got {}", signals.len()));
    };
    if !s.variable || s.shape.len() != 2 {
        return Err(format!(
            "signal {:?} must be variable: true with shape [max_samples_per_tick, channels] \
             (samples arrive at the outlet's pace, not the tick's)",
            s.name
        ));
    }
    lsl_dtype_ok(s)
}

/// Validate `lsl_out` options: one signal of an LSL dtype.
pub fn check_out(options: &serde_json::Value, signals: &[&Signal]) -> Result<(), String> {
    let _: OutOptions = parse_options(options)?;
    let [s] = signals else {
        return Err(format!("reads exactly one signal, got {}", signals.len()));
    };
    lsl_dtype_ok(s)
}

fn load() -> Result<Arc<Lsl>, DriverError> {
    Lsl::load().map(Arc::new).map_err(DriverError::Lsl)
}

/// Open `lsl_in`: resolves the outlet; its channels and format must match the signal.
pub fn open_in(
    options: &serde_json::Value,
    signals: &[Signal],
    _ctx: &DriverCtx,
) -> Result<Box<dyn Source>, DriverError> {
    let o: InOptions = parse_options(options).map_err(DriverError::Config)?;
    let s = &signals[0];
    let inlet = Inlet::open(load()?, &o.query, o.by.as_deref(), o.timeout, &|| false)
        .map_err(DriverError::Lsl)?;
    if inlet.meta.channels != s.row_len() || inlet.dtype != Some(s.dtype) {
        return Err(DriverError::Config(format!(
            "LSL outlet {} does not fit signal {:?} ({} channels of {}): the outlet has {} \
             channels of {}",
            inlet.meta,
            s.name,
            s.row_len(),
            s.dtype,
            inlet.meta.channels,
            inlet.dtype.map_or("string", |d| d.name())
        )));
    }
    let max = s.rows_per_tick();
    Ok(Box::new(LslIn {
        inlet,
        ts: vec![0.0; max],
        samples: 0,
    }))
}

struct LslIn {
    inlet: Inlet,
    ts: Vec<f64>,
    samples: u64,
}

impl Source for LslIn {
    fn tick(&mut self, _t: &TickInfo, out: &mut [OutBuf<'_>]) -> Result<(), DriverError> {
        let o = &mut out[0];
        let max = o.rows;
        // straight into the signal's rows (aligned for the dtype: page-aligned ring, whole
        // values per row)
        let n = self
            .inlet
            .pull(o.bytes, &mut self.ts, max, 0.0)
            .map_err(DriverError::Lsl)?;
        o.rows = n;
        self.samples += n as u64;
        Ok(())
    }

    fn finish(&mut self) -> Result<String, DriverError> {
        Ok(format!(
            "received {} samples from LSL {}",
            self.samples, self.inlet.meta
        ))
    }
}

/// Open `lsl_out`: announces the outlet.
pub fn open_out(
    options: &serde_json::Value,
    signals: &[Signal],
    ctx: &DriverCtx,
) -> Result<Box<dyn Sink>, DriverError> {
    let o: OutOptions = parse_options(options).map_err(DriverError::Config)?;
    let s = &signals[0];
    let full = crate::process::stream_name(&ctx.model, &s.name);
    let rate = if s.variable {
        0.0
    } else {
        s.rows_per_tick() as f64 / ctx.tick.as_secs_f64()
    };
    let outlet = Outlet::create(
        load()?,
        &OutletSpec {
            name: o.name.unwrap_or_else(|| full.clone()),
            kind: o.kind,
            source_id: o.source_id.unwrap_or_else(|| format!("rtloop:{full}")),
            channels: s.row_len(),
            rate,
            dtype: Some(s.dtype),
            labels: Vec::new(),
            units: Vec::new(),
        },
    )
    .map_err(DriverError::Lsl)?;
    Ok(Box::new(LslOut {
        outlet,
        period: ctx.tick.as_secs_f64() / s.rows_per_tick().max(1) as f64,
        ts: vec![0.0; s.rows_per_tick()],
        samples: 0,
    }))
}

struct LslOut {
    outlet: Outlet,
    period: f64,
    ts: Vec<f64>,
    samples: u64,
}

impl Sink for LslOut {
    fn tick(&mut self, t: &TickInfo, inputs: &[InView<'_>]) -> Result<(), DriverError> {
        let i = &inputs[0];
        let start = t.start_ns as f64 / 1e9;
        for (k, ts) in self.ts[..i.rows].iter_mut().enumerate() {
            *ts = start + k as f64 * self.period;
        }
        // the rows straight from the stream (aligned for the dtype)
        self.outlet
            .push(i.bytes, &self.ts[..i.rows])
            .map_err(DriverError::Lsl)?;
        self.samples += i.rows as u64;
        Ok(())
    }

    fn finish(&mut self) -> Result<String, DriverError> {
        Ok(format!(
            "sent {} samples to LSL {}",
            self.samples, self.outlet.meta
        ))
    }
}
