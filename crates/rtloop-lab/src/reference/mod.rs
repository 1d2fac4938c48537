//! The bare reference a loop's latency is judged against: one-way time of a cache-line
//! ping-pong between two processes (RTT / 2), with no protocol, no clock reads on the far
//! side, no wake-ups. Measured in the same run as the figure it is compared with. Its
//! sleeping twin, [`bare_futex_pingpong`], is the reference for a reader asleep on the futex:
//! the same two processes wake each other through two bare futex words, so what it measures
//! is what the kernel and the host charge for a wake-up, with no ring around it.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rtloop_launch::{ChildRole, LaunchError};
use rtloop_metrics::LatencyHistogram;
use rtloop_sys as sys;
use serde::{Deserialize, Serialize};

mod lines;
use crate::pacing::Pacer;
use lines::SharedLines;

/// The echo process of the ping-pong: copies line 0 into line 1 until it reads `u64::MAX`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EchoRole {
    /// The shared lines to echo on.
    pub lines: String,
    /// The CPU to pin to, if any.
    pub cpu: Option<usize>,
    /// Sleep on a futex word between rounds and wake the other side's (the blocking
    /// reference) instead of spinning on the lines.
    #[serde(default)]
    pub futex: bool,
}

/// The futex ping-pong's words: lines of their own, apart from the spinning one's.
const FUTEX_PING: usize = 2;
const FUTEX_PONG: usize = 3;
/// The measuring side's last value: the futex echo stops.
const FUTEX_STOP: u32 = u32::MAX;
/// A sleeper re-checks its word at least this often (a lost wake-up would show as a stall of
/// this length, not as a hang).
const FUTEX_TIMEOUT: Duration = Duration::from_secs(1);

impl ChildRole for EchoRole {
    const NAME: &'static str = "pp-bare-echo";
}

/// Why the reference could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    /// The shared cache lines could not be made or opened.
    #[error("cannot create or open the reference's shared lines: {0}")]
    Lines(#[from] std::io::Error),
    /// The echo process did not start.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// A reference's other process failed or lost its parent.
    #[error("the reference's other process: {0}")]
    Device(String),
}

/// The measuring side of a ping-pong: the shared lines and the echo process on CPU 1;
/// dropping it stops the echo.
struct PingPong {
    lines: SharedLines,
    child: std::process::Child,
    futex: bool,
}

impl PingPong {
    fn start(futex: bool) -> Result<PingPong, ReferenceError> {
        let name = format!("pp-{}-{}", sys::pid(), sys::monotonic_ns() % 1_000_000);
        let lines = SharedLines::create(&name)?;
        // the echo always asks for CPU 1 (where there is none, the pin fails and it runs
        // where it may)
        let (child, _out) = rtloop_launch::spawn_ready(&EchoRole {
            lines: name,
            cpu: Some(1),
            futex,
        })?;
        Ok(PingPong {
            lines,
            child,
            futex,
        })
    }

    /// Round trip `i` (`0 < i < u32::MAX`) through the futex words, each side asleep until the
    /// other wakes it: one-way time, ns.
    fn futex_round_trip(&self, i: u32) -> u64 {
        let (ping, pong) = (self.lines.word(FUTEX_PING), self.lines.word(FUTEX_PONG));
        let t0 = sys::monotonic_ns();
        // SYNC: Release/Acquire pairs with the echo's; the values are the only data. The
        // kernel orders the wake after the store (the futex call is a full barrier).
        ping.store(i, Ordering::Release);
        sys::futex_wake_all(ping);
        loop {
            let v = pong.load(Ordering::Acquire);
            if v == i {
                break;
            }
            // returns at once if the echo answered since the load
            sys::futex_wait(pong, v, FUTEX_TIMEOUT);
        }
        (sys::monotonic_ns() - t0) / 2
    }

    /// Round trip `i` (never `u64::MAX`): one-way time, ns.
    fn round_trip(&self, i: u64) -> u64 {
        let (ping, pong) = (self.lines.line(0), self.lines.line(1));
        let t0 = sys::monotonic_ns();
        // SYNC: Release/Acquire pairs with the echo's; the values are the only data.
        ping.store(i, Ordering::Release);
        while pong.load(Ordering::Acquire) != i {
            std::hint::spin_loop();
        }
        (sys::monotonic_ns() - t0) / 2
    }
}

