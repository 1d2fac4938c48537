//! A doorbell: a futex word plus a count of announced sleepers, for waiting on any condition
//! that another thread or process makes true with an ordinary Release store. The publisher
//! rings (bumps the word and issues FUTEX_WAKE only if someone announced itself); a waiter
//! spins briefly, then announces, re-checks and sleeps (Dekker through SeqCst operations:
//! either the publisher sees the announcement or the waiter sees the new value). The stream
//! rings use the same handshake; the tick runtime's board is built from doorbells. Modelled
//! under loom (`loom_tests.rs`: a ring is never lost).

use std::time::{Duration, Instant};

use crate::sync::{fence, spin_hint, AtomicU32, FutexWord, Ordering};

/// A futex word (`seq`, offset 0) and its sleeper count (`waiters`, offset 4): 8 bytes,
/// so it can live in shared memory laid out by hand.
#[repr(C)]
#[derive(Default)]
pub struct Doorbell {
    seq: FutexWord,
    waiters: AtomicU32,
}

/// How long a sleeper sleeps before it re-checks anyway (a safety net, never needed for
/// correctness: the models run without it).
const RECHECK: Duration = Duration::from_millis(20);

impl Doorbell {
    /// Publisher, after the Release store that makes a waiter's condition true: wake the
    /// announced sleepers (no system call when there are none).
    pub fn ring(&self) {
        // SYNC: SeqCst RMW after the store being announced: a waiter that read the old seq
        // sees the futex value change, one that reads the new seq also sees the store.
        self.seq.fetch_add(1, Ordering::SeqCst);
        // SYNC: orders the bump before the `waiters` load (Dekker with the waiter's SeqCst
        // announce-then-check): either we see its announcement, or it sees the new value.
        fence(Ordering::SeqCst);
        // SYNC: Relaxed: the fence above carries the ordering.
        if self.waiters.load(Ordering::Relaxed) > 0 {
            self.seq.wake_all();
        }
    }

    /// Wake every sleeper unconditionally (stop, failure: rare paths).
    pub fn ring_all(&self) {
        // SYNC: SeqCst as in `ring`.
        self.seq.fetch_add(1, Ordering::SeqCst);
        self.seq.wake_all();
    }

    /// Wait until `cond()` holds: spin for `spin`, then sleep (re-checking at least every
    /// 20 ms). Returns false if `deadline` passed first (with `cond()` still false).
    pub fn wait(
        &self,
        spin: Duration,
        deadline: Option<Instant>,
        mut cond: impl FnMut() -> bool,
    ) -> bool {
        if cond() {
            return true;
        }
        if !spin.is_zero() {
            let spin_until = Instant::now() + spin;
            while Instant::now() < spin_until {
                if cond() {
                    return true;
                }
                spin_hint();
            }
        }
        loop {
            // SYNC: SeqCst announce, SeqCst fence, then read of seq and re-check (Dekker with
            // `ring`'s bump + fence + waiters load). The fence makes the handshake fence to
            // fence, as in the stream rings; the SeqCst operations alone are enough in C++20
            // terms but not in loom's model of them, which then reports a lost wake-up.
            self.waiters.fetch_add(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            let s = self.seq.load(Ordering::SeqCst);
            if cond() {
                // SYNC: Relaxed: a stale count only costs the publisher a spurious wake.
                self.waiters.fetch_sub(1, Ordering::Relaxed);
                return true;
            }
            let mut timeout = RECHECK;
            if let Some(d) = deadline {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    self.waiters.fetch_sub(1, Ordering::Relaxed);
                    return cond();
                }
                timeout = timeout.min(left);
            }
            self.seq.wait(s, timeout);
            self.waiters.fetch_sub(1, Ordering::Relaxed);
            if cond() {
                return true;
            }
        }
    }
}

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Doorbell>() == 8);
