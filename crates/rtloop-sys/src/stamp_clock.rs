//! A cheap CLOCK_MONOTONIC for commit stamps: the CPU's time-stamp counter, scaled by a rate
//! measured against CLOCK_MONOTONIC and re-anchored to it every millisecond.
//!
//! Why: the vDSO's `clock_gettime` reads the counter behind an `lfence`, which waits until
//! every earlier instruction has finished. A writer reads it right after copying a packet
//! into shared memory, so each commit waited for its own stores and no work of the next
//! packet could overlap them (measured: 8 KiB packets through a 1 MiB ring took 180–205 ns
//! each with it, 163–165 ns without, a bare ring 134–160 ns). A plain `rdtsc` orders nothing
//! and costs about 10 ns here.
//!
//! The counter is used only where the kernel's own clock source is `tsc` (then the kernel
//! has checked it is invariant and synchronised across CPUs, and CLOCK_MONOTONIC is this
//! counter scaled); elsewhere, on other architectures, under miri, or with
//! `RTLOOP_EXACT_STAMPS=1`, every stamp is a `clock_gettime`.
//!
//! How close: each anchor brackets a `clock_gettime` between two ordered counter reads
//! (the tightest of three tries), so its error is half that bracket, about 10 ns here; the
//! rate comes from anchors at least 100 ms apart, so between anchors (1 ms) it adds well
//! under 1 ns. A change in NTP's slew of CLOCK_MONOTONIC shows until the next rate measure:
//! at the most NTP allows (500 ppm) stamps could be up to 0.5 µs off just before an anchor,
//! at an ordinary few ppm a few ns. Stamps never go backwards. A counter that jumps, stops or
//! goes back against CLOCK_MONOTONIC (more than 50 µs at an anchor) is given up for good:
//! stamps handed out before that anchor were at most one anchor period off, every later one
//! is a `clock_gettime`.

use std::sync::OnceLock;
use std::time::Duration;

/// Re-anchor to CLOCK_MONOTONIC at least this often.
pub const ANCHOR_EVERY: Duration = Duration::from_millis(1);

/// Measure the rate over at least this long (and re-measure it as often).
const RATE_SPAN_NS: u64 = 100_000_000;

/// Until the first rate is known: measure it over this long (stamps are `clock_gettime`s
/// meanwhile).
const FIRST_RATE_SPAN_NS: u64 = 1_000_000;

/// At an anchor, the counter's extrapolation and CLOCK_MONOTONIC may differ by this much
/// before the counter is given up: a change in NTP's slew explains a few µs over the spans
/// judged (at most [`JUDGED_ANCHORS`] anchors' worth), a counter that jumped or stopped far
/// more.
const MAX_DRIFT_NS: u64 = 50_000;

/// Anchors are judged only when the last one is at most this many anchor periods old: over
/// a long idle gap the rate's small error adds up to more than a fault would show.
const JUDGED_ANCHORS: u64 = 10;

/// A writer's stamp clock (see the module docs). One per writer: it is `&mut`, and holds no
/// shared state.
#[derive(Debug, Clone)]
pub struct StampClock {
    /// The counter may be used at all (decided once per process).
    counter: bool,
    /// Counter and CLOCK_MONOTONIC ns of the last anchor.
    anchor_tsc: u64,
    anchor_ns: u64,
    /// ns per counter tick, 32.32 fixed point; 0 until measured.
    mult: u64,
    /// Counter ticks between anchors (ANCHOR_EVERY at the measured rate).
    anchor_ticks: u64,
    /// The anchor the rate is measured from.
    rate_tsc: u64,
    rate_ns: u64,
    /// The last stamp handed out (stamps never go back).
    last: u64,
}

impl Default for StampClock {
    fn default() -> Self {
        Self::new()
    }
}

impl StampClock {
    /// A clock that uses the counter where it may (see the module docs).
    #[must_use]
    pub fn new() -> StampClock {
        Self::with_counter(counter_usable())
    }

    fn with_counter(counter: bool) -> StampClock {
        StampClock {
            counter,
            anchor_tsc: 0,
            anchor_ns: 0,
            mult: 0,
            anchor_ticks: 0,
            rate_tsc: 0,
            rate_ns: 0,
            last: 0,
        }
    }

    /// CLOCK_MONOTONIC now, ns (see the module docs for how close).
    #[inline]
    pub fn now_ns(&mut self) -> u64 {
        if self.counter && self.mult != 0 {
            let dt = read_counter().wrapping_sub(self.anchor_tsc);
            if dt < self.anchor_ticks {
                let ns = self.extrapolate(dt);
                return self.hand_out(ns);
            }
        }
        self.slow_now()
    }

