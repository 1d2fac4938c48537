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
}

impl Pacer {
    /// A schedule of one item every `period_ns` (at least 1), the first due at `start_ns`.
    #[must_use]
    pub fn new(start_ns: u64, period_ns: u64) -> Pacer {
        Pacer {
            next: start_ns,
            gate: 0,
            period: period_ns.max(1),
        }
    }

    /// The next item to make at `now_ns`, if one may be made now: how late it is against its
    /// schedule (ns). Call it until it says `None`.
    pub fn take(&mut self, now_ns: u64) -> Option<u64> {
        // due on the schedule, not sooner than the catch-up allows, and never held back more
        // than SLACK_NS behind now (a stall during the catch-up does not become a burst)
        let at = self
            .next
            .max(self.gate)
            .max(now_ns.saturating_sub(SLACK_NS));
        if at > now_ns {
            return None;
        }
        let late = now_ns.saturating_sub(self.next);
        self.next += self.period;
        self.gate = at + self.period / CATCH_UP;
        Some(late)
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
        SLACK_NS / (period / CATCH_UP) + 1
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
}
