//! Drivers: built-in sources and sinks. A driver is a small trait object, so more can be
//! added: a line in [`DRIVERS`] (name, option check, opener). Their errors are [`DriverError`]s.

use crate::model::{Kind, Signal};

/// Why a driver could not be opened or failed during a tick. Each variant says what kind of
/// thing went wrong; the message says what and, for bad options, what is allowed.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The driver's options or the signals it was given are not what it can work with.
    #[error("{0}")]
    Config(String),
    /// A tick's data broke the driver's rules (a length outside the row, rows that do not
    /// match between two signals).
    #[error("{0}")]
    Data(String),
    /// An operating-system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What the driver was doing.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A stream could not be created, opened, read or written.
    #[error("{what}: {source}{hint}")]
    Stream {
        /// What the driver was doing, naming the stream.
        what: String,
        /// The stream's error.
        source: Box<rtloop_stream::Error>,
        /// What may help (the streams there are), or empty.
        hint: String,
    },
    /// A stream's shape does not match the signal it feeds.
    #[error("stream {stream:?} has {channels} channels of {dtype}; signal {signal:?} needs {needs} of {needs_dtype} per row")]
    Shape {
        /// The stream.
        stream: String,
        /// Its channels.
        channels: usize,
        /// Its dtype.
        dtype: rtloop_stream::DType,
        /// The signal.
        signal: String,
        /// Channels the signal needs per row.
        needs: usize,
        /// The signal's dtype.
        needs_dtype: rtloop_stream::DType,
    },
    /// LSL (the `lsl_in` / `lsl_out` drivers).
    #[cfg(feature = "lsl")]
    #[error(transparent)]
    Lsl(#[from] rtloop_lsl::LslError),
    /// A BrainFlow board (the `brainflow` driver).
    #[cfg(feature = "brainflow")]
    #[error(transparent)]
    BrainFlow(#[from] rtloop_brainflow::BrainFlowError),
    /// The logger's SQLite database.
    #[cfg(feature = "logger")]
    #[error("{path}: {source}{after}")]
    Database {
        /// The database file.
        path: std::path::PathBuf,
        /// SQLite's error.
        source: Box<rusqlite::Error>,
        /// What still holds (ticks committed before it stay readable), or empty.
        after: &'static str,
    },
    /// One or more of the recorder's recordings failed.
    #[cfg(feature = "recorder")]
    #[error("{}", .0.iter().map(|f| f.to_string()).collect::<Vec<_>>().join("; "))]
    Recording(Vec<RecordingFailure>),
    /// A driver's worker thread panicked.
    #[error("the {0} thread panicked")]
    Panicked(&'static str),
}

/// One recording the recorder sink could not finish.
#[cfg(feature = "recorder")]
#[derive(Debug, thiserror::Error)]
#[error("{stream}: {}", .error.as_ref().map_or_else(|| "the recorder thread panicked".to_string(), |e| e.to_string()))]
pub struct RecordingFailure {
    /// The stream recorded.
    pub stream: String,
    /// The recorder's error (`None`: its thread panicked).
    pub error: Option<rtloop_record::RecordError>,
}

impl DriverError {
    /// A stream error with what the driver was doing.
    pub fn stream(what: impl Into<String>, source: impl Into<rtloop_stream::Error>) -> Self {
        DriverError::Stream {
            what: what.into(),
            source: Box::new(source.into()),
            hint: String::new(),
        }
    }

    /// An OS error with what the driver was doing.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        DriverError::Io {
            what: what.into(),
            source,
        }
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
    /// `rows * signal.row_bytes()` bytes. A sink gets a copy of the rows, validated
    /// against the ring before the sink runs: never a value the writer overwrote. A module
    /// gets the ring's memory in place, checked after its step (its outputs are discarded
    /// if the writer lapped it).
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

#[cfg(feature = "brainflow")]
pub mod brainflow;
#[cfg(feature = "logger")]
pub mod logger;
#[cfg(feature = "lsl")]
pub mod lsl;
#[cfg(feature = "recorder")]
pub mod recorder;
pub mod serial;
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

/// Checks a driver's options against the signals it writes or reads; the message says what
/// is wrong and what is allowed.
type CheckFn = fn(&serde_json::Value, &[&Signal]) -> Result<(), String>;
type SourceFn =
    fn(&serde_json::Value, &[Signal], &DriverCtx) -> Result<Box<dyn Source>, DriverError>;
type SinkFn = fn(&serde_json::Value, &[Signal], &DriverCtx) -> Result<Box<dyn Sink>, DriverError>;

/// How a driver is opened, which says which section of a model it belongs to.
#[derive(Clone, Copy)]
pub enum Opener {
    /// A source: writes its output signals at tick start.
    Source(SourceFn),
    /// A sink: takes its input signals out of the model.
    Sink(SinkFn),
}

/// One built-in driver: its name in a model file, its option check and how it opens.
#[derive(Clone, Copy)]
pub struct Driver {
    /// `driver:` in the model file.
    pub name: &'static str,
    /// Validates options before anything starts.
    pub check: CheckFn,
    /// Opens it in its process.
    pub open: Opener,
}

impl Driver {
    /// The model section it belongs to.
    #[must_use]
    pub fn kind(&self) -> Kind {
        match self.open {
            Opener::Source(_) => Kind::Source,
            Opener::Sink(_) => Kind::Sink,
        }
    }
}

/// Every driver built into this rtloop: one line each, the only place a driver is named.
/// The heavy ones (SQLite, liblsl, BrainFlow, the recorder) are cargo features, so a runtime built
/// without them links none of it.
pub const DRIVERS: &[Driver] = &[
    Driver {
        name: "synthetic",
        check: synthetic::check,
        open: Opener::Source(synthetic::open),
    },
    Driver {
        name: "udp_in",
        check: udp::check_in,
        open: Opener::Source(udp::open_in),
    },
    Driver {
        name: "stream_in",
        check: stream_io::check_in,
        open: Opener::Source(stream_io::open_in),
    },
    #[cfg(feature = "lsl")]
    Driver {
        name: "lsl_in",
        check: lsl::check_in,
        open: Opener::Source(lsl::open_in),
    },
    #[cfg(feature = "brainflow")]
    Driver {
        name: "brainflow",
        check: brainflow::check,
        open: Opener::Source(brainflow::open),
    },
    Driver {
        name: "udp_out",
        check: udp::check_out,
        open: Opener::Sink(udp::open_out),
    },
    Driver {
        name: "stream_out",
        check: stream_io::check_out,
        open: Opener::Sink(stream_io::open_out),
    },
    #[cfg(feature = "logger")]
    Driver {
        name: "logger",
        check: logger::check,
        open: Opener::Sink(logger::open),
    },
    #[cfg(feature = "recorder")]
    Driver {
        name: "recorder",
        check: recorder::check,
        open: Opener::Sink(recorder::open),
    },
    #[cfg(feature = "lsl")]
    Driver {
        name: "lsl_out",
        check: lsl::check_out,
        open: Opener::Sink(lsl::open_out),
    },
    Driver {
        name: "serial_out",
        check: serial::check,
        open: Opener::Sink(serial::open),
    },
];

/// Drivers this build was made without, and the cargo feature of rtloop-runtime that brings
/// each in.
pub const LEFT_OUT: &[(&str, &str)] = &[
    #[cfg(not(feature = "lsl"))]
    ("lsl_in", "lsl"),
    #[cfg(not(feature = "lsl"))]
    ("lsl_out", "lsl"),
    #[cfg(not(feature = "brainflow"))]
    ("brainflow", "brainflow"),
    #[cfg(not(feature = "logger"))]
    ("logger", "logger"),
    #[cfg(not(feature = "recorder"))]
    ("recorder", "recorder"),
];

/// The built-in driver named `name`.
#[must_use]
pub fn find(name: &str) -> Option<&'static Driver> {
    DRIVERS.iter().find(|d| d.name == name)
}

/// The names of the drivers of one section, for messages.
#[must_use]
pub fn driver_names(kind: Kind) -> String {
    DRIVERS
        .iter()
        .filter(|d| d.kind() == kind)
        .map(|d| d.name)
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
    let Some(d) = find(driver) else {
        if let Some((_, feature)) = LEFT_OUT.iter().find(|(n, _)| *n == driver) {
            return Err(format!(
                "driver {driver:?} is not built into this rtloop (rtloop-runtime's cargo feature {feature:?}); allowed for a {}: {}",
                kind_word(kind),
                driver_names(kind)
            ));
        }
        return Err(format!(
            "unknown driver {driver:?}; allowed for a {}: {}",
            kind_word(kind),
            driver_names(kind)
        ));
    };
    if d.kind() != kind {
        return Err(format!(
            "driver {driver:?} is a {} driver, not a {} driver; allowed here: {}",
            kind_word(d.kind()),
            kind_word(kind),
            driver_names(kind)
        ));
    }
    (d.check)(options, signals)
}

/// Open a source driver (its options were [`check`]ed) writing `outputs`.
pub fn open_source(
    driver: &str,
    options: &serde_json::Value,
    outputs: &[Signal],
    ctx: &DriverCtx,
) -> Result<Box<dyn Source>, DriverError> {
    match find(driver).map(|d| d.open) {
        Some(Opener::Source(open)) => open(options, outputs, ctx),
        _ => Err(DriverError::Config(format!(
            "{driver:?} is not a source driver; allowed: {}",
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
    match find(driver).map(|d| d.open) {
        Some(Opener::Sink(open)) => open(options, inputs, ctx),
        _ => Err(DriverError::Config(format!(
            "{driver:?} is not a sink driver; allowed: {}",
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
    use super::*;

    #[test]
    fn every_driver_is_built_in_or_left_out_with_its_feature_and_named_once() {
        let mut names: Vec<&str> = DRIVERS
            .iter()
            .map(|d| d.name)
            .chain(LEFT_OUT.iter().map(|(n, _)| *n))
            .collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a driver named twice");
        assert_eq!(n, 11);
        for (name, feature) in LEFT_OUT {
            let e = check(name, Kind::Sink, &serde_json::Value::Null, &[]).unwrap_err();
            assert!(e.contains(&format!("feature {feature:?}")), "{e}");
        }
        let e = check("nope", Kind::Source, &serde_json::Value::Null, &[]).unwrap_err();
        assert!(
            e.starts_with("unknown driver \"nope\"; allowed for a source: synthetic, udp_in"),
            "{e}"
        );
    }

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
