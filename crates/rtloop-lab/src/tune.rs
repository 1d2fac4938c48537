//! The ReadSize tuner (ONIX's tutorial, automated) and the rate sweep of liboni's
//! `onix-loadtest`.

use std::path::Path;

use rtloop_metrics::{fmt_ns, Summary, Table};
use serde::Serialize;

use crate::device::DeviceReport;
use crate::frame::{self, LoadTester};
use crate::host::HostReport;

/// How a step went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum Class {
    /// The FIFO was never used.
    #[serde(rename = "stable at 0 %")]
    StableZero,
    /// The FIFO was used now and then but always drained.
    #[serde(rename = "stable near 0 %")]
    StableNear,
    /// The FIFO filled up (rising PercentUsed or overflow).
    #[serde(rename = "unstable")]
    Unstable,
    /// The device did not make its frames at its rate over the measured window (by more than
    /// [`RATE_TOLERANCE`]): the machine did not give the emulator the CPU time, so the FIFO
    /// and the latency say nothing about this ReadSize.
    #[serde(rename = "overloaded")]
    Overloaded,
    /// The step could not run (for example ReadSize below the minimum).
    #[serde(rename = "error")]
    Error,
}

impl Class {
    /// Stable either way.
    #[must_use]
    pub fn stable(self) -> bool {
        matches!(self, Class::StableZero | Class::StableNear)
    }

    /// As ONIX's tutorial words it.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Class::StableZero => "stable at 0 %",
            Class::StableNear => "stable near 0 %",
            Class::Unstable => "unstable",
            Class::Overloaded => "overloaded",
            Class::Error => "error",
        }
    }
}

/// How far below its configured rate the device may fall over a measured window before the
/// run is overloaded: 2 %. Stalls of the emulator's own are made up at twice its rate
/// ([`crate::pacing`]), so a device that has the CPU time it needs keeps its rate to a
/// fraction of a percent; only one starved of it, or stopped near the end of the window, falls
/// short.
pub const RATE_TOLERANCE: f64 = 0.02;

/// The tuner recommends only from steps whose p99 is at most this many times the time a
/// block takes to fill (ReadSize over the data rate: a looped-back frame waits for the rest of
/// its block) plus the p99 of the bare loop sampled the same way right after the step
/// ([`crate::reference::bare_loop_paced`]). Quiet runs of 2xnp2 at 1024 B sit at 2-5 times
/// that; a loop whose tail is the machine's, not the ReadSize's, sits far above.
pub const TAIL_FACTOR: f64 = 10.0;

/// One step of a sweep.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Step {
    /// ReadSize, bytes.
    pub read_size: u64,
    /// Frames per second configured.
    pub fps: u64,
    /// Frames per second the device made over the measured window, if it reported.
    pub fps_achieved: Option<f64>,
    /// The verdict.
    pub class: Class,
    /// Closed-loop latency, if measured.
    pub latency: Option<Summary>,
    /// Largest PercentUsed.
    pub percent_used_max: f64,
    /// PercentUsed at the end.
    pub percent_used_last: f64,
    /// PercentUsed trend over the second half of the step, percent per second.
    pub percent_used_slope: f64,
    /// Data rate read, bytes/s.
    pub bytes_per_s: f64,
    /// What happened, in words.
    pub notes: String,
    /// p99 of the bare loop sampled as this step's loopbacks, measured right after it (the
    /// tuner measures it; a single load test reports its own `reference_paced`).
    pub reference_p99_ns: Option<u64>,
    /// The p99 a step may have to be recommended from: [`TAIL_FACTOR`] × (block fill time +
    /// `reference_p99_ns`).
    pub tail_bound_ns: Option<u64>,
    /// Whether a recommendation may come from this step: stable, the device kept its rate,
    /// and the p99 within `tail_bound_ns`.
    pub qualifies: bool,
}

impl Step {
    /// A step with no measurement (yet): `class` and `notes` say why.
    #[must_use]
    pub fn unmeasured(read_size: u64, fps: u64, class: Class, notes: String) -> Step {
        Step {
            read_size,
            fps,
            fps_achieved: None,
            class,
            latency: None,
            percent_used_max: 0.0,
            percent_used_last: 0.0,
            percent_used_slope: 0.0,
            bytes_per_s: 0.0,
            notes,
            reference_p99_ns: None,
            tail_bound_ns: None,
            qualifies: false,
        }
    }