    /// CLOCK_MONOTONIC `dt` counter ticks after the last anchor, by the measured rate.
    #[inline]
    fn extrapolate(&self, dt: u64) -> u64 {
        self.anchor_ns + ((u128::from(dt) * u128::from(self.mult)) >> 32) as u64
    }

    #[inline]
    fn hand_out(&mut self, ns: u64) -> u64 {
        let ns = ns.max(self.last);
        self.last = ns;
        ns
    }

    /// Re-anchor (and measure the rate when due), or read the clock where the counter is
    /// not used.
    #[cold]
    fn slow_now(&mut self) -> u64 {
        if !self.counter {
            let ns = crate::monotonic_ns();
            return self.hand_out(ns);
        }
        if self.mult == 0 {
            if self.rate_ns == 0 {
                // the first stamp: where the first rate is measured from
                let (tsc, ns) = anchor_pair();
                (self.rate_tsc, self.rate_ns) = (tsc, ns);
                return self.hand_out(ns);
            }
            let ns = crate::monotonic_ns();
            if ns.saturating_sub(self.rate_ns) < FIRST_RATE_SPAN_NS {
                return self.hand_out(ns);
            }
        }
        let (tsc, ns) = anchor_pair();
        if self.mult != 0 && !self.counter_agrees(tsc, ns) {
            // the counter jumped, went back or stopped against CLOCK_MONOTONIC: from now on
            // every stamp is a `clock_gettime` (stamps handed out so far were at most one
            // anchor period off)
            self.counter = false;
            return self.hand_out(ns);
        }
        let since = ns.saturating_sub(self.rate_ns);
        let span = if self.mult == 0 {
            FIRST_RATE_SPAN_NS
        } else {
            RATE_SPAN_NS
        };
        if since >= span && tsc > self.rate_tsc {
            let ticks = tsc - self.rate_tsc;
            self.mult = ((u128::from(since) << 32) / u128::from(ticks)) as u64;
            self.anchor_ticks = ((u128::from(ANCHOR_EVERY.as_nanos() as u64) << 32)
                / u128::from(self.mult.max(1))) as u64;
            (self.rate_tsc, self.rate_ns) = (tsc, ns);
        }
        (self.anchor_tsc, self.anchor_ns) = (tsc, ns);
        self.hand_out(ns)
    }
}

impl StampClock {
    /// Whether the counter read `tsc` at CLOCK_MONOTONIC `ns` is where the last anchor and
    /// the rate put it (within [`MAX_DRIFT_NS`]); gaps too long to judge pass.
    fn counter_agrees(&self, tsc: u64, ns: u64) -> bool {
        let Some(dt) = tsc.checked_sub(self.anchor_tsc) else {
            return false; // went back
        };
        if dt > self.anchor_ticks.saturating_mul(JUDGED_ANCHORS) {
            // too long ago to judge by the counter alone; the clock says how long it was
            return ns.saturating_sub(self.anchor_ns) > ANCHOR_EVERY.as_nanos() as u64;
        }
        self.extrapolate(dt).abs_diff(ns) <= MAX_DRIFT_NS
    }
}

/// The counter may stand in for CLOCK_MONOTONIC: x86_64, the kernel's clock source is
/// `tsc`, and `RTLOOP_EXACT_STAMPS` is not set to 1. Decided once per process.
#[must_use]
fn counter_usable() -> bool {
    static USABLE: OnceLock<bool> = OnceLock::new();
    *USABLE.get_or_init(|| {
        if cfg!(miri) || !cfg!(target_arch = "x86_64") {
            return false;
        }
        if std::env::var("RTLOOP_EXACT_STAMPS").is_ok_and(|v| v == "1") {
            return false;
        }
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .is_ok_and(|s| s.trim() == "tsc")
    })
}

/// A counter read and the CLOCK_MONOTONIC ns of the same moment: the `clock_gettime`
/// bracketed by two ordered counter reads, the tightest bracket of three, its middle.
fn anchor_pair() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..3 {
        let a = read_counter_ordered();
        let ns = crate::monotonic_ns();
        let b = read_counter_ordered();
        let width = b.wrapping_sub(a);
        if width < best.0 {
            best = (width, a + width / 2, ns);
        }
    }
    (best.1, best.2)
}

/// The time-stamp counter, unordered (it may be read a few instructions early).
#[inline]
fn read_counter() -> u64 {
    #[cfg(test)]
    if let Some(c) = tests::fake_counter() {
        return c;
    }
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        // SAFETY: `rdtsc` has no preconditions on x86_64 (user mode may read it unless the
        // kernel forbids it, which it does not where the clock source is `tsc`).
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    {
        crate::monotonic_ns()
    }
}

