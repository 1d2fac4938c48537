//! When an emulated source makes its next item: on its schedule, and after a stall of its own
//! process, at no more than [`CATCH_UP`] times its rate until it is back on schedule.
//!
//! Real hardware makes every frame on time. This emulator is a process, and the OS or the
//! hypervisor now and then stops it for milliseconds. Making every missed frame at once when
//! it runs again would hand the host a burst real hardware never sends: the last frames of a
//! 5 ms burst wait behind all the others, and their loopbacks would charge the emulator's stall
//! to the host and the transport. So a source that falls more than [`SLACK_NS`] behind makes
//! up the difference at twice its rate, each item stamped when it is made: every item is still
//! made (the rate achieved stays the rate configured), and none waits behind a burst.

/// How much faster than its rate a source that fell behind makes up the difference.
pub const CATCH_UP: u64 = 2;

/// How far behind its schedule a source may fall before it catches up at [`CATCH_UP`] times
/// its rate (ns). Below it, items are made as their time comes, several in one step if the
/// step came late; so the slowest steps at the highest rates still keep up.
pub const SLACK_NS: u64 = 50_000;

/// One source's schedule.
#[derive(Debug, Clone)]
pub struct Pacer {
    /// When the next item is due on the schedule.
    next: u64,
    /// The earliest the next item may be made while catching up.
    gate: u64,
    period: u64,
    /// Time between items while catching up: period / CATCH_UP (at least 1 ns).
    spacing: u64,
    /// The `now` of the last step, and the lengths of the last two steps (ns).
    last_now: u64,
    steps: [u64; 2],
}

impl Pacer {
    /// A schedule of one item every `period_ns`, the first due at `start_ns`. A period below
    /// [`CATCH_UP`] ns is taken as that (catching up needs a spacing of at least 1 ns; no
    /// source comes near: the load tester's shortest period is 36 ns).
    #[must_use]
    pub fn new(start_ns: u64, period_ns: u64) -> Pacer {
        let period = period_ns.max(CATCH_UP);
        Pacer {
            next: start_ns,
            gate: 0,
            period,
            spacing: period / CATCH_UP,
            last_now: start_ns,
            steps: [0; 2],
        }
    }

    /// How far back from now items may still be made at once: SLACK_NS, or CATCH_UP times
    /// the steps' own length if they are longer (a source whose every step is slow must
    /// still keep up). The shorter of the last two steps: a stall is one long step, and
    /// neither it nor the step after it may widen the window into a burst.
    fn window(&self) -> u64 {
        SLACK_NS.max(CATCH_UP.saturating_mul(self.steps[0].min(self.steps[1])))
    }

    /// The next item to make at `now_ns`, if one may be made now: how late it is against its
    /// schedule (ns). Call it until it says `None`.
    pub fn take(&mut self, now_ns: u64) -> Option<u64> {
        if now_ns > self.last_now {
            self.steps = [self.steps[1], now_ns - self.last_now];
            self.last_now = now_ns;
        }
        // due on the schedule, not sooner than the catch-up allows, and never held back more
        // than the window behind now (a stall during the catch-up does not become a burst)
        let at = self
            .next
            .max(self.gate)
            .max(now_ns.saturating_sub(self.window()));
        if at > now_ns {
            return None;
        }
        let late = now_ns.saturating_sub(self.next);
        self.next += self.period;
        self.gate = at + self.spacing;
        Some(late)
    }

    /// How far back from the last `now` items may be made at once (ns): the most one step
    /// may make is this over `period / CATCH_UP`, plus one. It is SLACK_NS unless the
    /// source's own last two steps were both longer, so it follows the schedule the source
    /// achieves, not a fixed figure.
    #[must_use]
    pub fn window_ns(&self) -> u64 {
        self.window()
    }

    /// The most items one step with catch-up window `window_ns` may make at `period_ns`
    /// (see [`Pacer::window_ns`]).
    #[must_use]
    pub fn most_in_one_step(window_ns: u64, period_ns: u64) -> u64 {
        window_ns / (period_ns.max(CATCH_UP) / CATCH_UP) + 1
    }

