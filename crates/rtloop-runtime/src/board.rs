//! The board: one small shared-memory object per running model that carries the tick
//! (the timer's "go"), each process's progress ("done with tick k"), per-signal tick ends,
//! the stop request and live timing counters. Signals' data travel in their streams; the
//! board only says *when* data is there, so a process waits exactly for its own inputs.
//!
//! Waiting is the stream core's protocol in miniature: spin briefly, then announce, re-check
//! and sleep on a futex word; a publisher issues FUTEX_WAKE only when a waiter announced
//! itself (Dekker handshake through SeqCst operations), so the fast path has no syscall.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rtloop_stream::Doorbell;
use rtloop_sys as sys;

const MAGIC: u64 = 0x7274_6c6f_6f70_4244; // "rtloopBD"
const VERSION: u64 = 1;
const LINE: usize = 128;
/// Tick records kept per ring (tick times, signal ends): how far behind the timer a process
/// may fall before it can no longer find its tick's data.
pub const TICK_RING: u64 = 4096;
/// Most processes in one model.
pub const MAX_PROCS: usize = 64;
/// Most signals in one model.
pub const MAX_SIGNALS: usize = 256;

/// Value of `stop_at` while the model runs.
pub const RUNNING: u64 = u64::MAX;

/// A process's life, as published in its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum ProcState {
    /// Spawned, opening its streams.
    Starting = 0,
    /// Ready for tick 0.
    Ready = 1,
    /// Ended cleanly.
    Exited = 2,
    /// Ended with an error (its stderr says why).
    Failed = 3,
}

impl ProcState {
    fn from_u64(v: u64) -> ProcState {
        match v {
            1 => ProcState::Ready,
            2 => ProcState::Exited,
            3 => ProcState::Failed,
            _ => ProcState::Starting,
        }
    }
}

// Layout (offsets in bytes; every field an atomic on a line the writer side owns):
//   line 0: header  [magic, version, n_procs, n_signals, tick_ns, model_hash, flags]
//   line 1: tick    [started]            (timer writes)
//   line 2: tick futex [seq: u32, waiters: u32]
//   line 3: control [stop_at, stop_reason]
//   lines 4..4+2*MAX_PROCS: per process, two lines:
//       [done, state, pid, exec_last, exec_max, exec_sum, exec_count, misses]
//       [seq: u32, waiters: u32, overruns, ...]
//   tick times: TICK_RING x [deadline_ns, start_ns]
//   signal ends: MAX_SIGNALS x TICK_RING x u64
const L_HEADER: usize = 0;
const L_TICK: usize = LINE;
const L_TICK_FUTEX: usize = 2 * LINE;
const L_CONTROL: usize = 3 * LINE;
const L_PROCS: usize = 4 * LINE;
const PROC_BYTES: usize = 2 * LINE;
const L_TIMES: usize = L_PROCS + MAX_PROCS * PROC_BYTES;
const L_ENDS: usize = L_TIMES + TICK_RING as usize * 16;

/// Flag bits in the header: what the supervisor found permitted.
pub const FLAG_FIFO: u64 = 1;
/// mlockall is permitted.
pub const FLAG_MLOCK: u64 = 2;
/// CPU pinning is permitted.
pub const FLAG_PIN: u64 = 4;

fn board_bytes(n_signals: usize) -> usize {
    L_ENDS + n_signals * TICK_RING as usize * 8
}

/// The shared board of one running model.
pub struct Board {
    /// The board's file in shared memory (Send and Sync: it is only accessed through
    /// atomics); the supervisor's copy removes it.
    file: sys::SharedFile,
}

/// Why a board could not be created or opened.
#[derive(Debug, thiserror::Error)]
pub enum BoardError {
    /// File system / mapping error.
    #[error("board {path}: {source}")]
    Io {
        /// The board's file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// Not a board, or another version.
    #[error("{0} is not an rtloop model board of this version")]
    NotABoard(PathBuf),
    /// The model is already running.
    #[error("model {model:?} is already running (board {path} exists; if no `rtloop run` of it is alive, remove that file)")]
    Running {
        /// Model name.
        model: String,
        /// The board's file.
        path: PathBuf,
    },
}

impl Board {
    /// The board file of model `model`.
    #[must_use]
    pub fn path_of(model: &str) -> PathBuf {
        sys::shm_dir().join(format!(".rtloop-board-{model}"))
    }