impl Drop for PingPong {
    fn drop(&mut self) {
        // SYNC: Release, as every round trip's store.
        if self.futex {
            let ping = self.lines.word(FUTEX_PING);
            ping.store(FUTEX_STOP, Ordering::Release);
            sys::futex_wake_all(ping);
        } else {
            self.lines.line(0).store(u64::MAX, Ordering::Release);
        }
        let _ = self.child.wait();
    }
}

/// One-way latency of a bare ping-pong for `rounds` (after 1000 warm-up rounds), or until
/// `span` has passed: a reference for tails must last as long as the run it is compared with
/// (the host preempts vCPUs for milliseconds a few times a second, which a short run never
/// sees).
pub fn bare_pingpong(
    rounds: u64,
    span: Option<Duration>,
) -> Result<LatencyHistogram, ReferenceError> {
    let pp = PingPong::start(false)?;
    let mut h = LatencyHistogram::new();
    let started = Instant::now();
    for i in 1..=rounds.saturating_add(1000) {
        if i % 4096 == 0 && span.is_some_and(|s| started.elapsed() >= s) {
            break;
        }
        let one_way = pp.round_trip(i);
        if i > 1000 {
            h.record(one_way);
        }
    }
    Ok(h)
}

/// The paced loop's device side, a process of its own on CPU 1 as the lab's device: it stamps
/// a word on schedule (paced as the lab's device, [`crate::pacing`]) into a small bare ring,
/// the host side (the caller, on CPU 0 as the lab's host) echoes every stamp into a second
/// one, and the device records now − stamp for each echo, as the lab's device records
/// HubClockDelta. It prints the histogram as one JSON line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoopDeviceRole {
    /// The shared lines and slots.
    pub lines: String,
    /// Measured loops (after [`LOOP_WARMUP`] unmeasured ones).
    pub count: u64,
    /// Nanoseconds between measured stamps.
    pub step_ns: u64,
    /// The CPU to pin to, if any.
    pub cpu: Option<usize>,
}

impl ChildRole for LoopDeviceRole {
    const NAME: &'static str = "lab-ref-loop-device";
}

/// The paced loop's counters, each on its own line: stamps sent by the device, stamps echoed
/// by the host, and the device's "every echo is in" (the host stops).
const LOOP_SENT: usize = 4;
const LOOP_ECHOED: usize = 5;
const LOOP_DONE: usize = 6;
/// Entries in each of the paced loop's two rings (the slots after the lines, halved): a host
/// stalled for this many steps holds the device back, as a full FIFO would.
const LOOP_RING: usize = lines::SLOTS / 2;
/// Loops sent back to back before the measured ones (caches, both sides' lines).
const LOOP_WARMUP: u64 = 1000;

/// The bare loop sampled the way a load test samples its loopbacks: `count` stamps spread
/// evenly over `span`, made on CPU 1 (the device's) at their time whatever the other side
/// does, echoed on CPU 0 (the host's), each measured from its stamp to the echo's return (a
/// whole loop, as HubClockDelta). So a stall of the host's CPU delays every stamp made during
/// it, as it delays every loopback due in it, and a stall of the device's CPU delays only the
/// stamp in flight, as in the run: one stall weighs the same in both. A ping-pong that waits
/// for each round trip before it starts the next would count a stall of its measuring side
/// once, or not at all. Both sides spin, as the lab's do while data flows.
pub fn bare_loop_paced(count: u64, span: Duration) -> Result<LatencyHistogram, ReferenceError> {
    loop_paced(count, span, None)
}

/// [`bare_loop_paced`] with the host side stopping for `stall` once it has echoed `after`
/// stamps (the warm-up's included): how a test shows that a stall of the host's CPU delays
/// every stamp made during it.
#[doc(hidden)]
pub fn bare_loop_paced_with_host_stall(
    count: u64,
    span: Duration,
    after: u64,
    stall: Duration,
) -> Result<LatencyHistogram, ReferenceError> {
    loop_paced(count, span, Some((after, stall)))
}

