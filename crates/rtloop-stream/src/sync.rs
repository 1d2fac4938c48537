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

/// The writer's half of an asymmetric store→load barrier (its `written` store before its
/// `waiters` load, Dekker with a sleeping reader): a compiler barrier only. The sleeper's
/// half is [`heavy_barrier`], which makes the writer's CPU execute a full barrier, so the
/// pair orders as two SeqCst fences would, and the writer's every commit skips the one
/// instruction that waits for its stores to reach other CPUs (see docs/memory-ordering.md).
///
/// Under loom this is a SeqCst fence (the contract the sleeper's `membarrier` gives the
/// writer between the store and the load, whenever the two could race), except on a model
/// thread that runs the asymmetric pair itself ([`ipi`]): there it orders nothing and only
/// serves a pending `membarrier` request, as the CPU would take an interrupt at that point.
#[inline]
pub(crate) fn light_barrier() {
    #[cfg(loom)]
    match ipi::installed() {
        Some(ipi) => ipi.serve(),
        None => fence(Ordering::SeqCst),
    }
    #[cfg(not(loom))]
    std::sync::atomic::compiler_fence(Ordering::SeqCst);
}

/// The loom model of `membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)` as what the kernel makes
/// of it: an interrupt that makes the writer's CPU run a full barrier at whatever point of
/// its instruction stream it is, and returns to the sleeper only once that has happened.
///
/// The sleeper (its [`heavy_barrier`]) asks and waits for the answer; the writer's thread
/// answers at each point where it could take the interrupt: before and after each of its
/// steps, between its `written` store and its `waiters` load ([`light_barrier`], which then
/// orders nothing), and in a loop after its work, as an idle CPU would. An answer is a
/// SeqCst fence (the kernel's `smp_mb` in the interrupt), then the acknowledgement; the
/// request read with Acquire and the acknowledgement read with Acquire order the pair on
/// their own too, as the kernel's own hand-shake does. Nothing else orders the writer's
/// store→load, so the models using it check the pair that ships, not two fences: without
/// the request the wake-up is lost, and a request made before the sleeper's announcement
/// (too early) loses it as well.
#[cfg(loom)]
pub(crate) mod ipi {
    use std::cell::RefCell;
    use std::sync::Arc;

    use super::{fence, spin_hint, AtomicU64, Ordering};

    /// One writer CPU's interrupt line, shared by the model's writer and sleeper threads.
    #[derive(Default)]
    pub(crate) struct Ipi {
        /// `false`: the sleeper's `membarrier` is left out (it asks for nothing), to show
        /// what the models find without it.
        pub(crate) delivered: bool,
        /// Requests made so far.
        asked: AtomicU64,
        /// Requests answered so far (each answer after a full barrier).
        answered: AtomicU64,
    }

    loom::thread_local! {
        static INSTALLED: RefCell<Option<Arc<Ipi>>> = RefCell::new(None);
    }

    impl Ipi {
        /// A line whose requests are delivered (`true`) or never made (`false`).
        pub(crate) fn new(delivered: bool) -> Arc<Ipi> {
            Arc::new(Ipi {
                delivered,
                ..Ipi::default()
            })
        }

        /// This model thread takes part in the asymmetric pair from now on: its light
        /// barrier orders nothing and its heavy barrier asks over `self`.
        pub(crate) fn install(self: &Arc<Self>) {
            INSTALLED.with(|i| *i.borrow_mut() = Some(self.clone()));
        }

        /// The writer's CPU at a point where it can take the interrupt: if a request is
        /// pending, a full barrier, then the answer.
        pub(crate) fn serve(&self) {
            // SYNC: Acquire pairs with the sleeper's AcqRel request: its announcement and
            // SeqCst fence, made before the request, come before our fence (so our later
            // `waiters` load sees the announcement).
            let asked = self.asked.load(Ordering::Acquire);
            // SYNC: Relaxed: only this thread stores `answered`.
            if asked > self.answered.load(Ordering::Relaxed) {
                fence(Ordering::SeqCst);
                // SYNC: Release: our stores before the fence (the `written` store) are
                // visible to the sleeper that reads this answer with Acquire.
                self.answered.store(asked, Ordering::Release);
            }
        }

