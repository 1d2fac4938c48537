//! Blocking without the GIL, interruptibly: wait in slices with the GIL released and let
//! Python handle pending signals (Ctrl-C → `KeyboardInterrupt`) between slices.

use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Longest a blocking call stays in Rust before Python may handle a signal.
pub(crate) const SLICE: Duration = Duration::from_millis(50);

/// A timeout from Python: `None` = forever, else finite seconds `>= 0`.
pub(crate) fn timeout_from_py(timeout: Option<f64>) -> PyResult<Option<Duration>> {
    match timeout {
        None => Ok(None),
        // longer than a Duration holds (about 5.8e11 years) is forever
        Some(t) if t.is_finite() && t >= 0.0 => Ok(Duration::try_from_secs_f64(t).ok()),
        Some(t) if t == f64::INFINITY => Ok(None),
        Some(t) => Err(PyValueError::new_err(format!(
            "Invalid value for the 'timeout' parameter. Allowed values are None (wait forever) or a number of seconds >= 0, but got {t} instead."
        ))),
    }
}

/// What a slice of waiting ended with.
pub(crate) enum Slice<T, E> {
    /// Done: the result to return.
    Done(Result<T, E>),
    /// The slice ran out; wait another one if time is left (`E` is what to report if not).
    Again(E),
}

/// Call `step(slice)` with the GIL released until it is done or `timeout` passed (then the
/// last `Again` error is returned), handling signals between slices.
pub(crate) fn sliced<T, E, F>(
    py: Python<'_>,
    timeout: Option<Duration>,
    mut step: F,
) -> PyResult<Result<T, E>>
where
    T: Send,
    E: Send,
    F: FnMut(Duration) -> Slice<T, E> + Send,
{
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        let slice = match deadline {
            Some(d) => d.saturating_duration_since(Instant::now()).min(SLICE),
            None => SLICE,
        };
        match crate::exit::detach(py, || step(slice)) {
            Slice::Done(r) => return Ok(r),
            Slice::Again(e) => {
                py.check_signals()?;
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(Err(e));
                }
            }
        }
    }
}

/// The longest duration a run option takes, in seconds (as the command line's `--seconds`).
pub(crate) const MAX_SECONDS: f64 = 1e9;

/// A duration option from Python: finite seconds `> 0` and at most [`MAX_SECONDS`], else a
/// `ValueError` naming `what` and the allowed range.
pub(crate) fn seconds_from_py(what: &str, s: f64) -> PyResult<Duration> {
    if s.is_finite() && s > 0.0 && s <= MAX_SECONDS {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(PyValueError::new_err(format!(
            "{what}={s}: a number of seconds > 0 and at most {MAX_SECONDS:e}"
        )))
    }
}