fn loop_paced(
    count: u64,
    span: Duration,
    mut stall: Option<(u64, Duration)>,
) -> Result<LatencyHistogram, ReferenceError> {
    let count = count.max(1);
    let name = format!("loop-{}-{}", sys::pid(), sys::monotonic_ns() % 1_000_000);
    let lines = SharedLines::create(&name)?;
    // asked before the spawn: `online_cpus` counts the CPUs this process may use, and a
    // caller may have pinned it already
    let two = sys::online_cpus() >= 2;
    let (mut child, mut out) = rtloop_launch::spawn_ready(&LoopDeviceRole {
        lines: name,
        count,
        step_ns: (span.as_nanos() as u64 / count).max(1),
        cpu: Some(1),
    })?;
    let pinned = two && sys::pin_to_cpu(0).is_ok();
    let (sent, echoed_line, done) = (
        lines.line(LOOP_SENT),
        lines.line(LOOP_ECHOED),
        lines.line(LOOP_DONE),
    );
    let mut echoed = 0u64;
    let mut idle = 0u32;
    let ended = loop {
        // SYNC: Acquire pairs with the device's Release of `sent`: the stamps below it are
        // written.
        let s = sent.load(Ordering::Acquire);
        if s > echoed {
            while echoed < s {
                let k = (echoed % LOOP_RING as u64) as usize;
                let stamp = lines.slot(k).load(Ordering::Relaxed);
                lines.slot(LOOP_RING + k).store(stamp, Ordering::Relaxed);
                echoed += 1;
            }
            // SYNC: Release publishes the echoed stamps to the device's Acquire.
            echoed_line.store(echoed, Ordering::Release);
            idle = 0;
            if let Some((_, d)) = stall.take_if(|(after, _)| echoed >= *after) {
                std::thread::sleep(d);
            }
            continue;
        }
        // SYNC: Acquire pairs with the device's Release once every echo is in.
        if done.load(Ordering::Acquire) != 0 {
            break None;
        }
        idle = idle.wrapping_add(1);
        if idle % (1 << 20) == 0 {
            // a device that died would leave this side spinning
            if let Ok(Some(st)) = child.try_wait() {
                break Some(format!("it ended ({st}) before its last loop"));
            }
        }
        std::hint::spin_loop();
    };
    if pinned {
        let _ = sys::allow_all_cpus();
    }
    let mut line = String::new();
    let read = std::io::BufRead::read_line(&mut out, &mut line);
    let _ = child.wait();
    if let Some(why) = ended {
        return Err(ReferenceError::Device(why));
    }
    read.map_err(|e| ReferenceError::Device(format!("its report: {e}")))?;
    let pairs: Vec<(u64, u64)> = serde_json::from_str(line.trim())
        .map_err(|e| ReferenceError::Device(format!("its report {line:?}: {e}")))?;
    let mut h = LatencyHistogram::new();
    for (ns, n) in pairs {
        h.record_n(ns, n);
    }
    Ok(h)
}

rtloop_launch::register_role!(LoopDeviceRole, run_loop_device);
rtloop_launch::register_role!(EchoRole, run_echo);

/// In the paced loop's device process: run [`LoopDeviceRole`] and print the histogram.
pub fn run_loop_device(role: &LoopDeviceRole) -> Result<(), ReferenceError> {
    let (lines, parent) = start_child(&role.lines, role.cpu)?;
    let (sent_line, echoed_line) = (lines.line(LOOP_SENT), lines.line(LOOP_ECHOED));
    let total = role.count.saturating_add(LOOP_WARMUP);
    let mut h = LatencyHistogram::new();
    let (mut sent, mut received) = (0u64, 0u64);
    // when the measured stamps are made: from the end of the warm-up on, paced as the lab's
    // device paces its frames (after a stall of this side, twice the rate, not a burst)
    let mut pacer: Option<Pacer> = None;
    let mut idle = 0u32;
    while received < total {
        // SYNC: Acquire pairs with the host's Release of `echoed`: the echoes below it are
        // written.
        let echoed = echoed_line.load(Ordering::Acquire);
        let now = sys::monotonic_ns();
        while received < echoed {
            let k = (received % LOOP_RING as u64) as usize;
            let stamp = lines.slot(LOOP_RING + k).load(Ordering::Relaxed);
            if received >= LOOP_WARMUP {
                h.record(now.saturating_sub(stamp));
            }
            received += 1;
        }
        if pacer.is_none() && received == LOOP_WARMUP {
            pacer = Some(Pacer::new(now, role.step_ns));
        }
        let room = sent < total && sent - received < LOOP_RING as u64;
        if room && (sent < LOOP_WARMUP || pacer.as_mut().is_some_and(|p| p.take(now).is_some())) {
            // stamped when made, as the lab's device stamps a frame: a stall of this side
            // delays the stamp, it does not lengthen the loop
            let k = (sent % LOOP_RING as u64) as usize;
            lines.slot(k).store(now, Ordering::Relaxed);
            sent += 1;
            // SYNC: Release publishes the stamp to the host's Acquire.
            sent_line.store(sent, Ordering::Release);
        } else {
            idle = idle.wrapping_add(1);
            if idle % (1 << 20) == 0 {
                orphaned(parent)?;
            }
            std::hint::spin_loop();
        }
    }
    // SYNC: Release; the host only stops on it.
    lines.line(LOOP_DONE).store(1, Ordering::Release);
    println!(
        "{}",
        serde_json::to_string(&h.recorded()).expect("pairs of numbers serialise")
    );
    Ok(())
}

