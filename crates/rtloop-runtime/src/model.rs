//! The model file: YAML naming config, signals, sources, modules and sinks.
//!
//! `load` parses the file and then validates the whole graph before anything starts,
//! reporting every problem at once with its line (docs/runtime-model.md documents every
//! key and every error).

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rtloop_stream::DType;

/// A parsed and validated model.
#[derive(Debug, Clone)]
pub struct Model {
    /// The model file.
    pub path: PathBuf,
    /// `config.name`, else the file stem. Streams are named `<name>.<signal>`.
    pub name: String,
    /// The `config:` section.
    pub config: Config,
    /// The `signals:` section, in file order.
    pub signals: Vec<Signal>,
    /// Sources, then modules, then sinks, each section in file order.
    pub processes: Vec<Process>,
}

/// What a late process does to the model (`config.on_miss`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MissPolicy {
    /// Count the miss and go on (default).
    Continue,
    /// Stop the model at the first miss (LiCoRICE's only behaviour).
    Stop,
}

/// The `config:` section.
#[derive(Debug, Clone)]
pub struct Config {
    /// `tick_us` (default 1000): the tick period.
    pub tick: Duration,
    /// `num_ticks` (default -1 = until stopped): ticks to run.
    pub num_ticks: Option<u64>,
    /// `busy_wait_us` (default 50): the timer sleeps until this long before each deadline,
    /// then spins to it (0 = sleep only).
    pub busy_wait: Duration,
    /// `phase_us` (default 500, 0 for ticks of 500 µs or less): deadlines fall on multiples
    /// of the tick on CLOCK_MONOTONIC plus this offset. Whole milliseconds are where this
    /// VM's host does its periodic work (docs/runtime.md), so they are avoided by default.
    pub phase: Duration,
    /// `spin_us` (default 10): how long a process spins on its inputs before it sleeps on
    /// the futex.
    pub spin: Duration,
    /// `realtime:` (default true) SCHED_FIFO for the timer and every process when permitted.
    pub realtime: bool,
    /// `priority` (default 80): SCHED_FIFO priority of the processes; the timer gets +1.
    pub priority: i32,
    /// `mlockall` (default true): lock every process's memory when permitted.
    pub mlockall: bool,
    /// `pm_qos` (default true): while the model runs, hold `/dev/cpu_dma_latency` at 0
    /// when permitted, so idle CPUs stay out of deep sleep and wake-ups take a few µs.
    pub pm_qos: bool,
    /// `cores` (default: all online CPUs): CPUs the model's processes may run on.
    pub cores: Option<Vec<usize>>,
    /// `timer_core` (default: the last of `cores`): CPU the timer is pinned to.
    pub timer_core: Option<usize>,
    /// `on_miss` (default continue).
    pub on_miss: MissPolicy,
    /// `python` (default: `$RTLOOP_PYTHON`, else `python3`): interpreter for Python modules.
    pub python: Option<String>,
}

/// One signal: a stream carrying `shape` values per tick, keeping `history` ticks.
#[derive(Debug, Clone)]
pub struct Signal {
    /// Name (a stream name: letters, digits, `_`, `-`, `.`).
    pub name: String,
    /// Values per tick: `[channels]` (one sample per tick) or `[samples, channels]`.
    pub shape: Vec<usize>,
    /// Value type.
    pub dtype: DType,
    /// `history` (default 1): ticks kept and shown to readers.
    pub history: u64,
    /// `variable` (default false): each tick carries 0..=shape[0] rows (packets) instead
    /// of exactly shape[0].
    pub variable: bool,
    /// `channels` (default none): one name per value of a row, kept in logs and shown to
    /// modules; empty when not given.
    pub channels: Vec<String>,
    /// `units` (default none): one unit per value of a row, in the stream's header and the
    /// log; empty when not given.
    pub units: Vec<String>,
    /// Line of the signal's name in the model file (1-based).
    pub line: usize,
}

impl Signal {
    /// Rows (stream samples) per tick: `shape[0]` for a 2-D shape, else 1.
    #[must_use]
    pub fn rows_per_tick(&self) -> usize {
        if self.shape.len() >= 2 {
            self.shape[0]
        } else {
            1
        }
    }
    /// Values per row (stream channels): the product of the shape after the first
    /// dimension for a 2-D shape, else the product of the shape.
    #[must_use]
    pub fn row_len(&self) -> usize {
        if self.shape.len() >= 2 {
            self.shape[1..].iter().product()
        } else {
            self.shape.iter().product()
        }
    }
    /// Bytes per row.
    #[must_use]
    pub fn row_bytes(&self) -> usize {
        self.row_len() * self.dtype.itemsize()
    }
}

