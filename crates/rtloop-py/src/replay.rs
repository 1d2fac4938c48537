//! `rtloop.replay.play`: a recorded file played into live streams by `rtloop_record`'s
//! `ReplayPlan` (what `rtloop replay` runs), on a thread of this process that never needs
//! the GIL.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use rtloop_record::replay::{ReplayPlan, ReplaySelection};
use rtloop_record::{ReplayError, ReplayReport, SourceError};

use crate::errors::ToPyErr;

/// The Python exception for a replay's error: the file's problems are ValueError (OSError
/// when it cannot be read), a stream's its own exception class.
fn replay_err(e: ReplayError) -> PyErr {
    let msg = e.to_string();
    match e {
        ReplayError::Source(SourceError::Io { .. }) => PyOSError::new_err(msg),
        ReplayError::Stream { source, .. } => {
            let inner = source.to_py_err();
            Python::attach(|py| {
                let err = PyErr::from_type(inner.get_type(py), msg);
                err.set_cause(py, Some(inner));
                err
            })
        }
        _ => PyValueError::new_err(msg),
    }
}

#[derive(Default)]
struct State {
    /// Streams made so far.
    created: usize,
    /// The thread has ended.
    ended: bool,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

/// A replay running in this process (`rtloop.replay.Replay` wraps it).
#[pyclass(module = "rtloop._rtloop")]
pub(crate) struct ReplaySession {
    stop: Arc<AtomicBool>,
    shared: Shared,
    streams: Vec<String>,
    thread: Option<JoinHandle<Result<Vec<ReplayReport>, ReplayError>>>,
    report: Option<String>,
}

impl ReplaySession {
    fn wait_until(&self, py: Python<'_>, done: impl Fn(&State) -> bool + Send) -> bool {
        let shared = self.shared.clone();
        py.detach(move || {
            let (lock, cv) = &*shared;
            let s = cv
                .wait_while(lock.lock().unwrap_or_else(PoisonError::into_inner), |s| {
                    !done(s) && !s.ended
                })
                .unwrap_or_else(PoisonError::into_inner);
            done(&s)
        })
    }

    fn join(&mut self, py: Python<'_>) -> PyResult<String> {
        if let Some(t) = self.thread.take() {
            let reports = match py.detach(move || t.join()) {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => return Err(replay_err(e)),
                Err(_) => return Err(PyRuntimeError::new_err("a replay thread panicked")),
            };
            self.report = Some(
                serde_json::to_string(&reports)
                    .map_err(|e| PyRuntimeError::new_err(e.to_string()))?,
            );
        }
        Ok(self.report.clone().unwrap_or_else(|| "[]".into()))
    }
}

#[pymethods]
impl ReplaySession {
    /// Open `path` (every chosen series, every stream name checked: errors raise here and
    /// nothing plays), then play it on a thread; returns once every stream exists.
    #[new]
    #[pyo3(signature = (path, series, all, stream, speed, capacity))]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        series: Vec<String>,
        all: bool,
        stream: Option<String>,
        speed: Option<f64>,
        capacity: Option<u64>,
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
        let plan = py
            .detach(|| ReplayPlan::open(&path, &sel))
            .map_err(replay_err)?;
        let streams: Vec<String> = plan.plays().map(|(n, _)| n.to_owned()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let shared: Shared = Arc::default();
        let thread = {
            let (stop, shared) = (stop.clone(), shared.clone());
            std::thread::Builder::new()
                .name("rtloop-replay".into())
                .spawn(move || {
                    let created = |_: &str| {
                        let (lock, cv) = &*shared;
                        lock.lock().unwrap_or_else(PoisonError::into_inner).created += 1;
                        cv.notify_all();
                    };
                    let out = plan.play(speed, capacity, &stop, &created);
                    let (lock, cv) = &*shared;
                    lock.lock().unwrap_or_else(PoisonError::into_inner).ended = true;
                    cv.notify_all();
                    out
                })
                .map_err(|e| PyRuntimeError::new_err(format!("cannot start the replay: {e}")))?
        };
        let mut session = ReplaySession {
            stop,
            shared,
            streams,
            thread: Some(thread),
            report: None,
        };
        let n = session.streams.len();
        if !session.wait_until(py, move |s| s.created >= n) {
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
        !self
            .shared
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .ended
    }

    /// Wait (the GIL released) until the replay ends, at most `timeout` seconds; True if it
    /// has.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let Some(t) = timeout else {
            return Ok(self.wait_until(py, |_| false) || !self.running());
        };
        if !(t.is_finite() && t >= 0.0) {
            return Err(PyValueError::new_err(format!(
                "timeout={t}: seconds >= 0, or None"
            )));
        }
        let limit = std::time::Duration::from_secs_f64(t);
        let shared = self.shared.clone();
        Ok(py.detach(move || {
            let (lock, cv) = &*shared;
            cv.wait_timeout_while(
                lock.lock().unwrap_or_else(PoisonError::into_inner),
                limit,
                |s| !s.ended,
            )
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .ended
        }))
    }

    /// Stop the replay (what was written stays in the streams), wait for it and return the
    /// reports as JSON, one per series; raises the error it failed with.
    fn stop(&mut self, py: Python<'_>) -> PyResult<String> {
        // Relaxed: a flag polled by the replay loop; the join orders everything else
        self.stop.store(true, Ordering::Relaxed);
        self.join(py)
    }

    /// Wait for the replay to end by itself and return the reports as JSON.
    fn join_reports(&mut self, py: Python<'_>) -> PyResult<String> {
        self.join(py)
    }
}

impl Drop for ReplaySession {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
