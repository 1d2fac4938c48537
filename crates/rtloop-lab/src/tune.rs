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
            Class::Error => "error",
        }
    }
}

/// One step of a sweep.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// ReadSize, bytes.
    pub read_size: u64,
    /// Frames per second.
    pub fps: u64,
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
pub struct Tuning {
    /// `"read size"` or `"rate"`.
    pub sweep: &'static str,
    /// The load.
    pub load: LoadTester,
    /// The smallest ReadSize any frame allows.
    pub min_read_size: u64,
    /// Every step, in the order run.
    pub steps: Vec<Step>,
    /// The recommended ReadSize (read-size sweep).
    pub recommended_read_size: Option<u64>,
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
        let stable = step.class.stable();
        steps.push(step);
        if stable {
            smallest_stable = Some(rs);
        } else {
            first_unstable = Some(rs);
            break;
        }
    }
    if first_unstable.is_none() {
        // show what the minimum means: the next size down is refused before it starts
        let below = frame::round4((min / 2) as usize) as u64;
        if let Err(e) = frame::check_read_size(below, lt) {
            steps.push(Step {
                read_size: below,
                fps: lt.fps,
                class: Class::Error,
                latency: None,
                percent_used_max: 0.0,
                percent_used_last: 0.0,
                percent_used_slope: 0.0,
                bytes_per_s: 0.0,
                notes: e.to_string(),
            });
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
    // the safety margin: the recommendation has `margin` measured stable sizes below it (or
    // is the largest stable size measured)
    let mut stable: Vec<u64> = steps
        .iter()
        .filter(|s| s.class.stable())
        .map(|s| s.read_size)
        .collect();
    stable.sort_unstable();
    stable.dedup();
    let recommended = (!stable.is_empty()).then(|| stable[(margin as usize).min(stable.len() - 1)]);
    Ok(Tuning {
        sweep: "read size",
        load: *lt,
        min_read_size: min,
        steps,
        recommended_read_size: recommended,
        smallest_stable,
        last_good_fps: None,
        last_good_bytes_per_s: None,
    })
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
        "frames/s",
        "latency p50 / p99 / p99.9",
        "buffer usage (max, last)",
        "class",
        "notes",
    ]);
    for s in &t.steps {
        tab.row(&[
            format!("{} B", s.read_size),
            s.fps.to_string(),
            s.latency.map_or("-".into(), |l| {
                format!(
                    "{} / {} / {}",
                    fmt_ns(l.p50_ns),
                    fmt_ns(l.p99_ns),
                    fmt_ns(l.p999_ns)
                )
            }),
            format!("{:.4} %, {:.4} %", s.percent_used_max, s.percent_used_last),
            s.class.label().to_owned(),
            s.notes.clone(),
        ]);
    }
    let mut out = tab.render();
    if let Some(r) = t.recommended_read_size {
        out.push_str(&format!(
            "\nrecommended ReadSize: {r} B (smallest stable {} B, minimum {} B)\n",
            t.smallest_stable.unwrap_or(0),
            t.min_read_size
        ));
    } else if t.sweep == "read size" {
        out.push_str(
            "\nno stable ReadSize: the host cannot keep up with this load on this transport\n",
        );
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

    fn step(rs: u64, class: Class) -> Step {
        Step {
            read_size: rs,
            fps: 60_000,
            class,
            latency: None,
            percent_used_max: 0.0,
            percent_used_last: 0.0,
            percent_used_slope: 0.0,
            bytes_per_s: 0.0,
            notes: String::new(),
        }
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
        let overflow = DeviceReport {
            ended: "overflow".into(),
            frames: 0,
            bytes: 0,
            seconds: 1.0,
            fps_achieved: 0.0,
            fps_configured: 0.0,
            fifo_high_water: 0,
            fifo_high_water_percent: 100.0,
            fifo_high_water_run: 0,
            loopbacks: 0,
            preempted: None,
            burst_max_frames: 0,
            lateness: rtloop_metrics::LatencyHistogram::new().summary(),
        };
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