    /// Create the board of `model` (removed again when this value drops).
    pub fn create(
        model: &str,
        n_procs: usize,
        n_signals: usize,
        tick_ns: u64,
        model_hash: u64,
        flags: u64,
    ) -> Result<Board, BoardError> {
        assert!(n_procs <= MAX_PROCS && n_signals <= MAX_SIGNALS);
        let path = Self::path_of(model);
        let io = |source| BoardError::Io {
            path: path.clone(),
            source,
        };
        if path.exists() {
            // a board left by a run that was SIGKILLed: its owner pid is in the file name's
            // companion field; we cannot tell cheaply, so say how to clear it
            if let Ok(old) = Board::open(model) {
                let pid = old.word(L_HEADER + 7 * 8).load(Ordering::Relaxed) as u32;
                let start = old.word(L_HEADER + 8 * 8).load(Ordering::Relaxed);
                if pid != 0 && sys::process_alive(pid, start) {
                    return Err(BoardError::Running {
                        model: model.to_string(),
                        path,
                    });
                }
            }
            let _ = std::fs::remove_file(&path);
        }
        let len = board_bytes(n_signals);
        let b = Board {
            file: sys::SharedFile::create(&path, len, false).map_err(io)?,
        };
        let me = sys::pid();
        // Relaxed: nobody has opened the board yet; the magic is stored last with Release.
        b.word(L_HEADER + 8).store(VERSION, Ordering::Relaxed);
        b.word(L_HEADER + 16)
            .store(n_procs as u64, Ordering::Relaxed);
        b.word(L_HEADER + 24)
            .store(n_signals as u64, Ordering::Relaxed);
        b.word(L_HEADER + 32).store(tick_ns, Ordering::Relaxed);
        b.word(L_HEADER + 40).store(model_hash, Ordering::Relaxed);
        b.word(L_HEADER + 48).store(flags, Ordering::Relaxed);
        b.word(L_HEADER + 56)
            .store(u64::from(me), Ordering::Relaxed);
        b.word(L_HEADER + 64)
            .store(sys::process_start_time(me), Ordering::Relaxed);
        b.word(L_CONTROL).store(RUNNING, Ordering::Relaxed);
        // SYNC: Release publishes the header fields above to an opener's Acquire of magic.
        b.word(L_HEADER).store(MAGIC, Ordering::Release);
        Ok(b)
    }

