//! `rtloop.bridge`: the LSL and BrainFlow bridges run in this process, on a thread of their
//! own that never needs the GIL: the same library calls `rtloop bridge lsl-in`, `lsl-out` and
//! `brainflow-in` make, returning the same reports.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyImportError, PyRuntimeError, PyTimeoutError, PyValueError};
use pyo3::prelude::*;
use rtloop_brainflow::BrainFlowError;
use rtloop_lsl::LslError;

use crate::errors::stream_exception;
use crate::task::{Notifier, Task};

/// Why a bridge failed; kept as the library's error until it reaches Python's thread.
enum Failure {
    Lsl(LslError),
    BrainFlow(BrainFlowError),
}

impl From<LslError> for Failure {
    fn from(e: LslError) -> Self {
        Failure::Lsl(e)
    }
}

impl From<BrainFlowError> for Failure {
    fn from(e: BrainFlowError) -> Self {
        Failure::BrainFlow(e)
    }
}

impl Failure {
    fn into_py_err(self) -> PyErr {
        match self {
            Failure::Lsl(e) => {
                let msg = e.to_string();
                match &e {
                    LslError::NotFound(_) => PyImportError::new_err(msg),
                    LslError::NoOutlet { .. } => PyTimeoutError::new_err(msg),
                    LslError::Unmappable(_) => PyValueError::new_err(msg),
                    LslError::Stream { source, .. } => stream_exception(msg, source),
                    LslError::Liblsl { .. } | LslError::NotCreated(_) => {
                        PyRuntimeError::new_err(msg)
                    }
                }
            }
            Failure::BrainFlow(e) => {
                let msg = e.to_string();
                match &e {
                    BrainFlowError::NotFound(_) => PyImportError::new_err(msg),
                    BrainFlowError::UnknownBoard { .. }
                    | BrainFlowError::MissingOption { .. }
                    | BrainFlowError::BadOption(_)
                    | BrainFlowError::BadPlaybackFile { .. }
                    | BrainFlowError::UnknownKind { .. } => PyValueError::new_err(msg),
                    BrainFlowError::Stream { source, .. } => stream_exception(msg, source),
                    BrainFlowError::Call { .. } | BrainFlowError::Descriptor(_) => {
                        PyRuntimeError::new_err(msg)
                    }
                }
            }
        }
    }
}

/// What a bridge reports, kept as the library's value until it reaches Python's thread.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum BridgeReport {
    Lsl(rtloop_lsl::bridge::Report),
    BrainFlow(rtloop_brainflow::bridge::Report),
}

/// One running bridge (`rtloop.bridge.Bridge` wraps it).
#[pyclass(module = "rtloop._rtloop")]
pub(crate) struct BridgeSession {
    task: Task<Result<BridgeReport, Failure>>,
    /// The report, once the thread was joined.
    report: Option<Py<PyAny>>,
}

impl BridgeSession {
    /// Start `body` on its own thread and wait (the GIL released) until it says it is ready,
    /// or raise its error if it ends first.
    fn start(
        py: Python<'_>,
        what: &str,
        body: impl FnOnce(&AtomicBool, &Notifier) -> Result<BridgeReport, Failure> + Send + 'static,
    ) -> PyResult<Self> {
        let mut session = BridgeSession {
            task: Task::start(py, &format!("rtloop-bridge-{what}"), body)?,
            report: None,
        };
        if !session.task.is_ready() {
            // it ended before it was ready: its error (or a report, for a bridge with nothing
            // to do)
            session.join(py)?;
        }
        Ok(session)
    }

    fn join(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        if let Some(out) = self.task.join(py) {
            let report = out?.map_err(Failure::into_py_err)?;
            self.report = Some(crate::report::to_py(py, &report)?);
        }
        Ok(self.report.as_ref().map(|r| r.clone_ref(py)))
    }
}

fn duration(what: &str, s: Option<f64>) -> PyResult<Option<Duration>> {
    s.map(|s| positive_seconds(what, s)).transpose()
}

fn positive_seconds(what: &str, s: f64) -> PyResult<Duration> {
    crate::blocking::seconds_from_py(what, s)
}

#[pymethods]
impl BridgeSession {
    /// An LSL outlet becomes a stream (`rtloop bridge lsl-in`). Returns once the stream
    /// exists and the inlet is open.
    #[staticmethod]
    #[pyo3(signature = (query, by=None, stream=None, timeout=5.0, capacity=None, seconds=None, keep=false))]
    #[allow(clippy::too_many_arguments)]
    fn lsl_in(
        py: Python<'_>,
        query: String,
        by: Option<String>,
        stream: Option<String>,
        timeout: f64,
        capacity: Option<u64>,
        seconds: Option<f64>,
        keep: bool,
    ) -> PyResult<Self> {
        if let Some(b) = by.as_deref().filter(|b| !["name", "type"].contains(b)) {
            return Err(PyValueError::new_err(format!(
                "by={b:?}: use \"name\", \"type\" or None (either)"
            )));
        }
        positive_seconds("timeout", timeout)?;
        let o = rtloop_lsl::bridge::InOptions {
            query,
            by,
            stream,
            timeout,
            capacity,
            duration: duration("seconds", seconds)?,
            remove_at_end: !keep,
        };
        BridgeSession::start(py, "lsl-in", move |stop, ready| {
            let lsl = Arc::new(rtloop_lsl::Lsl::load()?);
            let report = rtloop_lsl::bridge::lsl_in(&lsl, &o, stop, &mut |meta, name| {
                let text = format!("LSL {meta} -> stream {name:?} (liblsl {})", lsl.version());
                ready.ready(vec![name.to_string()], text);
            })?;
            Ok(BridgeReport::Lsl(report))
        })
    }

