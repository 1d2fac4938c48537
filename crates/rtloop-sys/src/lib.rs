//! rtloop's operating-system layer: clocks, sleeping to a deadline, process identity and
//! liveness, the shared futex, scheduling and CPU placement, memory locking and sizes. Every
//! function is safe (rustix or a documented libc call does the unsafe part), so the crates
//! that use it can `forbid(unsafe_code)`. Nothing here knows about streams.

#![deny(unsafe_op_in_unsafe_fn, missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod shared_file;
pub use shared_file::SharedFile;
mod stamp_clock;
pub use stamp_clock::StampClock;
mod spin_read;
pub use spin_read::SpinRead;

use std::path::PathBuf;
use std::time::Duration;

use rustix::process::Pid;
use rustix::thread::futex;
use rustix::time::{clock_gettime, ClockId, Timespec};

/// CLOCK_MONOTONIC in nanoseconds (the clock of every rtloop timestamp).
#[inline]
#[must_use]
pub fn monotonic_ns() -> u64 {
    ts_ns(clock_gettime(ClockId::Monotonic))
}

/// CPU time the calling thread has used, in nanoseconds (CLOCK_THREAD_CPUTIME_ID): what a
/// wait that should sleep costs when it spins instead.
#[must_use]
pub fn thread_cpu_ns() -> u64 {
    ts_ns(clock_gettime(ClockId::ThreadCPUTime))
}

/// CLOCK_REALTIME in nanoseconds since the Unix epoch.
#[must_use]
pub fn realtime_ns() -> u64 {
    ts_ns(clock_gettime(ClockId::Realtime))
}

