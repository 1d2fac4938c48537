//! Leaving Python at interpreter exit with threads still inside rtloop calls.
//!
//! Until Python 3.14, a thread other than the one finalizing the interpreter that takes the
//! GIL after finalization began is ended with `pthread_exit`. Its forced unwind runs through
//! the Rust frames of the call it was returning from and aborts the process ("FATAL:
//! exception not rethrown", status 134): a daemon thread blocked in `pull_chunk` is enough.
//! (PyO3 hangs such a thread instead from 0.29; this crate is on 0.27.)
//!
//! So the door is closed before finalization starts. [`close`] runs as an `atexit` handler,
//! registered when the module is imported (atexit handlers run last-registered first, so it
//! comes after every handler registered later, and finalization only after all of them).
//! From then on a thread about to go back into Python from rtloop code parks forever instead
//! (it ends with the process), and a Rust thread about to log drops the record. `close`
//! waits, with the GIL released, for the threads already on their way in to get there, so
//! none is left between "going in" and "holding the GIL" when finalization starts. The
//! thread running `close` (the one that finalizes) is never stopped.
//!
//! Every way back into Python from code that ran without the GIL goes through here:
//! [`detach`] (instead of `Python::detach`), [`attach`] (a callback that needs Python in the
//! middle of such code) and [`ExitSafeLogger`] (log records from any thread).
//!
//! A call holding the GIL can lose it in the middle too, without any of those: numpy lets go
//! of it while it allocates a zeroed array (`PyArray_Zeros` callocs with the GIL released), a
//! garbage collection run by an allocation may run Python code. A thread that was in such a
//! call when finalization began is ended in it when it takes the GIL back. So the calls that
//! make Python objects count themselves in ([`call`]) for as long as they run, as a thread on
//! its way in does: `close` waits for them to leave, and once it ran, a thread about to
//! start such a call parks (with the GIL released) instead.

use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

// Ordering: SeqCst on both: a thread going in adds itself to ENTERING and then reads CLOSED;
// `close` sets CLOSED and then reads ENTERING. With one total order, either the thread sees
// CLOSED (and stays out) or `close` sees it counted (and waits for it): never neither.
static CLOSED: AtomicBool = AtomicBool::new(false);
static ENTERING: AtomicUsize = AtomicUsize::new(0);

/// Longest `close` waits for threads on their way into Python. They only need the GIL,
/// which `close` has released; the bound only keeps a pathological case from hanging exit.
const ENTERING_WAIT: Duration = Duration::from_secs(10);

thread_local! {
    /// This thread ran `close`: it finalizes the interpreter and may always go in.
    static FINALIZER: Cell<bool> = const { Cell::new(false) };
    /// Entries this thread holds (counted in ENTERING), given back if it parks.
    static HELD: Cell<usize> = const { Cell::new(0) };
}

/// A thread's permission to be in (or go into) Python; counted until dropped.
pub(crate) struct Entry {
    counted: bool,
}