    /// A stream becomes an LSL outlet, its events a `Markers` outlet (`rtloop bridge
    /// lsl-out`; content type `EEG` unless `kind` says). Returns once the outlets exist.
    #[staticmethod]
    #[pyo3(signature = (stream, name=None, kind=None, source_id=None, seconds=None))]
    fn lsl_out(
        py: Python<'_>,
        stream: String,
        name: Option<String>,
        kind: Option<String>,
        source_id: Option<String>,
        seconds: Option<f64>,
    ) -> PyResult<Self> {
        let o = rtloop_lsl::bridge::OutOptions {
            stream,
            name,
            kind: Some(kind.unwrap_or_else(|| "EEG".into())),
            source_id,
            duration: duration("seconds", seconds)?,
        };
        BridgeSession::start(py, "lsl-out", move |stop, ready| {
            let lsl = Arc::new(rtloop_lsl::Lsl::load()?);
            let stream = o.stream.clone();
            let report = rtloop_lsl::bridge::lsl_out(&lsl, &o, stop, &mut |meta| {
                let text = format!("stream {stream:?} -> LSL {meta} (liblsl {})", lsl.version());
                ready.ready(vec![stream.clone()], text);
            })?;
            Ok(BridgeReport::Lsl(report))
        })
    }

    /// A BrainFlow board becomes streams, one per kind of data (`rtloop bridge
    /// brainflow-in`). `params` holds BrainFlow's input parameters by name. Returns once
    /// the board streams into them.
    #[staticmethod]
    #[pyo3(signature = (board, params, configs, name=None, capacity=None, seconds=None, keep=false, stall=2.0, retry=1.0))]
    #[allow(clippy::too_many_arguments)]
    fn brainflow_in(
        py: Python<'_>,
        board: String,
        params: &str,
        configs: Vec<String>,
        name: Option<String>,
        capacity: Option<u64>,
        seconds: Option<f64>,
        keep: bool,
        stall: f64,
        retry: f64,
    ) -> PyResult<Self> {
        use rtloop_brainflow::boards::Board;
        let mut o = rtloop_brainflow::bridge::InOptions::new(&board);
        o.params = serde_json::from_str(params)
            .map_err(|e| PyValueError::new_err(format!("BrainFlow parameters: {e}")))?;
        o.configs = configs;
        o.prefix = name;
        o.capacity = capacity;
        o.duration = duration("seconds", seconds)?;
        o.remove_at_end = !keep;
        o.stall = positive_seconds("stall", stall)?;
        o.retry = positive_seconds("retry", retry)?;
        // the board and its options are checked before BrainFlow is loaded
        let b = Board::parse(&o.board).map_err(|e| Failure::from(e).into_py_err())?;
        o.params
            .check(b)
            .map_err(|e| Failure::from(e).into_py_err())?;
        BridgeSession::start(py, "brainflow-in", move |stop, ready| {
            let bf = rtloop_brainflow::BrainFlow::load()?;
            let version = bf.version();
            let report = rtloop_brainflow::bridge::brainflow_in(&bf, &o, stop, &mut |names| {
                let text = format!(
                    "BrainFlow {b} -> streams {} (BrainFlow {version})",
                    names.join(", ")
                );
                ready.ready(names.to_vec(), text);
            })?;
            Ok(BridgeReport::BrainFlow(report))
        })
    }

    /// The streams the bridge writes (LSL in, BrainFlow) or reads (LSL out).
    #[getter]
    fn streams(&self) -> Vec<String> {
        self.task.ready().0
    }

    /// What it bridges, in words.
    #[getter]
    fn description(&self) -> String {
        self.task.ready().1
    }

    /// True until the bridge has ended (stopped, its `seconds` over, the end of a playback
    /// file, or an error `stop()` raises).
    #[getter]
    fn running(&self) -> bool {
        self.task.running()
    }

    /// Wait (the GIL released) until the bridge ends by itself or `timeout` seconds pass;
    /// True if it has ended.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let limit = duration("timeout", timeout)?;
        Ok(self.task.wait(py, limit))
    }

    /// Stop the bridge (it removes its streams unless `keep`), wait for it and return its
    /// report (a dict); raises the error it failed with. Later calls return the same report.
    fn stop(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.task.stop();
        self.join(py)
    }
}

/// The BrainFlow boards: (name, id, the options each needs, as `rtloop bridge brainflow-in`
/// flags).
#[pyfunction]
pub(crate) fn brainflow_boards() -> Vec<(String, i32, Vec<String>)> {
    use rtloop_brainflow::boards::{Board, BOARDS};
    BOARDS
        .iter()
        .map(|&(name, id)| {
            let b = Board { id, name };
            let needs = b.required().iter().map(|(o, _)| o.flag().to_string());
            (name.to_string(), id, needs.collect())
        })
        .collect()
}