    /// Open the board of a running model.
    pub fn open(model: &str) -> Result<Board, BoardError> {
        let path = Self::path_of(model);
        let io = |source| BoardError::Io {
            path: path.clone(),
            source,
        };
        let file = match sys::SharedFile::open(&path, L_ENDS, false) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                return Err(BoardError::NotABoard(path))
            }
            Err(e) => return Err(io(e)),
        };
        let len = file.len();
        let b = Board { file };
        // SYNC: Acquire pairs with the creator's Release store of the magic.
        if b.word(L_HEADER).load(Ordering::Acquire) != MAGIC
            || b.word(L_HEADER + 8).load(Ordering::Relaxed) != VERSION
            || board_bytes(b.n_signals()) > len
        {
            return Err(BoardError::NotABoard(path));
        }
        Ok(b)
    }

    fn word(&self, off: usize) -> &AtomicU64 {
        assert!(off + 8 <= self.file.len() && off % 8 == 0);
        // SAFETY: in bounds (checked), 8-aligned (page-aligned base), zero-initialised file
        // memory (a valid AtomicU64) that is only ever accessed atomically.
        unsafe { &*self.file.base().as_ptr().add(off).cast::<AtomicU64>() }
    }

    fn doorbell(&self, off: usize) -> &Doorbell {
        assert!(off + 8 <= self.file.len() && off % 8 == 0);
        // SAFETY: in bounds (checked), 8-aligned, zero-initialised file memory: a Doorbell is
        // two u32 atomics (repr(C), 8 bytes) whose zero is their initial value, and these 8
        // bytes are only ever accessed through it.
        unsafe { &*self.file.base().as_ptr().add(off).cast::<Doorbell>() }
    }

    /// Processes in the model.
    #[must_use]
    pub fn n_procs(&self) -> usize {
        self.word(L_HEADER + 16).load(Ordering::Relaxed) as usize
    }
    /// Signals in the model.
    #[must_use]
    pub fn n_signals(&self) -> usize {
        self.word(L_HEADER + 24).load(Ordering::Relaxed) as usize
    }
    /// Tick period.
    #[must_use]
    pub fn tick_ns(&self) -> u64 {
        self.word(L_HEADER + 32).load(Ordering::Relaxed)
    }
    /// Hash of the model file the board was made for (a child checks it read the same file).
    #[must_use]
    pub fn model_hash(&self) -> u64 {
        self.word(L_HEADER + 40).load(Ordering::Relaxed)
    }
    /// What the supervisor found permitted (`FLAG_*`).
    #[must_use]
    pub fn flags(&self) -> u64 {
        self.word(L_HEADER + 48).load(Ordering::Relaxed)
    }

    // ---- the tick -------------------------------------------------------------------

    /// Ticks started so far (tick k has started when this is > k).
    #[must_use]
    pub fn started(&self) -> u64 {
        // SYNC: Acquire pairs with `start_tick`'s Release: the tick's times are visible.
        self.word(L_TICK).load(Ordering::Acquire)
    }

    /// Timer: start tick `k` (= `started()`), deadline and actual start in CLOCK_MONOTONIC ns.
    pub fn start_tick(&self, k: u64, deadline_ns: u64, start_ns: u64) {
        let slot = L_TIMES + (k % TICK_RING) as usize * 16;
        // Relaxed: published by the Release store of `started` below.
        self.word(slot).store(deadline_ns, Ordering::Relaxed);
        self.word(slot + 8).store(start_ns, Ordering::Relaxed);
        // SYNC: Release publishes the times (and everything the timer did) to a process's
        // Acquire of `started`.
        self.word(L_TICK).store(k + 1, Ordering::Release);
        self.notify(L_TICK_FUTEX);
    }

    /// Deadline and actual start of tick `k` (valid once `started() > k`, for the last
    /// `TICK_RING` ticks).
    #[must_use]
    pub fn tick_times(&self, k: u64) -> (u64, u64) {
        let slot = L_TIMES + (k % TICK_RING) as usize * 16;
        // Relaxed: ordered by the caller's Acquire of `started`.
        (
            self.word(slot).load(Ordering::Relaxed),
            self.word(slot + 8).load(Ordering::Relaxed),
        )
    }

    // ---- stop -----------------------------------------------------------------------

    /// Ask every process to stop before tick `at` (ticks below `at` are completed). The
    /// earliest request wins. `reason` is a small code the supervisor reports.
    pub fn request_stop(&self, at: u64, reason: u64) {
        let w = self.word(L_CONTROL);
        // SYNC: AcqRel RMW; processes read it with Acquire, and a waiter re-checks it after
        // announcing itself, so the wakes below cannot be missed.
        let prev = w.fetch_min(at, Ordering::AcqRel);
        if at < prev {
            self.word(L_CONTROL + 8).store(reason, Ordering::Release);
        }
        self.wake_all();
    }

    /// The tick the model stops before ([`RUNNING`] while it runs).
    #[must_use]
    pub fn stop_at(&self) -> u64 {
        // SYNC: Acquire pairs with `request_stop`'s RMW.
        self.word(L_CONTROL).load(Ordering::Acquire)
    }

    /// The reason code given with the first stop request.
    #[must_use]
    pub fn stop_reason(&self) -> u64 {
        self.word(L_CONTROL + 8).load(Ordering::Acquire)
    }

    /// Wake every sleeper on the board (stop, failure).
    pub fn wake_all(&self) {
        self.bump_and_wake(L_TICK_FUTEX);
        for p in 0..self.n_procs() {
            self.bump_and_wake(L_PROCS + p * PROC_BYTES + LINE);
        }
    }

    fn bump_and_wake(&self, futex_line: usize) {
        self.doorbell(futex_line).ring_all();
    }

    // ---- processes ------------------------------------------------------------------

    fn proc(&self, p: usize, field: usize) -> &AtomicU64 {
        assert!(p < self.n_procs(), "process {p} of {}", self.n_procs());
        self.word(L_PROCS + p * PROC_BYTES + field * 8)
    }

    /// Ticks process `p` has completed.
    #[must_use]
    pub fn done(&self, p: usize) -> u64 {
        // SYNC: Acquire pairs with `finish_tick`'s Release: the process's writes to its
        // output streams for those ticks (and their tick ends) are visible.
        self.proc(p, 0).load(Ordering::Acquire)
    }

    /// Process `p` completed tick `k`.
    pub fn finish_tick(&self, p: usize, k: u64) {
        // SYNC: Release publishes this tick's output data and tick ends to consumers'
        // Acquire of `done`.
        self.proc(p, 0).store(k + 1, Ordering::Release);
        self.notify(L_PROCS + p * PROC_BYTES + LINE);
    }

    /// Publish process `p`'s state.
    pub fn set_state(&self, p: usize, s: ProcState) {
        // SYNC: Release: a Failed/Exited state is seen after the process's last writes.
        self.proc(p, 1).store(s as u64, Ordering::Release);
        if matches!(s, ProcState::Exited | ProcState::Failed) {
            self.wake_all();
        }
    }

    /// Process `p`'s state.
    #[must_use]
    pub fn state(&self, p: usize) -> ProcState {
        ProcState::from_u64(self.proc(p, 1).load(Ordering::Acquire))
    }

    /// Record process `p`'s pid.
    pub fn set_pid(&self, p: usize, pid: u32) {
        self.proc(p, 2).store(u64::from(pid), Ordering::Relaxed);
    }

    /// Process `p`'s pid (0 before it registered).
    #[must_use]
    pub fn pid(&self, p: usize) -> u32 {
        self.proc(p, 2).load(Ordering::Relaxed) as u32
    }

    /// Live counters: process `p` spent `ns` on a tick.
    pub fn record_exec(&self, p: usize, ns: u64) {
        // Relaxed: statistics only, read approximately by the supervisor's live lines.
        self.proc(p, 3).store(ns, Ordering::Relaxed);
        self.proc(p, 4).fetch_max(ns, Ordering::Relaxed);
        self.proc(p, 5).fetch_add(ns, Ordering::Relaxed);
        self.proc(p, 6).fetch_add(1, Ordering::Relaxed);
    }

    /// Process `p`'s execution time of its last finished tick, ns.
    #[must_use]
    pub fn exec_last(&self, p: usize) -> u64 {
        self.proc(p, 3).load(Ordering::Relaxed)
    }

    /// Live counters of process `p` since the last call: (max ns, sum ns, count).
    pub fn take_exec(&self, p: usize) -> (u64, u64, u64) {
        (
            self.proc(p, 4).swap(0, Ordering::Relaxed),
            self.proc(p, 5).swap(0, Ordering::Relaxed),
            self.proc(p, 6).swap(0, Ordering::Relaxed),
        )
    }

    /// Timer: process `p` missed a deadline.
    pub fn add_miss(&self, p: usize) -> u64 {
        self.proc(p, 7).fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Deadline misses of process `p`.
    #[must_use]
    pub fn misses(&self, p: usize) -> u64 {
        self.proc(p, 7).load(Ordering::Relaxed)
    }

    // ---- signal tick ends -----------------------------------------------------------

    /// The writer of signal `s` ends tick `k` at stream sample `end` (before `finish_tick`).
    pub fn set_tick_end(&self, s: usize, k: u64, end: u64) {
        // Relaxed: published by the writer's Release in `finish_tick`.
        self.end_word(s, k).store(end, Ordering::Relaxed);
    }

    /// Where signal `s`'s tick `k` ends in its stream (valid after its writer's `done` > k,
    /// for the last `TICK_RING` ticks).
    #[must_use]
    pub fn tick_end(&self, s: usize, k: u64) -> u64 {
        // Relaxed: ordered by the caller's Acquire of the writer's `done`.
        self.end_word(s, k).load(Ordering::Relaxed)
    }

    fn end_word(&self, s: usize, k: u64) -> &AtomicU64 {
        assert!(s < self.n_signals(), "signal {s} of {}", self.n_signals());
        self.word(L_ENDS + (s * TICK_RING as usize + (k % TICK_RING) as usize) * 8)
    }

    // ---- waiting --------------------------------------------------------------------

    /// Wake the sleepers of `futex_line` after the Release store they wait for (the stream
    /// core's doorbell, modelled under loom there).
    fn notify(&self, futex_line: usize) {
        self.doorbell(futex_line).ring();
    }

    /// Wait until `cond()` holds (see [`Doorbell::wait`]). False if `deadline` passed first.
    fn wait_on(
        &self,
        futex_line: usize,
        spin: Duration,
        deadline: Option<Instant>,
        cond: impl FnMut() -> bool,
    ) -> bool {
        self.doorbell(futex_line).wait(spin, deadline, cond)
    }

    /// Wait for tick `k` to start, or the stop before it. True if it started.
    pub fn wait_tick(&self, k: u64, spin: Duration) -> bool {
        self.wait_on(L_TICK_FUTEX, spin, None, || {
            self.started() > k || self.stop_at() <= k
        });
        self.started() > k && self.stop_at() > k
    }

    /// Wait for process `p` to complete tick `k`, or the stop before it, or `p`'s end.
    /// True if it completed the tick.
    pub fn wait_done(&self, p: usize, k: u64, spin: Duration) -> bool {
        let line = L_PROCS + p * PROC_BYTES + LINE;
        self.wait_on(line, spin, None, || {
            self.done(p) > k
                || self.stop_at() <= k
                || matches!(self.state(p), ProcState::Exited | ProcState::Failed)
        });
        self.done(p) > k
    }

    /// Wait until `cond()` holds or `timeout` passes, sleeping on the tick futex (woken by
    /// every tick, stop and process end). For the supervisor.
    pub fn wait_until(&self, timeout: Duration, cond: impl FnMut() -> bool) -> bool {
        self.wait_on(
            L_TICK_FUTEX,
            Duration::ZERO,
            Some(Instant::now() + timeout),
            cond,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(tag: &str) -> String {
        format!("boardtest-{tag}-{}", std::process::id())
    }

    /// Run `f` in a thread and return once that thread sleeps on a futex (inside `f`'s wait),
    /// so what the test does next comes after the wait began, however loaded the machine.
    fn spawn_asleep<T: Send + 'static>(
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions; it returns this thread's id.
            tx.send(unsafe { libc::gettid() }).unwrap();
            f()
        });
        let wchan = format!("/proc/self/task/{}/wchan", rx.recv().unwrap());
        let t0 = std::time::Instant::now();
        while !std::fs::read_to_string(&wchan).is_ok_and(|w| w.contains("futex")) {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "the waiter never slept"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        t
    }

    #[test]
    fn tick_done_and_ends_cross_mappings() {
        let n = name("a");
        let a = Board::create(&n, 2, 1, 1_000_000, 7, 0).unwrap();
        let b = Board::open(&n).unwrap();
        assert_eq!((b.n_procs(), b.n_signals(), b.model_hash()), (2, 1, 7));
        a.start_tick(0, 100, 105);
        assert!(b.wait_tick(0, Duration::ZERO));
        assert_eq!(b.tick_times(0), (100, 105));
        b.set_tick_end(0, 0, 30);
        b.finish_tick(1, 0);
        assert!(a.wait_done(1, 0, Duration::ZERO));
        assert_eq!(a.tick_end(0, 0), 30);
    }

    #[test]
    fn a_sleeping_waiter_is_woken_by_another_thread() {
        let n = name("b");
        let a = std::sync::Arc::new(Board::create(&n, 1, 0, 1_000_000, 0, 0).unwrap());
        let a2 = a.clone();
        let t = spawn_asleep(move || a2.wait_done(0, 4, Duration::ZERO));
        a.finish_tick(0, 4);
        assert!(t.join().unwrap());
    }

    #[test]
    fn stop_releases_waiters_and_the_earliest_request_wins() {
        let n = name("c");
        let a = std::sync::Arc::new(Board::create(&n, 1, 0, 1_000_000, 0, 0).unwrap());
        let a2 = a.clone();
        let t = spawn_asleep(move || a2.wait_tick(5, Duration::ZERO));
        a.request_stop(3, 1);
        a.request_stop(9, 2);
        assert!(!t.join().unwrap(), "tick 5 never starts");
        assert_eq!((a.stop_at(), a.stop_reason()), (3, 1));
    }

    #[test]
    fn a_second_run_of_a_live_model_is_refused_and_a_stale_board_replaced() {
        let n = name("d");
        let a = Board::create(&n, 1, 0, 1, 0, 0).unwrap();
        let e = Board::create(&n, 1, 0, 1, 0, 0).err().expect("refused");
        assert!(e.to_string().contains("already running"), "{e}");
        std::mem::forget(a); // leave the file behind as a SIGKILLed run would, owner = us
                             // our own pid is alive, so it still counts as running
        assert!(Board::create(&n, 1, 0, 1, 0, 0).is_err());
        let _ = std::fs::remove_file(Board::path_of(&n));
    }
}