#[inline]
fn ts_ns(t: Timespec) -> u64 {
    (t.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(t.tv_nsec as u64)
}

fn ns_ts(ns: u64) -> Timespec {
    Timespec {
        tv_sec: (ns / 1_000_000_000) as i64,
        tv_nsec: (ns % 1_000_000_000) as i64,
    }
}

/// Sleep until CLOCK_MONOTONIC `deadline_ns`: a kernel sleep (clock_nanosleep TIMER_ABSTIME)
/// to `deadline - busy_wait`, then a spin to the deadline. Returns the time it woke
/// (>= deadline).
#[inline]
pub fn sleep_until(deadline_ns: u64, busy_wait: Duration) -> u64 {
    let tail = busy_wait.as_nanos() as u64;
    let wake = deadline_ns.saturating_sub(tail);
    let mut now = monotonic_ns();
    if now < wake {
        // EINTR: loop; the absolute deadline makes a retry exact
        while rustix::thread::clock_nanosleep_absolute(ClockId::Monotonic, &ns_ts(wake)).is_err() {}
        now = monotonic_ns();
    }
    while now < deadline_ns {
        std::hint::spin_loop();
        now = monotonic_ns();
    }
    now
}

/// Let this thread's timed sleeps wake within `slack` of their deadline (the kernel's
/// default for ordinary threads is 50 µs, more than a 30 kHz sample period).
pub fn set_timer_slack(slack: Duration) -> std::io::Result<()> {
    let ns = std::num::NonZeroU64::new(slack.as_nanos().max(1) as u64);
    rustix::thread::set_current_timer_slack(ns).map_err(std::io::Error::from)
}

/// This process's id.
#[must_use]
pub fn pid() -> u32 {
    rustix::process::getpid().as_raw_nonzero().get() as u32
}

/// Fields after the command name of `/proc/pid/stat` (the name may hold spaces and ')').
fn stat_fields(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let i = stat.rfind(')')?;
    Some(stat[i + 1..].to_owned())
}

/// Start time (field 22 of `/proc/pid/stat`) from the fields after the name, or 0.
fn start_of(fields: &str) -> u64 {
    fields
        .split_whitespace()
        .nth(19)
        .and_then(|f| f.parse().ok())
        .unwrap_or(0)
}

/// The start time of process `pid` (clock ticks since boot, field 22 of `/proc/pid/stat`),
/// or 0 if it cannot be read. Used with the pid to recognise a process after pid reuse.
#[must_use]
pub fn process_start_time(pid: u32) -> u64 {
    stat_fields(pid).map_or(0, |f| start_of(&f))
}

/// Start times are compared in their low 39 bits (what a packed process word keeps: 170
/// years of clock ticks at 100 Hz).
pub const START_MASK: u64 = (1 << 39) - 1;

/// Whether the process `pid` that started at `start` (0 = unknown) still exists.
#[must_use]
pub fn process_alive(pid: u32, start: u64) -> bool {
    let Some(p) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    match rustix::process::test_kill_process(p) {
        Ok(()) | Err(rustix::io::Errno::PERM) => {
            // a zombie is dead for our purposes; a different start time is a reused pid
            // no /proc to judge by: the signal test said it exists
            let Some(fields) = stat_fields(pid) else {
                return true;
            };
            let zombie = fields.trim_start().starts_with('Z');
            let now = start_of(&fields);
            !zombie && (start == 0 || now == 0 || now & START_MASK == start & START_MASK)
        }
        Err(_) => false,
    }
}

/// Sleep on a shared futex word while it equals `expected`, at most `timeout`.
/// Returns early on a wake, a changed value, a signal or the timeout (callers re-check).
#[allow(clippy::disallowed_types)] // the kernel's futex works on a plain std atomic
pub fn futex_wait(word: &std::sync::atomic::AtomicU32, expected: u32, timeout: Duration) {
    let ts = Timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as i64,
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    // shared (not PRIVATE): the word lives in memory mapped by several processes
    let _ = futex::wait(word, futex::Flags::empty(), expected, Some(&ts));
}

/// Wake every sleeper on a shared futex word.
#[allow(clippy::disallowed_types)] // as `futex_wait`
pub fn futex_wake_all(word: &std::sync::atomic::AtomicU32) {
    let _ = futex::wake(word, futex::Flags::empty(), i32::MAX as u32);
}

/// Whether this process is registered for `MEMBARRIER_CMD_GLOBAL_EXPEDITED` (another
/// process's [`membarrier_global`] then makes every running thread of this one execute a
/// full memory barrier). The first call starts the registration on a thread of its own, as
/// it takes about 10 ms (the kernel waits for every CPU to pass a grace period), and returns
/// `false`; calls after it has finished return `true`. `false` for good when the kernel
/// refuses (too old, or a seccomp filter). A forked child registers again.
#[must_use]
pub fn membarrier_ready() -> bool {
    use std::sync::atomic::{AtomicU64, Ordering};
    const PENDING: u64 = 1;
    const DONE: u64 = 2;
    const REFUSED: u64 = 3;
    // the registering process's pid (a forked child has a new memory map) and the state
    static STATE: AtomicU64 = AtomicU64::new(0);
    let me = u64::from(std::process::id()) << 2;
    // SYNC: Relaxed: a cache of a per-process kernel state; the registration's effect is the
    // kernel's, not published through this word.
    let seen = STATE.load(Ordering::Relaxed);
    if seen & !3 == me {
        return seen & 3 == DONE;
    }
    // SYNC: Relaxed: only decides which caller starts the registration.
    if STATE
        .compare_exchange(seen, me | PENDING, Ordering::Relaxed, Ordering::Relaxed)
        .is_err()
    {
        return false;
    }
    let register = move || {
        let ok =
            rustix::thread::membarrier(rustix::thread::MembarrierCommand::RegisterGlobalExpedited)
                .is_ok();
        // SYNC: Relaxed: as above.
        STATE.store(me | if ok { DONE } else { REFUSED }, Ordering::Relaxed);
    };
    if std::thread::Builder::new()
        .name("rtloop-membarrier".into())
        .spawn(register)
        .is_err()
    {
        // no thread to spare: register here
        register();
    }
    false
}

/// `MEMBARRIER_CMD_GLOBAL_EXPEDITED`: when it returns, every thread of every registered
/// process (see [`membarrier_ready`]) that was running has executed a full memory
/// barrier, and those not running will before they run again. Costs a system call and an
/// interrupt of each CPU running such a thread (about 10 µs on a 2-vCPU virtual machine).
pub fn membarrier_global() -> std::io::Result<()> {
    rustix::thread::membarrier(rustix::thread::MembarrierCommand::GlobalExpedited)
        .map_err(Into::into)
}

/// The page size.
#[must_use]
pub fn page_size() -> usize {
    rustix::param::page_size()
}

/// The directory streams live in: `$RTLOOP_SHM_DIR` or `/dev/shm`.
#[must_use]
pub fn shm_dir() -> PathBuf {
    std::env::var_os("RTLOOP_SHM_DIR").map_or_else(|| PathBuf::from("/dev/shm"), PathBuf::from)
}

/// Pin the calling thread to one CPU. Fails without permission or for a CPU that is not there.
pub fn pin_to_cpu(cpu: usize) -> std::io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).map_err(Into::into)
}