    /// Judge the step's tail against the bare loop sampled the same way in the same run
    /// (`reference_p99_ns`, None if it could not be measured) and say whether a
    /// recommendation may come from it. `bytes_per_s` is the load's configured rate.
    pub fn judge_tail(&mut self, reference_p99_ns: Option<u64>, bytes_per_s: f64) {
        self.reference_p99_ns = reference_p99_ns;
        self.qualifies = false;
        if !self.class.stable() {
            return;
        }
        let (Some(r), Some(l)) = (reference_p99_ns, self.latency) else {
            self.notes
                .push_str("; no reference measured: not recommended from");
            return;
        };
        let fill_ns = self.read_size as f64 / bytes_per_s.max(1e-9) * 1e9;
        let bound = (TAIL_FACTOR * (fill_ns + r as f64)) as u64;
        self.tail_bound_ns = Some(bound);
        if l.count > 0 && l.p99_ns <= bound {
            self.qualifies = true;
        } else {
            self.notes.push_str(&format!(
                "; p99 {} is beyond {TAIL_FACTOR}x (block fill {} + reference p99 {}) = {}: the machine's tail, not recommended from",
                fmt_ns(l.p99_ns),
                fmt_ns(fill_ns as u64),
                fmt_ns(r),
                fmt_ns(bound)
            ));
        }
    }
}

/// Least-squares slope of (t, y).
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 3 {
        return 0.0;
    }
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let (num, den) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| {
        (a + (x - mx) * (y - my), b + (x - mx) * (x - mx))
    });
    if den == 0.0 {
        0.0
    } else {
        num / den
    }
}

/// Judge one run. `fifo_bytes` and `bytes_per_s` (the load's rate) turn the PercentUsed trend
/// into a deficit: a step is unstable when the FIFO still holds data at the end and grows by
/// more than 1 % of the data rate (ONIX's unstable 1024 B step grew by ~12 %).
#[must_use]
pub fn classify(
    read_size: u64,
    fps: u64,
    fifo_bytes: u64,
    bytes_per_s: f64,
    host: Option<&HostReport>,
    device: Option<&DeviceReport>,
    error: Option<&str>,
) -> Step {
    let mut step = Step {
        read_size,
        fps,
        fps_achieved: device.map(|d| d.fps_measured),
        reference_p99_ns: None,
        tail_bound_ns: None,
        qualifies: false,
        class: Class::Error,
        latency: host.map(|h| h.latency),
        percent_used_max: host.map_or(0.0, |h| h.percent_used_max),
        percent_used_last: host
            .and_then(|h| h.percent_used.last())
            .map_or(0.0, |p| p.1),
        percent_used_slope: 0.0,
        bytes_per_s: host.map_or(0.0, |h| h.bytes_per_s),
        notes: String::new(),
    };
    if device.is_some_and(|d| d.ended == "overflow") {
        step.class = Class::Unstable;
        step.percent_used_max = 100.0;
        step.notes = "FIFO overflow: acquisition stopped".into();
        return step;
    }
    let Some(h) = host else {
        step.notes = error.unwrap_or("no result").to_owned();
        return step;
    };
    // a device that did not make its frames leaves the FIFO empty and the loop idle: nothing
    // the host did can be judged from such a run
    let Some(d) = device else {
        step.notes = "the device's report is missing: whether it kept its rate is unknown".into();
        return step;
    };
    if d.seconds_measured <= 0.0 {
        step.notes = "the device measured no window (the run ended in its warm-up)".into();
        return step;
    }
    if d.fps_measured < (1.0 - RATE_TOLERANCE) * d.fps_configured {
        step.class = Class::Overloaded;
        step.notes = format!(
            "the device made {:.0} of {:.0} frames/s over the measured {:.2} s (more than {:.0} % short: the machine did not give it the CPU time), so this run says nothing about ReadSize {read_size}",
            d.fps_measured,
            d.fps_configured,
            d.seconds_measured,
            RATE_TOLERANCE * 100.0
        );
        return step;
    }
    let half = &h.percent_used[h.percent_used.len() / 2..];
    step.percent_used_slope = slope(half);
    if h.percent_used_max == 0.0 {
        step.class = Class::StableZero;
        step.notes = "the FIFO was never used".into();
    } else if step.percent_used_last > 0.0
        && step.percent_used_slope / 100.0 * fifo_bytes as f64 > 0.01 * bytes_per_s
    {
        step.class = Class::Unstable;
        step.notes = format!(
            "PercentUsed climbing ({:+.4} %/s, {:.0} kB/s short): the host reads slower than the device produces",
            step.percent_used_slope,
            step.percent_used_slope / 100.0 * fifo_bytes as f64 / 1e3
        );
    } else {
        step.class = Class::StableNear;
        step.notes = format!(
            "brief FIFO use (max {:.6} %) that drains",
            h.percent_used_max
        );
    }
    step
}

