//! The one place the stream core takes its atomics and its futex from.
//!
//! Under `--cfg loom` these are loom's model-checked types, so the exact protocol code of
//! the writer, the readers and the claims is what the loom models explore; otherwise they
//! are `std`'s and the kernel's futex. Nothing else in the crate may name
//! `std::sync::atomic` directly (enforced by `clippy.toml`).
//!
//! The atomics are type *aliases*, not `use` re-exports: clippy's `disallowed-types` resolves
//! a re-export to std's type itself and would flag every use, while an alias is a type of
//! its own that only this file names.

use std::time::Duration;

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, Ordering};
#[cfg(loom)]
pub(crate) type AtomicU32 = loom::sync::atomic::AtomicU32;
#[cfg(loom)]
pub(crate) type AtomicU64 = loom::sync::atomic::AtomicU64;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, Ordering};
#[allow(clippy::disallowed_types)]
#[cfg(not(loom))]
pub(crate) type AtomicU32 = std::sync::atomic::AtomicU32;
#[allow(clippy::disallowed_types)]
#[cfg(not(loom))]
pub(crate) type AtomicU64 = std::sync::atomic::AtomicU64;

/// One step of a spin wait: a CPU pause hint, or a loom yield so models terminate.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}

/// A 32-bit word that threads of any process can sleep on until it changes (`FUTEX_WAIT` /
/// `FUTEX_WAKE` on shared memory). In shared memory it is exactly an `AtomicU32`.
///
/// Under loom it is modelled with the kernel's semantics: `wait` sleeps only while the word
/// still holds the expected value, checked under the lock `wake_all` takes, and timeouts are
/// ignored (a model never relies on one). A lost wake-up therefore leaves the thread asleep
/// forever, which loom reports as a deadlock.
#[cfg(not(loom))]
#[repr(transparent)]
#[derive(Default)]
pub struct FutexWord(AtomicU32);

/// The loom model of the futex word (see the non-loom definition).
#[cfg(loom)]
#[derive(Default)]
pub struct FutexWord {
    word: AtomicU32,
    lock: loom::sync::Mutex<()>,
    cv: loom::sync::Condvar,
}

impl FutexWord {
    fn word(&self) -> &AtomicU32 {
        #[cfg(not(loom))]
        return &self.0;
        #[cfg(loom)]
        return &self.word;
    }

    /// The value.
    #[inline]
    pub fn load(&self, order: Ordering) -> u32 {
        self.word().load(order)
    }

    /// Add to the value (before a wake, so sleepers see a change).
    #[inline]
    pub fn fetch_add(&self, v: u32, order: Ordering) -> u32 {
        self.word().fetch_add(v, order)
    }

    /// Sleep while the word equals `expected`, at most `timeout` (callers re-check: this
    /// returns on a wake, a changed value, a signal or the timeout).
    pub fn wait(&self, expected: u32, timeout: Duration) {
        #[cfg(not(loom))]
        crate::sys::futex_wait(&self.0, expected, timeout);
        #[cfg(loom)]
        {
            let _ = timeout;
            let guard = self.lock.lock().expect("futex model lock");
            // SYNC: SeqCst: the kernel compares the current value under its bucket lock
            // after a full barrier (futex_wait_setup's smp_mb); a Relaxed load here could
            // read a value the kernel never would and report a lost wake-up that is not.
            if self.word.load(Ordering::SeqCst) == expected {
                drop(self.cv.wait(guard).expect("futex model wait"));
            }
        }
    }

    /// Wake every sleeper.
    pub fn wake_all(&self) {
        #[cfg(not(loom))]
        crate::sys::futex_wake_all(&self.0);
        #[cfg(loom)]
        {
            let _guard = self.lock.lock().expect("futex model lock");
            self.cv.notify_all();
        }
    }
}
