//! The bare reference a loop's latency is judged against: one-way time of a cache-line
//! ping-pong between two processes (RTT / 2), with no protocol, no clock reads on the far
//! side, no wake-ups. Measured in the same run as the figure it is compared with.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rtloop_launch::{ChildRole, LaunchError};
use rtloop_metrics::LatencyHistogram;
use rtloop_sys as sys;
use serde::{Deserialize, Serialize};

mod lines;
use lines::SharedLines;

/// The echo process of the ping-pong: copies line 0 into line 1 until it reads `u64::MAX`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EchoRole {
    /// The shared lines to echo on.
    pub lines: String,
    /// The CPU to pin to, if any.
    pub cpu: Option<usize>,
}

impl ChildRole for EchoRole {
    const NAME: &'static str = "pp-bare-echo";
}

/// Why the reference could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    /// The shared cache lines could not be made.
    #[error("cannot create the ping-pong lines: {0}")]
    Lines(#[from] std::io::Error),
    /// The echo process did not start.
    #[error(transparent)]
    Launch(#[from] LaunchError),
}

/// The measuring side of a ping-pong: the shared lines and the echo process on CPU 1 (this
/// side on CPU 0 if `pin` and there are two); dropping it stops the echo (and unpins).
struct PingPong {
    lines: SharedLines,
    child: std::process::Child,
    pinned: bool,
}

impl PingPong {
    fn start(pin: bool) -> Result<PingPong, ReferenceError> {
        let name = format!("pp-{}-{}", sys::pid(), sys::monotonic_ns() % 1_000_000);
        let lines = SharedLines::create(&name)?;
        // asked before the spawn: `online_cpus` counts the CPUs this process may use, and a
        // caller may have pinned it already; the echo always asks for CPU 1 (where there is
        // none, the pin fails and it runs where it may)
        let two = sys::online_cpus() >= 2;
        let (child, _out) = rtloop_launch::spawn_ready(&EchoRole {
            lines: name,
            cpu: Some(1),
        })?;
        let pinned = pin && two && sys::pin_to_cpu(0).is_ok();
        Ok(PingPong {
            lines,
            child,
            pinned,
        })
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
        self.lines.line(0).store(u64::MAX, Ordering::Release);
        let _ = self.child.wait();
        if self.pinned {
            let _ = sys::allow_all_cpus();
        }
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

/// The same ping-pong sampled the way a run samples its loopbacks: `count` round trips spread
/// evenly over `span`, the measuring side on CPU 0 and the echo on CPU 1 (as the lab's host
/// and device), both spinning in between as the lab's do. A hypervisor stall of a few
/// milliseconds then weighs the same in both: one sample out of `count`, where a tight
/// ping-pong of millions of rounds dilutes it below its p99.9.
pub fn bare_pingpong_paced(count: u64, span: Duration) -> Result<LatencyHistogram, ReferenceError> {
    let pp = PingPong::start(true)?;
    let mut h = LatencyHistogram::new();
    let count = count.max(1);
    let step_ns = (span.as_nanos() as u64 / count).max(1);
    // warm both lines up, unmeasured
    for i in 1..=1000 {
        pp.round_trip(i);
    }
    let start = sys::monotonic_ns();
    for k in 0..count {
        let due = start + k * step_ns;
        while sys::monotonic_ns() < due {
            std::hint::spin_loop();
        }
        h.record(pp.round_trip(1001 + k));
    }
    Ok(h)
}

/// In the echo process: run [`EchoRole`].
pub fn run_echo(role: &EchoRole) -> Result<(), ReferenceError> {
    if let Some(c) = role.cpu {
        let _ = sys::pin_to_cpu(c);
    }
    let lines = SharedLines::open(&role.lines)?;
    rtloop_launch::ready();
    let (ping, pong) = (lines.line(0), lines.line(1));
    let mut last = 0;
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
            std::hint::spin_loop();
        }
    }
}