/// One-way latency of a bare futex ping-pong for `rounds` (after 100 warm-up rounds): the
/// same two processes and CPUs as [`bare_pingpong`], but each side sleeps on its futex word
/// at once and the other wakes it (store, then `FUTEX_WAKE`). The reference for a reader that
/// sleeps without spinning: a vCPU halted in the guest's idle loop and woken by an IPI, which
/// is what the host charges for, whatever the protocol around it.
pub fn bare_futex_pingpong(rounds: u64) -> Result<LatencyHistogram, ReferenceError> {
    let pp = PingPong::start(true)?;
    let mut h = LatencyHistogram::new();
    // below u32::MAX (the stop), the values of the words
    let total = rounds.saturating_add(100).min(u64::from(FUTEX_STOP - 1));
    for i in 1..=total {
        let one_way = pp.futex_round_trip(i as u32);
        if i > 100 {
            h.record(one_way);
        }
    }
    Ok(h)
}

/// In the echo process: run [`EchoRole`].
pub fn run_echo(role: &EchoRole) -> Result<(), ReferenceError> {
    let (lines, parent) = start_child(&role.lines, role.cpu)?;
    if role.futex {
        return run_futex_echo(&lines, parent);
    }
    let (ping, pong) = (lines.line(0), lines.line(1));
    let mut last = 0;
    let mut idle = 0u32;
    loop {
        // SYNC: Acquire/Release pairs with the measuring side; the values are the only data.
        let v = ping.load(Ordering::Acquire);
        if v == u64::MAX {
            return Ok(());
        }
        if v != last {
            last = v;
            pong.store(v, Ordering::Release);
        } else {
            idle = idle.wrapping_add(1);
            if idle % (1 << 20) == 0 {
                orphaned(parent)?;
            }
            std::hint::spin_loop();
        }
    }
}

/// In a reference's child process: pin to `cpu`, open the parent's lines, say ready.
/// Returns the lines and the parent's pid (see [`orphaned`]).
fn start_child(lines: &str, cpu: Option<usize>) -> Result<(SharedLines, u32), ReferenceError> {
    if let Some(c) = cpu {
        let _ = sys::pin_to_cpu(c);
    }
    let lines = SharedLines::open(lines)?;
    rtloop_launch::ready();
    Ok((lines, std::os::unix::process::parent_id()))
}

/// An echo or loop device whose parent has gone (killed in the middle of a run, so it never
/// sent the stop) ends instead of spinning on its CPU for ever.
fn orphaned(parent: u32) -> Result<(), ReferenceError> {
    if std::os::unix::process::parent_id() == parent {
        Ok(())
    } else {
        Err(ReferenceError::Device(format!(
            "its parent (pid {parent}) ended before the stop"
        )))
    }
}

/// The futex echo: sleep on the ping word, copy each new value into the pong word and wake
/// the measuring side, until the stop value.
fn run_futex_echo(lines: &SharedLines, parent: u32) -> Result<(), ReferenceError> {
    let (ping, pong) = (lines.word(FUTEX_PING), lines.word(FUTEX_PONG));
    let mut last = 0;
    loop {
        // SYNC: Acquire/Release pairs with the measuring side; the values are the only data.
        let v = ping.load(Ordering::Acquire);
        if v == FUTEX_STOP {
            return Ok(());
        }
        if v == last {
            // returns at once if a new value came since the load
            sys::futex_wait(ping, v, FUTEX_TIMEOUT);
            if ping.load(Ordering::Acquire) == last {
                // a timeout or a spurious wake: off the measured path
                orphaned(parent)?;
            }
        } else {
            last = v;
            pong.store(v, Ordering::Release);
            sys::futex_wake_all(pong);
        }
    }
}