/// Let the calling thread run on every CPU again (undoes [`pin_to_cpu`]).
pub fn allow_all_cpus() -> std::io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    for cpu in 0..rustix::thread::CpuSet::MAX_CPU {
        set.set(cpu);
    }
    rustix::thread::sched_setaffinity(None, &set).map_err(Into::into)
}

/// Try to switch the calling thread to SCHED_FIFO (priority 1) and straight back to
/// SCHED_OTHER: tells whether realtime scheduling is permitted.
pub fn try_sched_fifo() -> std::io::Result<()> {
    set_fifo(1)?;
    set_other()
}

fn sched_set(policy: libc::c_int, priority: i32) -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pid 0 is the calling thread; `param` is a valid, initialised sched_param that
    // outlives the call. The call has no memory effects beyond reading it.
    let rc = unsafe { libc::sched_setscheduler(0, policy, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Run the calling thread under SCHED_FIFO at `priority` (1..=99).
pub fn set_fifo(priority: i32) -> std::io::Result<()> {
    sched_set(libc::SCHED_FIFO, priority)
}

/// Run the calling thread under SCHED_OTHER again.
pub fn set_other() -> std::io::Result<()> {
    sched_set(libc::SCHED_OTHER, 0)
}

/// Unlock memory locked by [`lock_memory`].
pub fn unlock_memory() -> std::io::Result<()> {
    rustix::mm::munlockall().map_err(Into::into)
}

/// Number of CPUs this process may run on.
#[must_use]
pub fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// Lock current and future pages in memory (no page faults on the hot path).
pub fn lock_memory() -> std::io::Result<()> {
    rustix::mm::mlockall(rustix::mm::MlockAllFlags::CURRENT | rustix::mm::MlockAllFlags::FUTURE)
        .map_err(Into::into)
}

/// Ask the kernel to keep CPUs out of deep idle states (PM QoS `/dev/cpu_dma_latency` = 0)
/// for as long as the returned file stays open. On a VM whose idle vCPUs halt, this cuts a
/// futex or timer wake-up from tens of microseconds to a few.
pub fn hold_cpu_dma_latency() -> std::io::Result<std::fs::File> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/cpu_dma_latency")?;
    f.write_all(&0i32.to_ne_bytes())?;
    Ok(f)
}

/// Total and available bytes of the filesystem holding `path`.
#[must_use]
pub fn fs_space(path: &std::path::Path) -> Option<(u64, u64)> {
    let st = rustix::fs::statvfs(path).ok()?;
    Some((st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize))
}

/// Bytes of memory available to new allocations (`MemAvailable`), if known.
#[must_use]
pub fn mem_available() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Times the calling thread was preempted so far: taken off its CPU while it could still
/// run, because another task got the CPU (`nonvoluntary_ctxt_switches` of
/// `/proc/thread-self/status`), if known. A spinning thread's stalls come from these (or from
/// the hypervisor, which the guest does not count here).
#[must_use]
pub fn thread_preemptions() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/status").ok()?;
    let line = s
        .lines()
        .find(|l| l.starts_with("nonvoluntary_ctxt_switches:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Make the child that `cmd` starts end (SIGKILL) when the thread that starts it ends: a
/// supervisor killed by SIGKILL must not leave its children running, and a child that
/// waits on its supervisor through shared memory cannot tell it is gone. The kernel
/// sends the signal when the parent *thread* ends, so start children from a thread that
/// outlives them (the supervisor's own). If the parent is already gone when the child
/// starts (it died between fork and the call), the child does not run.
pub fn end_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: it makes two system calls (prctl, getppid)
    // through rustix, which neither allocates nor takes locks, and builds an io::Error from
    // a raw errno, which does not allocate either.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            // the parent may have died before the prctl: then nobody would send the signal
            if rustix::process::getppid() != Some(parent) {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Ignore SIGINT (Ctrl-C) in this process, and only SIGINT: for a child whose parent stops
/// it some other way when Ctrl-C in the terminal reaches the whole process group. SIGTERM
/// and SIGHUP keep their default action, so `kill PID` still ends the process.
pub fn ignore_interrupt() {
    // SAFETY: `signal` with SIG_IGN installs no handler code, only the kernel's disposition;
    // it takes no pointer from us and is safe to call from any thread at any time.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
}

/// Bind a UNIX-domain socket at `path` that only this user may connect to: the socket file
/// is made 0600 whatever the umask (bind follows it), and [`peer_is_me`] refuses
/// connections from other users, which also covers the moment between bind and the chmod.
pub fn bind_private_unix(
    path: &std::path::Path,
) -> std::io::Result<std::os::unix::net::UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    let l = std::os::unix::net::UnixListener::bind(path)?;
    if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
        let _ = std::fs::remove_file(path);
        return Err(std::io::Error::new(
            e.kind(),
            format!("cannot make socket {} owner-only: {e}", path.display()),
        ));
    }
    Ok(l)
}

/// Whether the process at the other end of a UNIX-domain connection runs as this process's
/// effective user (SO_PEERCRED). `Err(uid)` names the other user (`None` if the kernel did
/// not say).
pub fn peer_is_me(conn: &std::os::unix::net::UnixStream) -> Result<(), Option<u32>> {
    match rustix::net::sockopt::socket_peercred(conn) {
        Ok(cred) if cred.uid == rustix::process::geteuid() => Ok(()),
        Ok(cred) => Err(Some(cred.uid.as_raw())),
        Err(_) => Err(None),
    }
}

/// The Python interpreter that runs rtloop's Python parts (modules, wheels' bundled
/// libraries, the NWB reader): `$RTLOOP_PYTHON` if set (the `rtloop` console script and the
/// Python package set it to their own interpreter), else [`python_named`]'s fallback,
/// `python3` from `PATH`. The one place that reads the variable.
#[must_use]
pub fn python() -> PathBuf {
    python_named().unwrap_or_else(|| "python3".into())
}

/// `$RTLOOP_PYTHON` if it is set and not empty: for a caller whose fallback is not
/// `python3` (a Python process re-running rtloop uses its own interpreter).
#[must_use]
pub fn python_named() -> Option<PathBuf> {
    std::env::var_os("RTLOOP_PYTHON")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Ask for `bytes` of receive buffer on socket `s`: SO_RCVBUFFORCE passes
/// `net.core.rmem_max` when this process may (root / CAP_NET_ADMIN), else SO_RCVBUF (which
/// the kernel caps at `rmem_max`). A size beyond what the kernel takes (an `int`) asks for
/// the most it takes, never for the size's low bits. Returns whether either was accepted;
/// a refusal leaves the socket's buffer as it was.
pub fn set_recv_buffer(s: impl std::os::fd::AsFd, bytes: usize) -> bool {
    use rustix::net::sockopt;
    let bytes = bytes.min(i32::MAX as usize);
    sockopt::set_socket_recv_buffer_size_force(&s, bytes).is_ok()
        || sockopt::set_socket_recv_buffer_size(&s, bytes).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_made_up_one_is_not() {
        let me = pid();
        assert!(process_alive(me, process_start_time(me)));
        assert!(
            !process_alive(me, process_start_time(me) + 1),
            "same pid, other start: reused"
        );
        assert!(!process_alive(0, 0));
        assert!(!process_alive(4_000_000, 0), "above pid_max");
    }

    #[test]
    fn monotonic_clock_moves_forward() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a);
    }

    #[test]
    fn a_receive_buffer_beyond_an_int_asks_for_the_most_not_the_low_bits() {
        let small = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let huge = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(set_recv_buffer(&small, 256 << 10));
        // 4 GiB + 4 KiB: its low 32 bits ask for 4 KiB
        assert!(set_recv_buffer(&huge, (1usize << 32) + 4096));
        let got =
            |s: &std::net::UdpSocket| rustix::net::sockopt::socket_recv_buffer_size(s).unwrap();
        assert!(
            got(&huge) >= got(&small),
            "asked for 4 GiB, got {} bytes; 256 KiB got {}",
            got(&huge),
            got(&small)
        );
    }
}
