//! Drivers: built-in sources and sinks. A driver is a small trait object, so more can be
//! added (register it in [`check`] and [`open_source`] / [`open_sink`]).

use crate::model::{Kind, Signal};

/// Why a driver could not be opened or failed during a tick.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DriverError(pub String);

impl DriverError {
    /// An error with this message.
    pub fn new(msg: impl Into<String>) -> Self {
        DriverError(msg.into())
    }
}

impl From<std::io::Error> for DriverError {
    fn from(e: std::io::Error) -> Self {
        DriverError(e.to_string())
    }
}

/// What a driver knows of the current tick.
#[derive(Debug, Clone, Copy, Default)]
pub struct TickInfo {
    /// Tick number (0-based).
    pub tick: u64,
    /// The tick's deadline (its nominal start), CLOCK_MONOTONIC ns.
    pub deadline_ns: u64,
    /// When the timer actually started it, CLOCK_MONOTONIC ns.
    pub start_ns: u64,
    /// CLOCK_REALTIME ns when this process began the tick.
    pub realtime_ns: u64,
    /// CLOCK_MONOTONIC ns when this process began the tick.
    pub monotonic_ns: u64,
}

/// One input signal's rows of this tick (sample-major bytes).
pub struct InView<'a> {
    /// The signal.
    pub signal: &'a Signal,
    /// `rows * signal.row_bytes()` bytes.
    pub bytes: &'a [u8],
    /// Rows this tick (always `rows_per_tick` for a fixed signal).
    pub rows: usize,
    /// Stream sample index of the first row (the signal's stream is `MODEL.SIGNAL`).
    pub first: u64,
}

/// One output signal's space for this tick.
pub struct OutBuf<'a> {
    /// The signal.
    pub signal: &'a Signal,
    /// `rows_per_tick * signal.row_bytes()` bytes, zeroed only at start: a driver writes
    /// the rows it produces.
    pub bytes: &'a mut [u8],
    /// Rows produced. Starts at `rows_per_tick`; a driver writing a `variable` signal sets
    /// it to the rows it filled (0..=rows_per_tick).
    pub rows: usize,
}