/// Which section a process comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// `sources:` — runs at tick start, writes signals from outside.
    Source,
    /// `modules:` — computes outputs from inputs.
    Module,
    /// `sinks:` — takes signals out (network, disk).
    Sink,
}

/// What a process runs.
#[derive(Debug, Clone)]
pub enum Body {
    /// A built-in driver (`driver:` + `options:`), for sources and sinks.
    Driver {
        /// Driver name (`synthetic`, `udp_in`, ...).
        driver: String,
        /// The `options:` mapping as JSON (empty object if absent).
        options: serde_json::Value,
    },
    /// `language: python`, `code: file.py` (relative to the model file), `numba: bool`.
    Python {
        /// Absolute path of the code file.
        code: PathBuf,
        /// Compile `step` with numba.
        numba: bool,
    },
    /// `language: rust`, `code: file.rs`.
    Rust {
        /// Absolute path of the code file.
        code: PathBuf,
    },
    /// A built-in block (`block:` + `options:`), for modules: `crate::blocks::BLOCKS`.
    Block {
        /// Block name (`bandpass`, `spikes`, ...).
        block: String,
        /// The `options:` mapping as JSON (empty object if absent).
        options: serde_json::Value,
    },
}

/// One source, module or sink.
#[derive(Debug, Clone)]
pub struct Process {
    /// Name (unique across all sections).
    pub name: String,
    /// Section.
    pub kind: Kind,
    /// `in:` signal names.
    pub inputs: Vec<String>,
    /// `out:` signal names.
    pub outputs: Vec<String>,
    /// What it runs.
    pub body: Body,
    /// `core:` CPU to pin this process to (default: assigned round-robin over `cores`).
    pub core: Option<usize>,
    /// A module's `options:` (a JSON object, empty by default): passed to its `init` (Python)
    /// or read with `t.option(name)` (Rust).
    pub options: serde_json::Value,
    /// A module's `every:` (default 1): it runs on ticks that are multiples of this; on the
    /// others its outputs repeat the last values it wrote.
    pub every: u64,
    /// Line of the process's name in the model file (1-based).
    pub line: usize,
}

/// One problem in a model file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelError {
    /// 1-based line the problem is at; 0 = the whole file.
    pub line: usize,
    /// What is wrong, and what is allowed.
    pub message: String,
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            f.write_str(&self.message)
        } else {
            write!(f, "line {}: {}", self.line, self.message)
        }
    }
}

/// Every problem found in a model file, sorted by line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelErrors {
    /// The model file.
    pub path: PathBuf,
    /// The problems, sorted by line (0 = whole file first), never empty.
    pub errors: Vec<ModelError>,
}

impl fmt::Display for ModelErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.errors.len();
        write!(
            f,
            "{}: {n} problem{}",
            self.path.display(),
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.errors {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ModelErrors {}

mod validate;

/// Read and validate a model file. An unreadable file is one error (line 0); otherwise see
/// [`parse_str`].
///
/// # Errors
/// Every problem found, each with its line.
pub fn load(path: &Path) -> Result<Model, ModelErrors> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse_str(&text, path),
        Err(e) => Err(ModelErrors {
            path: path.to_path_buf(),
            errors: vec![ModelError {
                line: 0,
                message: format!("cannot read the model file: {e}"),
            }],
        }),
    }
}

/// Parse and validate model text as if read from `path`: the model name defaults to the
/// file stem and `code:` paths are relative to the file's directory. A YAML syntax error is
/// one error at the parser's line; otherwise every problem of the whole model is reported.
///
/// # Errors
/// Every problem found, sorted by line.
pub fn parse_str(text: &str, path: &Path) -> Result<Model, ModelErrors> {
    parse_checked(text, path, &crate::drivers::check)
}

/// [`parse_str`] with another driver-options check (tests).
fn parse_checked(
    text: &str,
    path: &Path,
    check: validate::DriverCheck<'_>,
) -> Result<Model, ModelErrors> {
    validate::parse(text, path, check).map_err(|mut errors| {
        errors.sort_by_key(|e| e.line);
        ModelErrors {
            path: path.to_path_buf(),
            errors,
        }
    })
}

#[cfg(test)]
mod tests;
