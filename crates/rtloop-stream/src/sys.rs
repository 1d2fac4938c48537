//! The stream's view of the operating system: everything `rtloop-sys` offers, plus the
//! identity a claim stores (a process's pid and start time in one word), the fork generation
//! that keeps handles with the process that made them, and their loom models.

pub(crate) use rtloop_sys::*;

/// A process named by its pid *and* start time in one 64-bit word, so that taking the
/// writer or a reader slot is one compare-and-swap that no other process can ever observe
/// half done (a pid stored first and a start time after it could be judged "dead" by a
/// racing claimer in between, and both would win).
///
/// Word layout: bit 63 set (a held word is never 0 or a small constant), bits 61–62 free
/// for a tag (see `ring::slot_state`), bits 22–60 the start time (clock ticks since boot,
/// 39 bits: 170 years at 100 Hz), bits 0–21 the pid (Linux's pid limit is 2^22).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessId(u64);

const PID_BITS: u32 = 22;
/// Set in every word that names a process.
pub const HELD_BIT: u64 = 1 << 63;
/// The two tag bits (61–62) of a word that names a process.
pub const TAG_SHIFT: u32 = 61;

impl std::fmt::Debug for ProcessId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProcessId(pid {}, start {})", self.pid(), self.start())
    }
}

impl ProcessId {
    /// The process `pid` that started at `start` (clock ticks since boot; 0 = unknown).
    #[must_use]
    pub fn new(pid: u32, start: u64) -> ProcessId {
        ProcessId(
            HELD_BIT | (start & START_MASK) << PID_BITS | u64::from(pid) & ((1 << PID_BITS) - 1),
        )
    }

    /// This process (cached; recomputed in a forked child).
    #[must_use]
    pub fn current() -> ProcessId {
        fork::current()
    }

    /// The process a word names (`None` for a word with bit 63 clear: free, closed, never).
    /// The tag bits are ignored.
    #[must_use]
    pub fn from_word(word: u64) -> Option<ProcessId> {
        (word & HELD_BIT != 0).then_some(ProcessId(word & !(3 << TAG_SHIFT)))
    }

    /// The word (no tag).
    #[must_use]
    pub fn word(self) -> u64 {
        self.0
    }

    /// The pid.
    #[must_use]
    pub fn pid(self) -> u32 {
        (self.0 & ((1 << PID_BITS) - 1)) as u32
    }

    /// The start time (clock ticks since boot, low 39 bits; 0 = unknown).
    #[must_use]
    pub fn start(self) -> u64 {
        self.0 >> PID_BITS & START_MASK
    }

    /// Whether this process still runs (a zombie is dead; a reused pid is another process).
    #[must_use]
    pub fn alive(self) -> bool {
        #[cfg(loom)]
        return model::alive(self);
        // miri cannot signal processes; its tests run one live process
        #[cfg(all(miri, not(loom)))]
        return true;
        #[cfg(not(any(loom, miri)))]
        process_alive(self.pid(), self.start())
    }
}

/// Whether this process's writers and lossless readers may publish with the light barrier:
/// it is registered for `membarrier` (see `rtloop_sys::membarrier_ready`; the first call
/// starts the registration, which takes about 10 ms, and says `false` until it is done).
/// `false` when refused, or when `RTLOOP_PUBLISH_FENCE=1` asks for a fence per publication
/// (for a peer process whose sandbox refuses `membarrier`, or to compare). Miri cannot make
/// the system call: there everything fences.
#[must_use]
pub fn membarrier_registered() -> bool {
    #[cfg(miri)]
    return false;
    // the models see one answer (a registration finishing in the middle of one would make
    // its runs differ); the light barrier is a fence there anyway
    #[cfg(all(loom, not(miri)))]
    return true;
    #[cfg(not(any(miri, loom)))]
    {
        static FENCE_ASKED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        if *FENCE_ASKED
            .get_or_init(|| std::env::var_os("RTLOOP_PUBLISH_FENCE").is_some_and(|v| v == "1"))
        {
            return false;
        }
        membarrier_ready()
    }
}

/// The sleeper's `membarrier` (see `rtloop_sys::membarrier_global`); `false` if refused.
#[must_use]
pub fn membarrier() -> bool {
    #[cfg(miri)]
    return false;
    #[cfg(not(miri))]
    membarrier_global().is_ok()
}

/// How many times this process's ancestry forked since rtloop first looked (0 in the
/// process that made the handles). A handle records the value it was made under; a
/// different value means it is a forked child's copy, which must neither use nor release
/// what belongs to the parent.
#[inline]
#[must_use]
pub fn fork_generation() -> u64 {
    fork::generation()
}

