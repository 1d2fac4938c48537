//! `rtloop._rtloop`: the native module of rtloop's Python package. A thin layer over
//! the rtloop libraries: conversions, numpy views of the shared mapping, and the
//! mapping of Rust errors to Python exceptions (all in `errors.rs`). The public Python API
//! is the pure-Python package `rtloop` that wraps this module.

#![deny(unsafe_op_in_unsafe_fn, missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks, clippy::unnecessary_safety_comment)]

mod blocking;
mod bridge;
mod convert;
mod dsp;
mod errors;
mod exit;
mod fieldtrip;
mod reader;
mod recording;
mod replay;
mod report;
mod runtime;
mod runtime_log;
mod stream;
mod task;
mod writer;

use pyo3::prelude::*;

/// Seconds of CLOCK_MONOTONIC, the clock of every rtloop timestamp (pylsl's `local_clock`).
#[pyfunction]
fn local_clock() -> f64 {
    convert::ns_to_s(rtloop_sys::monotonic_ns())
}

/// Nanoseconds of CLOCK_MONOTONIC.
#[pyfunction]
fn monotonic_ns() -> u64 {
    rtloop_sys::monotonic_ns()
}

/// Path of the shared-memory file of stream `name`.
#[pyfunction]
fn stream_path(name: &str) -> std::path::PathBuf {
    rtloop_stream::stream_path(name)
}

/// A Python function as the latency lab's work step: called with each block's samples as a
/// `(frames, channels)` uint16 array; an int it returns counts as events found.
struct PyWork {
    f: Py<PyAny>,
    channels: usize,
    error: Option<PyErr>,
}

impl rtloop_lab::work::BlockWork for PyWork {
    fn process(&mut self, samples: &[u8]) -> u64 {
        if self.error.is_some() || samples.is_empty() {
            return 0;
        }
        crate::exit::attach(|py| {
            let values: Vec<u16> = samples
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
            let rows = values.len() / self.channels.max(1);
            use numpy::PyArrayMethods as _;
            let arr = numpy::PyArray1::from_vec(py, values);
            let result = arr
                .reshape([rows, self.channels.max(1)])
                .and_then(|a| self.f.call1(py, (a,)));
            match result {
                Ok(r) => r.extract::<u64>(py).unwrap_or(0),
                Err(e) => {
                    self.error = Some(e);
                    0
                }
            }
        })
    }

    fn failed(&self) -> bool {
        self.error.is_some()
    }
}

/// One load test (`rtloop_lab::loadtest::loadtest`) with a Python function as the work
/// step. Returns the report as Python objects (the same value the command line prints with
/// `--json`). The run releases the GIL; the function is called with it held, once per block.
#[pyfunction]
#[pyo3(signature = (profile, read_size, seconds, warmup, transport, every, fps, received_words, fifo_bytes, spin_us, reference, out, work, publish=None))]
#[allow(clippy::too_many_arguments)] // the load test's settings, each a keyword in Python
fn lab_loadtest(
    py: Python<'_>,
    profile: &str,
    read_size: u64,
    seconds: f64,
    warmup: f64,
    transport: String,
    every: u64,
    fps: Option<u64>,
    received_words: Option<u64>,
    fifo_bytes: Option<u64>,
    spin_us: Option<u64>,
    reference: bool,
    out: Option<std::path::PathBuf>,
    work: Py<PyAny>,
    publish: Option<String>,
) -> PyResult<Py<PyAny>> {
    use rtloop_lab::loadtest::LoadtestConfig;
    let value_error = lab_error;
    let mut lab = lab_settings(
        profile,
        transport,
        every,
        fps,
        received_words,
        fifo_bytes,
        spin_us,
    )?;
    lab.publish = publish;
    let cfg = LoadtestConfig {
        lab,
        read_size,
        seconds,
        warmup,
        loopbacks: None,
        reference,
    };
    let mut w = PyWork {
        f: work,
        channels: cfg.lab.load.received_words as usize,
        error: None,
    };
    let result = crate::exit::detach(py, || {
        rtloop_lab::loadtest::loadtest(&cfg, &mut |_| {}, Some(&mut w))
    });
    if let Some(e) = w.error.take() {
        return Err(e);
    }
    let report = result.map_err(value_error)?;
    if let Some(dir) = &out {
        rtloop_lab::loadtest::write_results(dir, &report).map_err(value_error)?;
    }
    if let Some(e) = &report.error {
        return Err(pyo3::exceptions::PyRuntimeError::new_err(e.clone()));
    }
    report::to_py(py, &report)
}

/// The Python exception for a lab error: settings out of range are ValueError.
fn lab_error(e: rtloop_lab::loadtest::LabError) -> PyErr {
    use rtloop_lab::loadtest::LabError;
    match e {
        LabError::Config(_)
        | LabError::Profile(_)
        | LabError::Transport { .. }
        | LabError::MaxSeconds(_)
        | LabError::Live(rtloop_lab::live::LiveError::Create(rtloop_stream::CreateError::Name(
            _,
        ))) => pyo3::exceptions::PyValueError::new_err(e.to_string()),
        other => pyo3::exceptions::PyRuntimeError::new_err(other.to_string()),
    }
}

/// A profile's lab settings with Python's overrides.
#[allow(clippy::too_many_arguments)] // the overrides, each a keyword in Python
fn lab_settings(
    profile: &str,
    transport: String,
    every: u64,
    fps: Option<u64>,
    received_words: Option<u64>,
    fifo_bytes: Option<u64>,
    spin_us: Option<u64>,
) -> PyResult<rtloop_lab::loadtest::LabSettings> {
    let mut lab = rtloop_lab::loadtest::LabSettings::profile(profile).map_err(lab_error)?;
    lab.load.fps = fps.unwrap_or(lab.load.fps);
    lab.load.received_words = received_words.unwrap_or(lab.load.received_words);
    lab.transport = transport;
    lab.every = every;
    lab.fifo_bytes = fifo_bytes.unwrap_or(lab.fifo_bytes);
    lab.spin_us = spin_us.unwrap_or(lab.spin_us);
    Ok(lab)
}