    /// When the next item is due on the schedule (ns).
    #[must_use]
    pub fn next_due(&self) -> u64 {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The most one step may make after a stall: the items spaced period / CATCH_UP apart
    /// in the last SLACK_NS.
    fn most_in_one_step(period: u64) -> u64 {
        Pacer::most_in_one_step(SLACK_NS, period)
    }

    /// Items made in one step at `now`.
    fn step(p: &mut Pacer, now: u64) -> u64 {
        std::iter::from_fn(|| p.take(now)).count() as u64
    }

    #[test]
    fn on_schedule_one_item_per_period_and_none_late() {
        let mut p = Pacer::new(1_000, 100);
        for k in 0..1000 {
            let now = 1_000 + k * 100;
            assert_eq!(p.take(now), Some(0), "item {k}");
            assert_eq!(p.take(now), None);
            assert_eq!(p.take(now + 99), None, "nothing before its time");
        }
    }

    #[test]
    fn steps_slower_than_the_period_make_several_items_and_keep_up() {
        // 36 ns apart (the load tester's top rate) and a step every 1 µs
        let mut p = Pacer::new(0, 36);
        let mut made = 0;
        for k in 1..=10_000u64 {
            made += step(&mut p, k * 1_000);
        }
        let due = 10_000 * 1_000 / 36 + 1;
        assert_eq!(made, due, "every item due was made");
    }

    #[test]
    fn after_a_stall_the_source_catches_up_at_twice_its_rate_not_in_one_burst() {
        let period = 16_667; // 60 kHz
        let mut p = Pacer::new(0, period);
        let mut now = 0;
        let mut made = 0u64;
        while now < 10_000_000 {
            made += step(&mut p, now);
            now += 1_000;
        }
        // stopped for 50 ms
        now += 50_000_000;
        let mut most = 0;
        let burst_bound = most_in_one_step(period);
        while p.next_due() + SLACK_NS < now || most == 0 {
            let n = step(&mut p, now);
            most = most.max(n);
            made += n;
            now += 1_000;
        }
        assert!(
            most <= burst_bound,
            "the most items in one step after a 50 ms stall: {most}, bound {burst_bound}"
        );
        // back on schedule within about the stall's length again, having made every item due
        let back = now;
        assert!(
            back < 10_000_000 + 50_000_000 + 50_000_000 + 2 * SLACK_NS,
            "{back}"
        );
        while now < back + 1_000_000 {
            made += step(&mut p, now);
            now += 1_000;
        }
        let due = (now - 1_000) / period + 1;
        assert!(made + 1 >= due && made <= due, "made {made}, due {due}");
    }

    #[test]
    fn a_stall_during_the_catch_up_does_not_become_a_burst_either() {
        let period = 10_000;
        let mut p = Pacer::new(0, period);
        let bound = most_in_one_step(period);
        let mut now = 20_000_000; // 20 ms late from the start
        let mut most = 0;
        for k in 0..5_000 {
            // stopped again for 3 ms every 1000 steps
            now += if k % 1000 == 999 { 3_000_000 } else { 1_000 };
            most = most.max(step(&mut p, now));
        }
        assert!(most <= bound, "{most} > {bound}");
    }
    /// Steps far longer than SLACK_NS each (a slow build, a source moving a lot of data per
    /// step): the source still catches up after a stall and then keeps its schedule.
    #[test]
    fn a_source_whose_every_step_is_slow_still_keeps_up() {
        for (period, step_ns) in [(16_664, 200_000), (36, 80_000), (3, 120_000)] {
            let mut p = Pacer::new(0, period);
            let mut made = 0u64;
            // 50 ms behind from the start, then steps of step_ns
            let mut now = 50_000_000;
            for _ in 0..4_000 {
                made += step(&mut p, now);
                now += step_ns;
            }
            let last = now - step_ns;
            let due = last / period + 1;
            assert_eq!(made, due, "period {period}, steps of {step_ns} ns");
        }
    }

    #[test]
    fn a_period_below_two_nanoseconds_is_taken_as_two_and_still_catches_up_without_a_burst() {
        let mut p = Pacer::new(0, 1);
        let mut made = 0;
        let mut now = 0;
        for _ in 0..100 {
            made += step(&mut p, now);
            now += 10;
        }
        assert_eq!(made, (now - 10) / 2 + 1, "one item every 2 ns");
        now += 5_000_000;
        assert!(step(&mut p, now) <= most_in_one_step(2));
    }
}