/// The counter after every earlier instruction has finished (for anchors only).
fn read_counter_ordered() -> u64 {
    #[cfg(test)]
    if let Some(c) = tests::fake_counter() {
        return c;
    }
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        // SAFETY: `lfence` and `rdtsc` have no preconditions on x86_64 (SSE2 is baseline).
        unsafe {
            core::arch::x86_64::_mm_lfence();
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    {
        crate::monotonic_ns()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    std::thread_local! {
        /// When set: the counter reads CLOCK_MONOTONIC plus this offset, ns (1 tick = 1 ns).
        static FAKE_OFFSET: Cell<Option<i64>> = const { Cell::new(None) };
    }

    pub(super) fn fake_counter() -> Option<u64> {
        FAKE_OFFSET
            .get()
            .map(|off| crate::monotonic_ns().wrapping_add_signed(off))
    }

    /// Stamps from a counter that jumps by `jump_ns` once its rate is known: the clock must
    /// give the counter up at its next anchor and stay with CLOCK_MONOTONIC after it.
    fn counter_that_jumps(jump_ns: i64) {
        FAKE_OFFSET.set(Some(0));
        let mut c = StampClock::with_counter(true);
        // until the rate is measured (1 ms of stamping; a loaded machine may take longer to
        // give this thread that much: the deadline only ends a test that cannot pass)
        let deadline = crate::monotonic_ns() + 30_000_000_000;
        while c.mult == 0 && crate::monotonic_ns() < deadline {
            c.now_ns();
        }
        assert!(c.mult != 0 && c.counter, "the rate was measured");
        FAKE_OFFSET.set(Some(jump_ns));
        // one judged anchor with the jumped counter, then the fall back (an anchor is judged
        // when the one before it is recent: stamping on, the next ones are)
        let deadline = crate::monotonic_ns() + 30_000_000_000;
        while c.counter && crate::monotonic_ns() < deadline {
            c.now_ns();
        }
        assert!(!c.counter, "a jump of {jump_ns} ns was not noticed");
        // back on the clock: never before it, and after it only while the stamps the
        // jumped counter handed out are still ahead (stamps never go back)
        let last = c.now_ns();
        for _ in 0..1000 {
            let before = crate::monotonic_ns();
            let s = c.now_ns();
            let after = crate::monotonic_ns();
            assert!(
                s >= before && s <= after.max(last),
                "stamp {s} outside [{before}, {after}] (last {last})"
            );
        }
        FAKE_OFFSET.set(None);
    }

    #[test]
    fn a_counter_that_jumps_ahead_is_given_up_for_clock_gettime() {
        counter_that_jumps(400_000);
    }

    #[test]
    fn a_counter_that_goes_back_is_given_up_for_clock_gettime() {
        counter_that_jumps(-400_000);
    }

    /// The same fake counter without a jump stays in use: the check does not fire on an
    /// honest counter.
    #[test]
    fn an_honest_counter_stays_in_use() {
        FAKE_OFFSET.set(Some(0));
        let mut c = StampClock::with_counter(true);
        let end = crate::monotonic_ns() + 20_000_000;
        while crate::monotonic_ns() < end {
            c.now_ns();
        }
        assert!(c.counter && c.mult != 0);
        FAKE_OFFSET.set(None);
    }

    /// Every stamp lies between `clock_gettime` reads around it (give or take a bound far
    /// above the anchor error, far below what a latency figure resolves), and stamps never
    /// go back, over anchors and a rate re-measure.
    #[test]
    fn stamps_stay_with_clock_monotonic_and_never_go_back() {
        let mut c = StampClock::new();
        let (mut worst_early, mut worst_late, mut last) = (0u64, 0u64, 0u64);
        let end = crate::monotonic_ns() + 250_000_000;
        let mut n = 0u64;
        while crate::monotonic_ns() < end {
            let before = crate::monotonic_ns();
            let s = c.now_ns();
            let after = crate::monotonic_ns();
            assert!(s >= last, "stamp {s} after {last}: went back");
            last = s;
            worst_early = worst_early.max(before.saturating_sub(s));
            worst_late = worst_late.max(s.saturating_sub(after));
            n += 1;
        }
        assert!(n > 1000, "only {n} stamps");
        // 2 µs: a hundred times the anchor's error; a wrong rate or a missed re-anchor is
        // off by far more within the 250 ms run
        assert!(
            worst_early < 2_000 && worst_late < 2_000,
            "stamps {worst_early} ns early, {worst_late} ns late against the clock around them"
        );
        if counter_usable() {
            assert!(c.mult != 0, "the rate was never measured");
            assert!(c.counter, "the drift check gave an honest counter up");
        }
    }

    #[test]
    fn an_exact_clock_reads_clock_gettime_every_time() {
        let mut c = StampClock::with_counter(false);
        assert!(!c.counter);
        let before = crate::monotonic_ns();
        let s = c.now_ns();
        assert!(s >= before && s <= crate::monotonic_ns());
        assert_eq!(c.mult, 0);
    }
}
