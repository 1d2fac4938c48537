//! A library call run on a thread of this process that never needs the GIL (a bridge, a
//! replay): a stop flag it polls, the moment it is ready (its streams exist), and its result
//! once joined. Python waits on it with the GIL released.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

#[derive(Default)]
struct State {
    /// The streams the call writes or reads, and what it does in words: set once ready.
    ready: Option<(Vec<String>, String)>,
    /// The thread has ended (with a result or an error).
    ended: bool,
}

/// The call's side: says when it is ready.
#[derive(Clone, Default)]
pub(crate) struct Notifier(Arc<(Mutex<State>, Condvar)>);

impl Notifier {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0 .0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The call is under way: its streams exist.
    pub(crate) fn ready(&self, streams: Vec<String>, description: String) {
        self.state().ready = Some((streams, description));
        self.0 .1.notify_all();
    }

    fn ended(&self) {
        self.state().ended = true;
        self.0 .1.notify_all();
    }

    /// Wait until `done` holds or the thread has ended, at most `limit`; whether `done` holds.
    fn wait(&self, limit: Option<Duration>, done: impl Fn(&State) -> bool) -> bool {
        let (lock, cv) = &*self.0;
        let guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let not_yet = |s: &mut State| !done(s) && !s.ended;
        let guard = match limit {
            Some(t) => {
                cv.wait_timeout_while(guard, t, not_yet)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
            None => cv
                .wait_while(guard, not_yet)
                .unwrap_or_else(PoisonError::into_inner),
        };
        done(&guard)
    }
}

/// The caller's side of a call running on its own thread.
pub(crate) struct Task<R: Send + 'static> {
    stop: Arc<AtomicBool>,
    notifier: Notifier,
    thread: Option<JoinHandle<R>>,
}

impl<R: Send + 'static> Task<R> {
    /// Start `body` on a thread named `name` and wait (the GIL released) until it is ready
    /// or has ended.
    pub(crate) fn start(
        py: Python<'_>,
        name: &str,
        body: impl FnOnce(&AtomicBool, &Notifier) -> R + Send + 'static,
    ) -> PyResult<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let notifier = Notifier::default();
        let thread = {
            let (stop, notifier) = (stop.clone(), notifier.clone());
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    let out = body(&stop, &notifier);
                    notifier.ended();
                    out
                })
                .map_err(|e| PyRuntimeError::new_err(format!("cannot start {name}: {e}")))?
        };
        let task = Task {
            stop,
            notifier,
            thread: Some(thread),
        };
        let n = task.notifier.clone();
        crate::exit::detach(py, move || n.wait(None, |s| s.ready.is_some()));
        Ok(task)
    }

    /// Whether the call said it was ready (false: it ended first).
    pub(crate) fn is_ready(&self) -> bool {
        self.notifier.state().ready.is_some()
    }

    /// The streams and the description the call gave when ready.
    pub(crate) fn ready(&self) -> (Vec<String>, String) {
        self.notifier.state().ready.clone().unwrap_or_default()
    }

    /// True until the thread has ended.
    pub(crate) fn running(&self) -> bool {
        !self.notifier.state().ended
    }

    /// Wait (the GIL released) until the thread ends, at most `limit`; whether it has.
    pub(crate) fn wait(&self, py: Python<'_>, limit: Option<Duration>) -> bool {
        let n = self.notifier.clone();
        crate::exit::detach(py, move || n.wait(limit, |s| s.ended))
    }

    /// Ask the call to stop (it polls the flag).
    pub(crate) fn stop(&self) {
        // Relaxed: a flag polled by the call; the join orders everything else
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Wait for the thread (the GIL released) and take its result; None once taken.
    pub(crate) fn join(&mut self, py: Python<'_>) -> Option<PyResult<R>> {
        let t = self.thread.take()?;
        Some(
            crate::exit::detach(py, move || t.join())
                .map_err(|_| PyRuntimeError::new_err("the call's thread panicked")),
        )
    }
}

impl<R: Send + 'static> Drop for Task<R> {
    fn drop(&mut self) {
        // dropped unstopped: the call ends with its owner, as a command ends on Ctrl-C
        self.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
