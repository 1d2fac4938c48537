//! `rtloop.replay.play`: a recorded file played into live streams by `rtloop_record`'s
//! `ReplayPlan` (what `rtloop replay` runs), on a thread of this process that never needs
//! the GIL.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use rtloop_record::replay::{ReplayPlan, ReplaySelection};
use rtloop_record::{ReplayError, ReplayReport, SourceError};

use crate::errors::stream_exception;
use crate::task::Task;

/// The Python exception for a replay's error: the file's problems are ValueError (OSError
/// when it cannot be read), a stream's its own exception class.
fn replay_err(e: ReplayError) -> PyErr {
    let msg = e.to_string();
    match e {
        ReplayError::Source(SourceError::Io { .. }) => PyOSError::new_err(msg),
        ReplayError::Stream { source, .. } => stream_exception(msg, &source),
        _ => PyValueError::new_err(msg),
    }
}

/// A replay running in this process (`rtloop.replay.Replay` wraps it).
#[pyclass(module = "rtloop._rtloop")]
pub(crate) struct ReplaySession {
    task: Task<Result<Vec<ReplayReport>, ReplayError>>,
    streams: Vec<String>,
    /// The reports, once the thread was joined (a list, one per series).
    report: Option<Py<PyAny>>,
}

impl ReplaySession {
    fn join(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if let Some(out) = self.task.join(py) {
            let reports = out?.map_err(replay_err)?;
            self.report = Some(crate::report::to_py(py, &reports)?);
        }
        match &self.report {
            Some(r) => Ok(r.clone_ref(py)),
            None => crate::report::to_py(py, &Vec::<ReplayReport>::new()),
        }
    }
}

#[pymethods]
impl ReplaySession {
    /// Open `path` (every chosen series, every stream name checked: errors raise here and
    /// nothing plays), then play it on a thread; returns once every stream exists.
    #[new]
    #[pyo3(signature = (path, series, all, stream, speed, capacity, keep=false))]
    #[allow(clippy::too_many_arguments)] // the Python call's keyword arguments, one each
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        series: Vec<String>,
        all: bool,
        stream: Option<String>,
        speed: Option<f64>,
        capacity: Option<u64>,
        keep: bool,
    ) -> PyResult<Self> {
        if let Some(s) = speed.filter(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(PyValueError::new_err(format!(
                "speed={s}: a number > 0 (2 = twice the original pace), or None for as fast as possible"
            )));
        }
        if capacity == Some(0) {
            return Err(PyValueError::new_err("capacity=0: at least 1 sample"));
        }
        let sel = ReplaySelection {
            series,
            all,
            stream,
        };
        let plan = crate::exit::detach(py, || ReplayPlan::open(&path, &sel)).map_err(replay_err)?;
        let streams: Vec<String> = plan.plays().map(|(n, _)| n.to_owned()).collect();
        let n = streams.len();
        let names = streams.clone();
        let task = Task::start(py, "rtloop-replay", move |stop, ready| {
            // ready once every series' stream exists (each is made on its own thread)
            let made = AtomicUsize::new(0);
            let created = |_: &str| {
                // Relaxed: a count; the notifier's lock orders what it publishes
                if made.fetch_add(1, Ordering::Relaxed) + 1 == n {
                    ready.ready(names.clone(), String::new());
                }
            };
            plan.play(speed, capacity, keep, stop, &created)
        })?;
        let mut session = ReplaySession {
            task,
            streams,
            report: None,
        };
        if !session.task.is_ready() {
            // it ended before every stream was made: its error
            session.join(py)?;
        }
        Ok(session)
    }

    /// The streams being written, one per series.
    #[getter]
    fn streams(&self) -> Vec<String> {
        self.streams.clone()
    }

    /// True until every series has played to its end (or was stopped, or failed).
    #[getter]
    fn running(&self) -> bool {
        self.task.running()
    }

    /// Wait (the GIL released) until the replay ends, at most `timeout` seconds; True if it
    /// has.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        if let Some(t) = timeout.filter(|t| !(t.is_finite() && *t >= 0.0)) {
            return Err(PyValueError::new_err(format!(
                "timeout={t}: seconds >= 0, or None"
            )));
        }
        // longer than a Duration holds is forever
        Ok(self.task.wait(
            py,
            timeout.and_then(|t| Duration::try_from_secs_f64(t).ok()),
        ))
    }

    /// Stop the replay (what was written stays in the streams), wait for it and return the
    /// reports (a list of dicts, one per series); raises the error it failed with.
    fn stop(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.task.stop();
        self.join(py)
    }
}