/// A source: runs at tick start and fills its output signals.
pub trait Source {
    /// Produce this tick's rows.
    fn tick(&mut self, t: &TickInfo, out: &mut [OutBuf<'_>]) -> Result<(), DriverError>;
    /// The model is stopping: release resources, say what was counted (one line or empty).
    fn finish(&mut self) -> Result<String, DriverError> {
        Ok(String::new())
    }
}

/// A sink: takes this tick's rows of its input signals out of the model.
pub trait Sink {
    /// Consume this tick's rows.
    fn tick(&mut self, t: &TickInfo, inputs: &[InView<'_>]) -> Result<(), DriverError>;
    /// The model is stopping: flush, say what was counted (one line or empty).
    fn finish(&mut self) -> Result<String, DriverError> {
        Ok(String::new())
    }
}

pub mod logger;
pub mod lsl;
pub mod recorder;
pub mod stream_io;
pub mod synthetic;
pub mod udp;

/// What every driver may need to know of the model it runs in.
#[derive(Debug, Clone)]
pub struct DriverCtx {
    /// The model's name.
    pub model: String,
    /// The tick period.
    pub tick: std::time::Duration,
    /// The run's output directory: what a sink writes (`path`, `out`) is relative to it, so a
    /// run never writes into the directory of its model file.
    pub out_dir: std::path::PathBuf,
    /// The process's name in the model.
    pub process: String,
}

/// Built-in drivers, with the section each belongs to.
pub const DRIVERS: &[(&str, Kind)] = &[
    ("synthetic", Kind::Source),
    ("udp_in", Kind::Source),
    ("stream_in", Kind::Source),
    ("lsl_in", Kind::Source),
    ("udp_out", Kind::Sink),
    ("stream_out", Kind::Sink),
    ("logger", Kind::Sink),
    ("recorder", Kind::Sink),
    ("lsl_out", Kind::Sink),
];

fn driver_names(kind: Kind) -> String {
    DRIVERS
        .iter()
        .filter(|(_, k)| *k == kind)
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Validate a driver's options against the signals it writes (a source) or reads (a sink)
/// before anything starts. The message says what is wrong and what is allowed.
pub fn check(
    driver: &str,
    kind: Kind,
    options: &serde_json::Value,
    signals: &[&Signal],
) -> Result<(), String> {
    match DRIVERS.iter().find(|(n, _)| *n == driver) {
        None => {
            return Err(format!(
                "unknown driver {driver:?}; allowed for a {}: {}",
                kind_word(kind),
                driver_names(kind)
            ))
        }
        Some((_, k)) if *k != kind => {
            return Err(format!(
                "driver {driver:?} is a {} driver, not a {} driver; allowed here: {}",
                kind_word(*k),
                kind_word(kind),
                driver_names(kind)
            ))
        }
        Some(_) => {}
    }
    match driver {
        "synthetic" => synthetic::check(options, signals),
        "udp_in" => udp::check_in(options, signals),
        "stream_in" => stream_io::check_in(options, signals),
        "udp_out" => udp::check_out(options, signals),
        "stream_out" => stream_io::check_out(options, signals),
        "logger" => logger::check(options, signals),
        "recorder" => recorder::check(options, signals),
        "lsl_in" => lsl::check_in(options, signals),
        "lsl_out" => lsl::check_out(options, signals),
        _ => unreachable!("listed in DRIVERS"),
    }
}

/// Open a source driver (its options were [`check`]ed) writing `outputs`.
pub fn open_source(
    driver: &str,
    options: &serde_json::Value,
    outputs: &[Signal],
    ctx: &DriverCtx,
) -> Result<Box<dyn Source>, DriverError> {
    match driver {
        "synthetic" => synthetic::open(options, outputs, ctx),
        "udp_in" => udp::open_in(options, outputs, ctx),
        "stream_in" => stream_io::open_in(options, outputs, ctx),
        "lsl_in" => lsl::open_in(options, outputs, ctx),
        other => Err(DriverError(format!(
            "{other:?} is not a source driver; allowed: {}",
            driver_names(Kind::Source)
        ))),
    }
}

/// Open a sink driver (its options were [`check`]ed) reading `inputs`.
pub fn open_sink(
    driver: &str,
    options: &serde_json::Value,
    inputs: &[Signal],
    ctx: &DriverCtx,
) -> Result<Box<dyn Sink>, DriverError> {
    match driver {
        "udp_out" => udp::open_out(options, inputs, ctx),
        "stream_out" => stream_io::open_out(options, inputs, ctx),
        "logger" => logger::open(options, inputs, ctx),
        "recorder" => recorder::open(options, inputs, ctx),
        "lsl_out" => lsl::open_out(options, inputs, ctx),
        other => Err(DriverError(format!(
            "{other:?} is not a sink driver; allowed: {}",
            driver_names(Kind::Sink)
        ))),
    }
}

fn kind_word(k: Kind) -> &'static str {
    match k {
        Kind::Source => "source",
        Kind::Module => "module",
        Kind::Sink => "sink",
    }
}

/// Parse a driver's `options:` into its typed options struct (`deny_unknown_fields`), so
/// an unknown or mistyped key is reported with what is allowed.
pub fn parse_options<T: serde::de::DeserializeOwned>(
    options: &serde_json::Value,
) -> Result<T, String> {
    let v = if options.is_null() {
        serde_json::Value::Object(serde_json::Map::new())
    } else {
        options.clone()
    };
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            format!("options: {}", e.inner())
        } else {
            format!("options: {path}: {}", e.inner())
        }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_option_of_the_wrong_type_is_named() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct O {
            batch_ticks: usize,
        }
        let e = super::parse_options::<O>(&serde_json::json!({"batch_ticks": "many"})).unwrap_err();
        assert!(
            e.contains("batch_ticks") && e.contains("expected usize"),
            "{e}"
        );
        let e = super::parse_options::<O>(&serde_json::json!({"batch": 1})).unwrap_err();
        assert!(
            e.contains("unknown field `batch`") && e.contains("batch_ticks"),
            "{e}"
        );
    }
}