        /// The sleeper's `membarrier`: ask, and return once the writer's CPU answered.
        fn request(&self) {
            // SYNC: AcqRel: see `serve`.
            let mine = self.asked.fetch_add(1, Ordering::AcqRel) + 1;
            // SYNC: Acquire pairs with the Release answer in `serve`.
            while self.answered.load(Ordering::Acquire) < mine {
                spin_hint();
            }
        }
    }

    /// The line this model thread uses, if it runs the asymmetric pair.
    pub(crate) fn installed() -> Option<Arc<Ipi>> {
        INSTALLED.with(|i| i.borrow().clone())
    }

    /// The heavy barrier of a thread that runs the pair: a delivered request.
    pub(super) fn heavy() {
        if let Some(ipi) = installed() {
            if ipi.delivered {
                ipi.request();
            }
        }
    }
}

/// How long a reader sleeps at most when the kernel refused its `membarrier` while the
/// writer publishes with the light barrier: a wake-up may then be missed, and the reader
/// finds the commit at its next look, this much later at worst.
pub(crate) const UNBARRIERED_SLEEP: Duration = Duration::from_micros(200);

/// The sleeper's half of the asymmetric barrier (see [`light_barrier`]): after it, every
/// writer process registered with `register_membarrier_global` has executed a full barrier
/// on each CPU it was running on. `false` when the kernel refused the call (then nothing
/// orders a light writer's load after its store, and the sleeper must not sleep long).
///
/// Under loom the writer's light barrier is already a fence, so this is nothing, except
/// on a model thread that runs the asymmetric pair ([`ipi`]): there it interrupts the
/// writer's thread and waits until that ran a full barrier.
#[inline]
pub(crate) fn heavy_barrier() -> bool {
    #[cfg(loom)]
    {
        ipi::heavy();
        return true;
    }
    #[cfg(not(loom))]
    {
        #[cfg(test)]
        if tests_knobs::SKIP_HEAVY_BARRIER.get() {
            return true;
        }
        if crate::sys::membarrier() {
            return true;
        }
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            tracing::warn!(
                "the kernel refused membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED): readers waiting for a writer that publishes without a fence sleep at most {} µs at a time",
                UNBARRIERED_SLEEP.as_micros()
            );
        });
        false
    }
}

/// What unit tests switch and count on the calling thread only (tests run side by side).
#[cfg(all(test, not(loom)))]
pub(crate) mod tests_knobs {
    use std::cell::Cell;

    thread_local! {
        /// Leave out the sleeper's membarrier: the protocol broken on purpose, to show
        /// what a stress test counts without it.
        pub(crate) static SKIP_HEAVY_BARRIER: Cell<bool> = const { Cell::new(false) };
        /// A writer that never sees announced sleepers (a lost wake-up on every commit that
        /// races a sleeper): shows that `SLEPT_THROUGH_A_COMMIT` counts them.
        pub(crate) static WRITER_IGNORES_SLEEPERS: Cell<bool> = const { Cell::new(false) };
        /// Sleeps of a waiting reader that ended with the samples it waited for committed
        /// but the futex word unchanged: the writer published them without seeing the
        /// announced sleeper (a lost wake-up; the sleep ended only at its time limit).
        pub(crate) static SLEPT_THROUGH_A_COMMIT: Cell<u64> = const { Cell::new(0) };
        /// Waits of this thread that announced a sleeper and then found the samples at the
        /// re-check before sleeping: the hand-offs whose outcome the Dekker pair decided
        /// (the writer's `waiters` load came before the announcement), the race a stress
        /// test must hit to show anything.
        pub(crate) static FOUND_AFTER_ANNOUNCING: Cell<u64> = const { Cell::new(0) };
        /// A writer that stays on the light barrier after commits that found a sleeper (no
        /// turn to the fence, see `Writer::choose_barrier`), so that every commit of a stress
        /// test races the sleeper with the light barrier.
        pub(crate) static WRITER_STAYS_LIGHT: Cell<bool> = const { Cell::new(false) };
    }
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