/// Sweep ReadSize (or the rate) as `rtloop lab tune` does (`rtloop_lab::loadtest::tune`):
/// the load from `profile` with the same overrides as `lab_loadtest`, the sweep's settings as
/// JSON (`TuneConfig`'s fields). Returns the result as Python objects; each step is logged before it
/// runs. The GIL is released for the whole sweep.
#[pyfunction]
#[pyo3(signature = (profile, transport, every, fps, received_words, fifo_bytes, spin_us, config_json, out=None))]
#[allow(clippy::too_many_arguments)] // the sweep's settings, each a keyword in Python
fn lab_tune(
    py: Python<'_>,
    profile: &str,
    transport: String,
    every: u64,
    fps: Option<u64>,
    received_words: Option<u64>,
    fifo_bytes: Option<u64>,
    spin_us: Option<u64>,
    config_json: &str,
    out: Option<std::path::PathBuf>,
) -> PyResult<Py<PyAny>> {
    use rtloop_lab::loadtest::TuneConfig;
    let value_error = lab_error;
    let cfg: TuneConfig = serde_json::from_str(config_json)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("rtloop.lab.tune: {e}")))?;
    let lab = lab_settings(
        profile,
        transport,
        every,
        fps,
        received_words,
        fifo_bytes,
        spin_us,
    )?;
    let result = crate::exit::detach(py, || {
        rtloop_lab::loadtest::tune(&lab, &cfg, &mut |read_size, fps| {
            tracing::info!(target: "rtloop.lab", "ReadSize {read_size} B at {fps} frames/s ...");
        })
    })
    .map_err(value_error)?;
    if let Some(dir) = &out {
        rtloop_lab::loadtest::write_tuning(dir, &result).map_err(value_error)?;
    }
    report::to_py(py, &result)
}

/// Hand the Rust crates' log records to Python's `logging` (under the `rtloop` logger).
/// Returns False if another logger was installed first. Called by `rtloop._logging`; the
/// command line installs its own subscriber instead.
#[pyfunction]
fn _init_logging(py: Python<'_>) -> PyResult<bool> {
    let logger = pyo3_log::Logger::new(py, pyo3_log::Caching::LoggersAndLevels)?
        .set_prefix("rtloop")
        .filter(log::LevelFilter::Debug);
    let handle = logger.reset_handle();
    // wrapped: records from other threads must not go into a finalizing interpreter
    match log::set_boxed_logger(Box::new(exit::ExitSafeLogger(logger))) {
        Ok(()) => {
            log::set_max_level(log::LevelFilter::Debug);
            let _ = LOG_RESET.set(handle);
            Ok(true)
        }
        Err(_) => Ok(false),
    }
}

/// Forget cached Python logger levels (after `rtloop.set_log_level`).
#[pyfunction]
fn _reset_logging() {
    if let Some(h) = LOG_RESET.get() {
        h.reset();
    }
}

static LOG_RESET: std::sync::OnceLock<pyo3_log::ResetHandle> = std::sync::OnceLock::new();

/// The module.
#[pymodule]
fn _rtloop(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "DTYPES",
        rtloop_stream::ALL_DTYPES
            .iter()
            .map(|d| d.name())
            .collect::<Vec<_>>(),
    )?;
    m.add(
        "DEFAULT_WRITE_TIMEOUT",
        rtloop_stream::DEFAULT_LOSSLESS_TIMEOUT.as_secs_f64(),
    )?;
    m.add_class::<stream::PyStream>()?;
    m.add_class::<writer::PyWriter>()?;
    m.add_class::<reader::PyReader>()?;
    m.add_class::<convert::WindowBase>()?;
    m.add_function(wrap_pyfunction!(local_clock, m)?)?;
    m.add_function(wrap_pyfunction!(exit::_prepare_numpy, m)?)?;
    m.add_function(wrap_pyfunction!(monotonic_ns, m)?)?;
    m.add_function(wrap_pyfunction!(stream_path, m)?)?;
    m.add_function(wrap_pyfunction!(lab_loadtest, m)?)?;
    m.add_function(wrap_pyfunction!(lab_tune, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::runtime_module, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::runtime_run, m)?)?;
    m.add_class::<runtime::RecordSession>()?;
    m.add_function(wrap_pyfunction!(runtime::xdf_from_recording, m)?)?;
    m.add_function(wrap_pyfunction!(runtime_log::read_log, m)?)?;
    m.add_class::<runtime::TickMemory>()?;
    m.add_class::<fieldtrip::PyFieldTripClient>()?;
    m.add_class::<fieldtrip::PyFieldTripServer>()?;
    m.add_class::<bridge::BridgeSession>()?;
    m.add_class::<replay::ReplaySession>()?;
    m.add_function(wrap_pyfunction!(bridge::brainflow_boards, m)?)?;
    m.add_function(wrap_pyfunction!(fieldtrip::fieldtrip_address, m)?)?;
    fieldtrip::register(m)?;
    m.add_function(wrap_pyfunction!(_init_logging, m)?)?;
    m.add_function(wrap_pyfunction!(_reset_logging, m)?)?;
    dsp::register(m)?;
    recording::register(m)?;
    errors::register(m)?;
    exit::register(m)?;
    Ok(())
}