/// The result of a sweep.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Tuning {
    /// `"read size"` or `"rate"`.
    pub sweep: &'static str,
    /// The load.
    pub load: LoadTester,
    /// The smallest ReadSize any frame allows.
    pub min_read_size: u64,
    /// Every step, in the order run.
    pub steps: Vec<Step>,
    /// The recommended ReadSize (read-size sweep): the smallest step that qualifies
    /// ([`Step::qualifies`]) with `margin` qualifying sizes below it.
    pub recommended_read_size: Option<u64>,
    /// Why there is no recommendation, if there is none (read-size sweep).
    pub no_recommendation: Option<String>,
    /// The smallest stable ReadSize found.
    pub smallest_stable: Option<u64>,
    /// The last rate that was stable (rate sweep), frames/s, and its bytes/s.
    pub last_good_fps: Option<u64>,
    /// `last_good_fps` in bytes/s.
    pub last_good_bytes_per_s: Option<f64>,
}

/// Sweep ReadSize from `start` down by halves to the minimum (then one error row below it),
/// optionally bisect in steps of 4, and recommend the smallest stable size that has `margin`
/// stable sizes measured below it.
pub fn read_size_sweep<E>(
    lt: &LoadTester,
    start: u64,
    bisect: bool,
    margin: u32,
    run: &mut dyn FnMut(u64) -> Result<Step, E>,
) -> Result<Tuning, E> {
    let min = lt.min_read_size();
    let mut sizes = Vec::new();
    let mut s = frame::round4(start.max(min) as usize) as u64;
    while s >= min {
        sizes.push(s);
        if s / 2 < min && s != min {
            sizes.push(min);
            break;
        }
        s /= 2;
    }
    let mut steps: Vec<Step> = Vec::new();
    let mut smallest_stable = None;
    let mut first_unstable = None;
    for rs in sizes {
        let step = run(rs)?;
        let class = step.class;
        steps.push(step);
        if class.stable() {
            smallest_stable = Some(rs);
        } else if class != Class::Overloaded {
            // an overloaded step says nothing about its ReadSize: the sweep goes on
            first_unstable = Some(rs);
            break;
        }
    }
    if first_unstable.is_none() {
        // show what the minimum means: the next size down is refused before it starts
        let below = frame::round4((min / 2) as usize) as u64;
        if let Err(e) = frame::check_read_size(below, lt) {
            steps.push(Step::unmeasured(below, lt.fps, Class::Error, e.to_string()));
        }
    }
    if let (true, Some(mut hi), Some(mut lo)) = (bisect, smallest_stable, first_unstable) {
        for _ in 0..8 {
            if hi - lo <= 4 {
                break;
            }
            let mid = frame::round4(((lo + hi) / 2) as usize) as u64;
            if mid == hi || mid == lo {
                break;
            }
            let step = run(mid)?;
            let stable = step.class.stable();
            steps.push(step);
            if stable {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        smallest_stable = Some(hi);
    }
    // the safety margin: the recommendation has `margin` measured qualifying sizes below it
    // (or is the largest qualifying size measured); only steps that kept their rate with a
    // tail near the reference's qualify
    let mut good: Vec<u64> = steps
        .iter()
        .filter(|s| s.qualifies && s.class.stable())
        .map(|s| s.read_size)
        .collect();
    good.sort_unstable();
    good.dedup();
    let recommended = (!good.is_empty()).then(|| good[(margin as usize).min(good.len() - 1)]);
    let no_recommendation = recommended.is_none().then(|| why_none(&steps));
    Ok(Tuning {
        sweep: "read size",
        load: *lt,
        min_read_size: min,
        steps,
        recommended_read_size: recommended,
        no_recommendation,
        smallest_stable,
        last_good_fps: None,
        last_good_bytes_per_s: None,
    })
}

/// Why no step qualified, in words.
fn why_none(steps: &[Step]) -> String {
    let count = |c: Class| steps.iter().filter(|s| s.class == c).count();
    let (stable, overloaded) = (
        steps.iter().filter(|s| s.class.stable()).count(),
        count(Class::Overloaded),
    );
    if stable == 0 && overloaded > 0 {
        format!(
            "no ReadSize qualifies: {overloaded} step(s) overloaded (the device did not keep its rate) and none stable; free the machine's CPUs and run again"
        )
    } else if stable > 0 {
        format!(
            "no ReadSize qualifies: {stable} step(s) stable but none with a p99 within {TAIL_FACTOR}x (block fill + the reference's p99){}; the machine's tail dominates, run again when it is quieter",
            if overloaded > 0 {
                format!(", {overloaded} overloaded")
            } else {
                String::new()
            }
        )
    } else {
        "no stable ReadSize: the host cannot keep up with this load on this transport".into()
    }
}

/// liboni's onix-loadtest: hold `read_size`, raise the rate ×10 from 100 Hz until a step is
/// unstable, then in steps of the last good rate, then of a tenth of it.
pub fn rate_sweep<E>(
    lt: &LoadTester,
    read_size: u64,
    run: &mut dyn FnMut(u64, u64) -> Result<Step, E>,
) -> Result<Tuning, E> {
    let mut steps = Vec::new();
    let mut good: Option<u64> = None;
    let allowed = |fps: u64| LoadTester { fps, ..*lt }.validate().is_ok();
    let mut try_rate = |fps: u64, steps: &mut Vec<Step>| -> Result<bool, E> {
        if !allowed(fps) {
            return Ok(false);
        }
        let s = run(read_size, fps)?;
        let ok = s.class.stable();
        steps.push(s);
        Ok(ok)
    };
    let mut fps = 100;
    while try_rate(fps, &mut steps)? {
        good = Some(fps);
        fps *= 10;
    }
    for div in [1u64, 10] {
        let Some(base) = good else { break };
        let inc = (base / div).max(1);
        let mut f = base + inc;
        while try_rate(f, &mut steps)? {
            good = Some(f);
            f += inc;
        }
    }
    Ok(Tuning {
        sweep: "rate",
        load: *lt,
        min_read_size: lt.min_read_size(),
        steps,
        recommended_read_size: None,
        no_recommendation: None,
        smallest_stable: None,
        last_good_fps: good,
        last_good_bytes_per_s: good.map(|f| LoadTester { fps: f, ..*lt }.bytes_per_s()),
    })
}

/// The ONIX-style table.
#[must_use]
pub fn table(t: &Tuning) -> String {
    let mut tab = Table::new(&[
        "ReadSize",
        "frames/s made (of configured)",
        "latency p50 / p99 / p99.9",
        "p99 bound (reference p99)",
        "buffer usage (max, last)",
        "class",
        "notes",
    ]);
    for s in &t.steps {
        tab.row(&[
            format!("{} B", s.read_size),
            s.fps_achieved.map_or(format!("- (of {})", s.fps), |f| {
                format!("{f:.0} (of {})", s.fps)
            }),
            s.latency.map_or("-".into(), |l| {
                format!(
                    "{} / {} / {}",
                    fmt_ns(l.p50_ns),
                    fmt_ns(l.p99_ns),
                    fmt_ns(l.p999_ns)
                )
            }),
            match (s.tail_bound_ns, s.reference_p99_ns) {
                (Some(b), Some(r)) => format!("{} ({})", fmt_ns(b), fmt_ns(r)),
                _ => "-".into(),
            },
            format!("{:.4} %, {:.4} %", s.percent_used_max, s.percent_used_last),
            s.class.label().to_owned(),
            s.notes.clone(),
        ]);
    }
    let mut out = tab.render();
    if let Some(r) = t.recommended_read_size {
        out.push_str(&format!(
            "\nrecommended ReadSize: {r} B (smallest stable {} B, minimum {} B; only steps that kept their rate with a p99 within {TAIL_FACTOR}x block fill + the reference's p99 count)\n",
            t.smallest_stable.unwrap_or(0),
            t.min_read_size
        ));
    } else if let Some(why) = &t.no_recommendation {
        out.push_str(&format!("\n{why}\n"));
    }
    if let Some(f) = t.last_good_fps {
        out.push_str(&format!(
            "\nlast good rate: {f} frames/s = {:.1} MB/s\n",
            t.last_good_bytes_per_s.unwrap_or(0.0) / 1e6
        ));
    }
    out
}

/// Latency against ReadSize (or rate), p50 and p99, log-log.
pub fn plot(path: &Path, t: &Tuning) -> Result<(), rtloop_metrics::charts::ChartError> {
    let x = |s: &Step| {
        if t.sweep == "rate" {
            s.fps as f64
        } else {
            s.read_size as f64
        }
    };
    let pts = |f: &dyn Fn(&Summary) -> u64| -> Vec<(f64, f64)> {
        t.steps
            .iter()
            .filter_map(|s| s.latency.map(|l| (x(s), f(&l) as f64 / 1e3)))
            .collect()
    };
    let p50 = pts(&|l| l.p50_ns);
    let p99 = pts(&|l| l.p99_ns);
    // the sizes the sweep found: where it became stable and what it recommends
    let mut marks: Vec<(f64, &str)> = Vec::new();
    if t.sweep != "rate" {
        if let Some(s) = t.smallest_stable {
            marks.push((s as f64, "smallest stable ReadSize"));
        }
        if let Some(r) = t.recommended_read_size {
            marks.push((r as f64, "recommended ReadSize"));
        }
    } else if let Some(f) = t.last_good_fps {
        marks.push((f as f64, "highest stable rate"));
    }
    rtloop_metrics::charts::loglog_png(
        path,
        &format!("closed-loop latency by {}", t.sweep),
        if t.sweep == "rate" {
            "frames per second"
        } else {
            "ReadSize (bytes)"
        },
        "microseconds",
        &[("p50", &p50), ("p99", &p99)],
        &marks,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step as the tuner judges it: a stable one kept its rate and its tail qualifies.
    fn step(rs: u64, class: Class) -> Step {
        let mut s = Step::unmeasured(rs, 60_000, class, String::new());
        s.qualifies = class.stable();
        s
    }

    /// A device report with the rate made over a 10 s measured window.
    fn device(ended: &str, fps_measured: f64, fps_configured: f64) -> DeviceReport {
        DeviceReport {
            ended: ended.into(),
            frames: 0,
            bytes: 0,
            seconds: 11.0,
            fps_achieved: fps_measured,
            fps_configured,
            fifo_high_water: 0,
            fifo_high_water_percent: 0.0,
            fifo_high_water_run: 0,
            loopbacks: 0,
            preempted: None,
            burst_max_frames: 0,
            burst_window_ns: 0,
            frames_measured: (fps_measured * 10.0) as u64,
            seconds_measured: 10.0,
            fps_measured,
            lateness: rtloop_metrics::LatencyHistogram::new().summary(),
        }
    }

    fn host(percent_used: &[(f64, f64)]) -> HostReport {
        let mut hist = rtloop_metrics::LatencyHistogram::new();
        for k in 0..1000u64 {
            hist.record(20_000 + k * 10);
        }
        HostReport {
            read_size: 1024,
            seconds: 10.0,
            blocks: 1,
            bytes: 1024,
            frames: 1,
            monitor_frames: 1,
            heartbeats: 1,
            loopbacks_sent: 1000,
            latency: hist.summary(),
            histogram_us: vec![0; 1000],
            beyond_1ms: 0,
            percent_used: percent_used.to_vec(),
            percent_used_max: percent_used.iter().map(|p| p.1).fold(0.0, f64::max),
            queue_mean: 1.0,
            queue_max: 1,
            bytes_per_s: 1.0,
            preempted: None,
            work: None,
            work_events: 0,
            hist,
        }
    }

    /// The run of the issue: the FIFO never used, but the device made 34,538 of its 60,000
    /// frames/s. It is overloaded, never stable, and says the numbers.
    #[test]
    fn a_device_that_did_not_keep_its_rate_is_overloaded_whatever_the_fifo_shows() {
        let h = host(&[(1.0, 0.0), (2.0, 0.0)]);
        let short = device("stopped", 34_538.0, 60_000.0);
        let s = classify(1024, 60_000, 1 << 28, 49e6, Some(&h), Some(&short), None);
        assert_eq!(s.class, Class::Overloaded, "{}", s.notes);
        assert!(
            s.notes
                .starts_with("the device made 34538 of 60000 frames/s"),
            "{}",
            s.notes
        );
        assert_eq!(s.fps_achieved, Some(34_538.0));
        // within the tolerance it is judged by its FIFO as before
        let kept = device("stopped", 59_000.0, 60_000.0);
        let s = classify(1024, 60_000, 1 << 28, 49e6, Some(&h), Some(&kept), None);
        assert_eq!(s.class, Class::StableZero, "{}", s.notes);
        // no device report: nobody can say it kept its rate
        let s = classify(1024, 60_000, 1 << 28, 49e6, Some(&h), None, None);
        assert_eq!(s.class, Class::Error, "{}", s.notes);
    }

    #[test]
    fn only_steps_with_a_tail_near_the_reference_qualify() {
        let h = host(&[(1.0, 0.0)]);
        let kept = device("stopped", 60_000.0, 60_000.0);
        // 1024 B at 51.2 MB/s fill in 20 us; the p99 is about 29.9 us
        let mut s = classify(1024, 60_000, 1 << 28, 49e6, Some(&h), Some(&kept), None);
        s.judge_tail(Some(1_000), 51.2e6);
        assert!(s.qualifies, "{}", s.notes);
        assert_eq!(s.tail_bound_ns, Some(210_000));
        // a reference p99 in the nanoseconds does not hide a block's fill time, but a p99
        // far beyond both is the machine's
        let mut slow = h.clone();
        let mut hist = rtloop_metrics::LatencyHistogram::new();
        for k in 0..1000u64 {
            hist.record(if k < 980 { 20_000 } else { 5_000_000 });
        }
        slow.latency = hist.summary();
        let mut s = classify(1024, 60_000, 1 << 28, 49e6, Some(&slow), Some(&kept), None);
        s.judge_tail(Some(1_000), 49e6);
        assert!(!s.qualifies);
        assert!(s.notes.contains("not recommended from"), "{}", s.notes);
        // no reference: not recommended from either
        let mut s = classify(1024, 60_000, 1 << 28, 49e6, Some(&h), Some(&kept), None);
        s.judge_tail(None, 49e6);
        assert!(!s.qualifies, "{}", s.notes);
        // an overloaded step never qualifies
        let short = device("stopped", 30_000.0, 60_000.0);
        let mut s = classify(1024, 60_000, 1 << 28, 49e6, Some(&h), Some(&short), None);
        s.judge_tail(Some(1_000), 49e6);
        assert!(!s.qualifies);
    }

    #[test]
    fn overloaded_steps_are_never_recommended_and_the_sweep_says_why() {
        let lt = frame::PROFILES[0].load;
        // every step overloaded: the sweep goes down to the minimum and recommends nothing
        let t = read_size_sweep::<()>(&lt, 4096, false, 0, &mut |rs| {
            Ok(step(rs, Class::Overloaded))
        })
        .unwrap();
        let sizes: Vec<u64> = t.steps.iter().map(|s| s.read_size).collect();
        assert_eq!(sizes, [4096, 2048, 1024, 816, 408]);
        assert_eq!(t.recommended_read_size, None);
        let why = t.no_recommendation.as_deref().unwrap();
        assert!(why.contains("4 step(s) overloaded"), "{why}");
        assert!(table(&t).contains(why));
        // overloaded sizes in between are skipped, stable ones with a tail near the
        // reference recommended from
        let t = read_size_sweep::<()>(&lt, 4096, false, 0, &mut |rs| {
            Ok(step(
                rs,
                if rs == 1024 || rs == 816 {
                    Class::Overloaded
                } else {
                    Class::StableNear
                },
            ))
        })
        .unwrap();
        assert_eq!(t.recommended_read_size, Some(2048));
        // stable everywhere, but no tail near the reference: no recommendation
        let t = read_size_sweep::<()>(&lt, 4096, false, 0, &mut |rs| {
            let mut s = step(rs, Class::StableZero);
            s.qualifies = false;
            Ok(s)
        })
        .unwrap();
        assert_eq!(t.recommended_read_size, None);
        assert!(t
            .no_recommendation
            .unwrap()
            .contains("none with a p99 within"));
    }

    #[test]
    fn sweep_halves_to_the_minimum_and_recommends_with_a_margin() {
        let lt = frame::PROFILES[0].load; // minimum 816
        let mut ran = Vec::new();
        let t = read_size_sweep::<()>(&lt, 16384, false, 1, &mut |rs| {
            ran.push(rs);
            Ok(step(
                rs,
                if rs >= 2048 {
                    Class::StableZero
                } else {
                    Class::Unstable
                },
            ))
        })
        .unwrap();
        assert_eq!(ran, [16384, 8192, 4096, 2048, 1024]);
        assert_eq!(t.smallest_stable, Some(2048));
        assert_eq!(t.recommended_read_size, Some(4096));
        // everything stable: down to the minimum, then the refused size below it
        let t = read_size_sweep::<()>(&lt, 16384, false, 0, &mut |rs| {
            Ok(step(rs, Class::StableNear))
        })
        .unwrap();
        let sizes: Vec<u64> = t.steps.iter().map(|s| s.read_size).collect();
        assert_eq!(sizes, [16384, 8192, 4096, 2048, 1024, 816, 408]);
        assert_eq!(t.steps.last().unwrap().class, Class::Error);
        assert!(t.steps.last().unwrap().notes.contains("at least 816"));
        assert_eq!(t.recommended_read_size, Some(816));
    }

    #[test]
    fn bisection_narrows_in_steps_of_4() {
        let lt = frame::PROFILES[0].load;
        let t = read_size_sweep::<()>(&lt, 4096, true, 0, &mut |rs| {
            Ok(step(
                rs,
                if rs >= 1500 {
                    Class::StableZero
                } else {
                    Class::Unstable
                },
            ))
        })
        .unwrap();
        let s = t.smallest_stable.unwrap();
        assert!((1500..1520).contains(&s), "{s}");
        assert_eq!(s % 4, 0);
    }

    #[test]
    fn rate_sweep_finds_the_last_good_rate() {
        let lt = frame::PROFILES[1].load;
        let t = rate_sweep::<()>(&lt, 2048, &mut |rs, fps| {
            Ok(step(
                rs,
                if fps <= 45_000 {
                    Class::StableZero
                } else {
                    Class::Unstable
                },
            ))
        })
        .unwrap();
        // x10 to 10 kHz, +10 kHz to 40 kHz, +4 kHz to 44 kHz: within a tenth of the limit
        assert_eq!(t.last_good_fps, Some(44_000));
    }

    #[test]
    fn classification() {
        let rising: Vec<(f64, f64)> = (0..20).map(|i| (i as f64 * 0.1, i as f64)).collect();
        assert!(slope(&rising) > 9.0);
        assert_eq!(slope(&[(0.0, 1.0), (1.0, 1.0), (2.0, 1.0)]), 0.0);
        let overflow = device("overflow", 0.0, 0.0);
        assert_eq!(
            classify(1024, 1, 1 << 20, 1e6, None, Some(&overflow), Some("x")).class,
            Class::Unstable
        );
        assert_eq!(
            classify(1024, 1, 1 << 20, 1e6, None, None, Some("boom")).class,
            Class::Error
        );
    }
}