impl Drop for Entry {
    fn drop(&mut self) {
        if self.counted {
            HELD.with(|h| h.set(h.get() - 1));
            ENTERING.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Count `n` entries of this thread in, unless the interpreter is exiting (then nothing is
/// counted and the answer is false). The caller records them in `HELD`.
fn count_in(n: usize) -> bool {
    ENTERING.fetch_add(n, Ordering::SeqCst);
    if CLOSED.load(Ordering::SeqCst) {
        ENTERING.fetch_sub(n, Ordering::SeqCst);
        return false;
    }
    true
}

/// Permission to go into Python; `None` once the interpreter is exiting.
pub(crate) fn enter() -> Option<Entry> {
    if FINALIZER.with(Cell::get) {
        return Some(Entry { counted: false });
    }
    if !count_in(1) {
        return None;
    }
    HELD.with(|h| h.set(h.get() + 1));
    Some(Entry { counted: true })
}

/// An rtloop call that holds the GIL and makes Python objects, counted until dropped (see
/// the module's documentation). Once the interpreter is exiting, a thread other than the one
/// finalizing does not start the call: it lets go of the GIL and parks until the process ends.
pub(crate) fn call(py: Python<'_>) -> Entry {
    match enter() {
        Some(e) => e,
        // the GIL is held here: let it go, or the finalizing thread could never take it
        None => py.detach(|| -> Entry { park_forever() }),
    }
}

/// Whether the interpreter is exiting (`close` ran).
pub(crate) fn exiting() -> bool {
    CLOSED.load(Ordering::SeqCst)
}

/// Permission to go into Python, or, once the interpreter is exiting, never return: the
/// thread sleeps until the process ends. Only for threads that Python started (whose caller
/// is Python code that would be ended at its next step anyway).
pub(crate) fn enter_or_park() -> Entry {
    match enter() {
        Some(e) => e,
        None => park_forever(),
    }
}

fn park_forever() -> ! {
    // entries of outer calls on this thread (a callback that called back into rtloop) must
    // not keep `close` waiting for a thread that never comes back
    let held = HELD.with(|h| h.replace(0));
    ENTERING.fetch_sub(held, Ordering::SeqCst);
    loop {
        std::thread::park();
    }
}

/// `py.detach(f)`, except that once the interpreter is exiting the thread does not come back
/// into Python: it parks forever when `f` returns. A panic in `f` goes on once back in.
///
/// The [`call`]s this thread is inside are not counted while `f` runs (the thread is out of
/// Python then: `close` must not wait for a call blocked here), and counted again on the way
/// back in.
pub(crate) fn detach<T, F>(py: Python<'_>, f: F) -> T
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    if FINALIZER.with(Cell::get) {
        return py.detach(f);
    }
    let held = HELD.with(|h| h.replace(0));
    ENTERING.fetch_sub(held, Ordering::SeqCst);
    let result = py.detach(|| {
        let r = catch_unwind(AssertUnwindSafe(f));
        // the calls this thread is inside, and one for the way in
        if !count_in(held + 1) {
            park_forever();
        }
        r
    });
    // the GIL is held again: the way in is over, the calls go on counted
    HELD.with(|h| h.set(held));
    ENTERING.fetch_sub(1, Ordering::SeqCst);
    result.unwrap_or_else(|p| resume_unwind(p))
}

/// `Python::attach(f)` for code running without the GIL on a thread Python started (a
/// callback in the middle of a detached call); once the interpreter is exiting the thread
/// parks forever instead.
pub(crate) fn attach<R>(f: impl FnOnce(Python<'_>) -> R) -> R {
    let _entry = enter_or_park();
    Python::attach(f)
}

/// The `atexit` handler: close the door, then wait (the GIL released) for the threads on
/// their way in.
#[pyfunction]
pub(crate) fn _close_for_exit(py: Python<'_>) {
    FINALIZER.with(|f| f.set(true));
    CLOSED.store(true, Ordering::SeqCst);
    py.detach(|| {
        let start = Instant::now();
        while ENTERING.load(Ordering::SeqCst) != 0 && start.elapsed() < ENTERING_WAIT {
            std::thread::sleep(Duration::from_micros(200));
        }
    });
}

/// Look up, now, what the numpy crate otherwise looks up the first time a thread needs it
/// (numpy's C API, its module's name, the borrow checker's shared state, the type that owns
/// a Vec handed to numpy). The first lookup imports Python modules and makes other threads
/// wait with the GIL released, inside the call that needed it: a script that starts its
/// threads and exits at once could be finalized in the middle of it (a thread that takes the
/// GIL back then is ended there). The Python package calls this when it loads.
#[pyfunction]
pub(crate) fn _prepare_numpy(py: Python<'_>) -> PyResult<()> {
    use numpy::{PyArray1, PyArrayMethods, PyUntypedArray};
    let a = PyArray1::<f64>::from_vec(py, vec![0.0]);
    a.as_any().cast::<PyUntypedArray>()?;
    drop(a.try_readonly()?);
    Ok(())
}

/// Register [`_close_for_exit`] with `atexit` (at import).
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let f = wrap_pyfunction!(_close_for_exit, m)?;
    m.py().import("atexit")?.call_method1("register", (f,))?;
    Ok(())
}

/// The Rust crates' log records into Python's `logging` (pyo3-log), from any thread, until
/// the interpreter exits; records after that are dropped (a connection thread that logs
/// during finalization would otherwise panic or hang).
pub(crate) struct ExitSafeLogger(pub(crate) pyo3_log::Logger);

impl log::Log for ExitSafeLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        !exiting() && self.0.enabled(metadata)
    }

    fn log(&self, record: &log::Record<'_>) {
        if exiting() {
            // even the finalizing thread: the interpreter may be too far gone for logging
            return;
        }
        if let Some(_entry) = enter() {
            self.0.log(record);
        }
    }

    fn flush(&self) {
        if exiting() {
            return;
        }
        if let Some(_entry) = enter() {
            self.0.flush();
        }
    }
}