#[cfg(not(loom))]
mod fork {
    // std atomics: process-wide bookkeeping of this module, not part of any modelled protocol
    #![allow(clippy::disallowed_types)]
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::ProcessId;

    static GENERATION: AtomicU64 = AtomicU64::new(0);
    /// This process's id word, 0 until first asked (and again in a forked child).
    static CURRENT: AtomicU64 = AtomicU64::new(0);
    static REGISTER: std::sync::Once = std::sync::Once::new();

    extern "C" fn in_child() {
        // SYNC: Relaxed: the child runs one thread here (right after fork), nothing to order.
        GENERATION.fetch_add(1, Ordering::Relaxed);
        CURRENT.store(0, Ordering::Relaxed);
    }

    fn register() {
        // miri cannot run pthread_atfork; its tests do not fork
        #[cfg(miri)]
        return;
        #[cfg(not(miri))]
        REGISTER.call_once(|| {
            // SAFETY: `in_child` is async-signal-safe (two atomic stores) as POSIX requires
            // of an atfork child handler; registering it has no other precondition.
            let rc = unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
            assert_eq!(rc, 0, "pthread_atfork failed");
        });
    }

    #[inline]
    pub(super) fn generation() -> u64 {
        register();
        // SYNC: Relaxed: only this process's own fork handler stores it.
        GENERATION.load(Ordering::Relaxed)
    }

    pub(super) fn current() -> ProcessId {
        register();
        // SYNC: Relaxed: a cache of a value every thread computes the same.
        let w = CURRENT.load(Ordering::Relaxed);
        if let Some(id) = ProcessId::from_word(w) {
            return id;
        }
        let pid = super::pid();
        let id = ProcessId::new(pid, super::process_start_time(pid));
        CURRENT.store(id.word(), Ordering::Relaxed);
        id
    }
}

/// Processes in the loom models: each model thread plays a process ([`model::enter`]);
/// a process is dead when the model says so ([`ProcessId::model`] with `alive = false`).
#[cfg(loom)]
pub mod model {
    use super::ProcessId;

    /// Start time given to dead model processes (live ones have 1).
    const DEAD_START: u64 = 2;

    loom::thread_local! {
        static ME: std::cell::Cell<u64> = std::cell::Cell::new(0);
    }

    impl ProcessId {
        /// Model process `pid`, alive or dead.
        #[must_use]
        pub fn model(pid: u32, alive: bool) -> ProcessId {
            ProcessId::new(pid, if alive { 1 } else { DEAD_START })
        }
    }

    /// The current model thread plays process `id` from now on.
    pub fn enter(id: ProcessId) {
        ME.with(|m| m.set(id.word()));
    }

    pub(super) fn alive(id: ProcessId) -> bool {
        id.start() != DEAD_START
    }

    pub(super) fn current() -> ProcessId {
        ME.with(|m| ProcessId::from_word(m.get()))
            .expect("a loom model thread must call sys::model::enter first")
    }
}

#[cfg(loom)]
mod fork {
    #[inline]
    pub(super) fn generation() -> u64 {
        0 // the models do not fork
    }

    pub(super) fn current() -> super::ProcessId {
        super::model::current()
    }
}

#[cfg(all(test, not(loom)))]
mod identity_tests {
    use super::*;

    #[test]
    fn a_process_word_keeps_pid_and_start_and_is_never_a_small_constant() {
        for (pid, start) in [
            (1u32, 0u64),
            (4_194_303, (1 << 39) - 1),
            (12345, 987_654_321),
        ] {
            let id = ProcessId::new(pid, start);
            assert_eq!((id.pid(), id.start()), (pid, start));
            assert!(id.word() >= HELD_BIT, "never 0, 1 or a free-slot value");
            // a state tag in bits 61-62 does not change who the word names
            let tagged = crate::ring::slot_state::word(id.word(), 3);
            assert_eq!(ProcessId::from_word(tagged), Some(id));
            assert_eq!(crate::ring::slot_state::tag(tagged), 3);
        }
        assert_eq!(ProcessId::from_word(0), None);
        assert_eq!(ProcessId::from_word(1), None);
    }

    #[test]
    fn this_process_is_current_and_alive() {
        let me = ProcessId::current();
        assert_eq!(me.pid(), pid());
        assert!(me.alive());
        assert_eq!(fork_generation(), fork_generation());
    }
}
