//! Threshold-crossing spike detection, causal and per channel.
//!
//! Each channel's noise is a robust running estimate, sigma = median(|x|) / 0.6745 (the
//! median absolute deviation of a band-passed signal, whose median is 0), taken over the
//! last `noise_window` samples (every one of them up to [`NOISE_VALUES`], evenly spaced ones
//! beyond: the median of a few thousand values is as good an estimate, and costs a fraction)
//! and renewed every `noise_window` samples. Values that are not noise are left out: NaN and
//! infinities, exact zeros, a value equal to one of the channel's last [`REPEATS`] kept for
//! the window (every `noise_window / NOISE_VALUES`-th sample, across windows), and values
//! below [`HELD_BELOW`] of the lowest of the channel's last [`LEVELS`] noise levels (median
//! |x|; before the first, of the window's own 90th percentile). An input that stalls, held at
//! its last sample, comes out of a band-pass as a line decaying for a few ms onto one value
//! or a cycle (of 12 samples at 30 kHz, up to 72 at other rates), of any size; counted as
//! noise, it pulled the threshold down to where every noise sample crossed it. A window with
//! less than a quarter of its values left keeps the channel's threshold, for at most
//! [`KEPT_MAX`] windows in a row; the next is estimated from all its values left but the
//! floor (the noise really fell a thousandfold), or, with less than a quarter of them, gives
//! an infinite threshold (flat, held or dead: nothing detected until noise comes back). The
//! lowest of several levels, not the last, so that up to [`LEVELS`] - 1 windows of a large
//! artifact do not lift the floor above the noise after them; after longer ones, a channel
//! whose noise is a thousandfold below the artifact's is blind for [`KEPT_MAX`] windows more.
//! The few ms of decay before the cycle are counted, which lowers the estimate of a window
//! of a few thousand samples that a stall mostly fills (by a quarter at 3000 samples); a
//! cycle longer than [`REPEATS`] kept values is left out only below the floor. A coarsely
//! quantised channel's repeated values are left out as well, so its threshold errs high or
//! is infinite: give the detector a band-passed signal. A spike is a
//! crossing of `k * sigma` (below `-k sigma`, above `+k sigma`, or either), at least
//! `refractory` samples after the channel's last spike. Its event is sent when the peak is
//! known: when the signal comes back within the threshold or `peak_window` samples after
//! the crossing, whichever is first; the event's sample is the peak's.
//!
//! Delay: an event is sent at most `peak_window` samples after the crossing (its peak is at
//! most that far back). Nothing is detected during the first `noise_window` samples, while
//! the first noise estimate is taken.

use num_traits::Float;

/// Which crossings count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sign {
    /// Below `-k sigma` (extracellular spikes are mostly negative).
    Negative,
    /// Above `+k sigma`.
    Positive,
    /// Either.
    Both,
}

/// The most values per channel a noise estimate takes.
pub const NOISE_VALUES: usize = 2048;

/// Values below this fraction of a channel's noise level (median |x|) are not noise but a
/// held or dead input, and are left out of the next estimate. Gaussian noise has 0.05 % of
/// its |x| there, so leaving them out moves the median by about 0.06 %.
pub const HELD_BELOW: f64 = 1e-3;

/// A value of the noise window equal to one of the channel's last this many kept is a held
/// input's: a stalled input held at its last sample settles, after a band-pass in floating
/// point, on one value or a cycle of them, of any size (about 1e-6 to 1e-5 of the held
/// sample's offset, so above the floor of [`HELD_BELOW`] with offsets of millivolts), where
/// noise never repeats a value exactly. The cycle is 12 samples at 30 kHz (a 300-6000 Hz
/// Butterworth of order 2); at other rates up to 72, and a cycle longer than this many kept
/// values (every `noise_window / NOISE_VALUES`-th sample) is caught only below the floor.
pub const REPEATS: usize = 24;

/// Noise levels remembered per channel; the floor of [`HELD_BELOW`] follows the lowest.
pub const LEVELS: usize = 4;

/// Windows in a row a channel keeps its threshold for lack of values above the floor; the
/// next one is estimated from all its values (or, with less than a quarter of them non-zero,
/// gives an infinite threshold: a flat channel).
pub const KEPT_MAX: u32 = 3;

/// Detection settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpikeConfig {
    /// Channels per sample.
    pub channels: usize,
    /// The threshold in noise sigmas (typically 4–6).
    pub k: f64,
    /// Which crossings count.
    pub sign: Sign,
    /// Samples after a spike in which its channel detects none.
    pub refractory: usize,
    /// Samples after a crossing within which its peak is looked for.
    pub peak_window: usize,
    /// Samples the noise estimate is taken over (and renewed after).
    pub noise_window: usize,
}

/// A detected spike.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spike<T> {
    /// Its channel.
    pub channel: usize,
    /// The sample of its peak (counted from the detector's first sample).
    pub sample: u64,
    /// The value at the peak.
    pub peak: T,
}

/// Bad detection settings or chunks, saying what is allowed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpikeError {
    /// No channel.
    #[error("spike detection needs at least one channel")]
    NoChannels,
    /// A threshold that is not positive.
    #[error("threshold k = {0}: give a finite number of noise sigmas > 0 (typically 4 to 6)")]
    Threshold(f64),
    /// A window of no samples.
    #[error("{0} must be at least 1 sample")]
    Window(&'static str),
    /// A chunk that is not whole samples.
    #[error(transparent)]
    Chunk(#[from] crate::ChunkError),
}

/// One channel's crossing in progress.
#[derive(Debug, Clone, Copy)]
struct Open<T> {
    peak: T,
    at: u64,
    until: u64,
}

/// A causal threshold-crossing spike detector over `[samples, channels]` chunks.
#[derive(Debug, Clone)]
pub struct SpikeDetector<T> {
    cfg: SpikeConfig,
    /// Samples seen.
    n: u64,
    /// Every `every`-th sample of the noise window goes into `recent`.
    every: u64,
    /// Rows of `recent`.
    rows: usize,
    /// The noise window's kept |x|, sample-major (`rows` rows of `channels`), so that a
    /// sample's values are stored side by side.
    recent: Vec<T>,
    /// The selection's working copy of one channel's window (made once, here).
    scratch: Vec<T>,
    /// Each channel's threshold (infinite until the first estimate).
    threshold: Vec<T>,
    /// Each channel's last [`LEVELS`] noise levels, median |x| (infinite: none yet).
    levels: Vec<T>,
    /// Each channel's windows in a row kept for lack of values above the floor.
    kept: Vec<u32>,
    /// The |x| last kept for the noise window, as they were: the newest and the [`REPEATS`]
    /// before it (`REPEATS + 1` rows of `channels`; NaN, equal to nothing, at first), and the
    /// row the next goes in.
    last: Vec<T>,
    last_at: usize,
    /// Each channel's crossing in progress.
    open: Vec<Option<Open<T>>>,
    /// Each channel's last spike's sample plus the refractory period.
    quiet_until: Vec<u64>,
    /// Channels with a crossing in progress.
    opened: usize,
}

impl<T: Float> SpikeDetector<T> {
    /// A detector for `cfg`, before its first sample.
    ///
    /// # Errors
    /// No channel, a threshold that is not positive, or a window of no samples.
    pub fn new(cfg: SpikeConfig) -> Result<Self, SpikeError> {
        if cfg.channels == 0 {
            return Err(SpikeError::NoChannels);
        }
        if !(cfg.k.is_finite() && cfg.k > 0.0) {
            return Err(SpikeError::Threshold(cfg.k));
        }
        if cfg.noise_window == 0 {
            return Err(SpikeError::Window("the noise window"));
        }
        if cfg.peak_window == 0 {
            return Err(SpikeError::Window("the peak window"));
        }
        let ch = cfg.channels;
        let every = cfg.noise_window.div_ceil(NOISE_VALUES);
        let rows = cfg.noise_window.div_ceil(every);
        Ok(SpikeDetector {
            n: 0,
            every: every as u64,
            rows,
            recent: vec![T::zero(); ch * rows],
            scratch: vec![T::zero(); rows],
            threshold: vec![T::infinity(); ch],
            levels: vec![T::infinity(); ch * LEVELS],
            kept: vec![0; ch],
            last: vec![T::nan(); ch * (REPEATS + 1)],
            last_at: 0,
            open: vec![None; ch],
            quiet_until: vec![0; ch],
            opened: 0,
            cfg,
        })
    }

    /// Each channel's threshold now (infinite before the first noise estimate).
    #[must_use]
    pub fn thresholds(&self) -> &[T] {
        &self.threshold
    }

    /// The most samples between a spike's peak and its event.
    #[must_use]
    pub fn delay_samples(&self) -> usize {
        self.cfg.peak_window
    }

    /// Look at `data`, whole samples, and call `emit` for each spike whose peak is known.
    ///
    /// # Errors
    /// `data` is not whole samples; nothing is looked at then.
    pub fn process(
        &mut self,
        data: &[T],
        mut emit: impl FnMut(Spike<T>),
    ) -> Result<(), SpikeError> {
        let ch = self.cfg.channels;
        crate::ChunkError::check(data.len(), ch)?;
        let w = self.cfg.noise_window as u64;
        for row in data.chunks_exact(ch) {
            let i = self.n;
            let in_window = i % w;
            if in_window % self.every == 0 {
                let r = (in_window / self.every) as usize;
                // a value equal to one of the channel's last REPEATS kept is a held input's
                // (see the module's doc): kept as 0, which no estimate counts
                let slot = self.last_at;
                self.last_at = (slot + 1) % (REPEATS + 1);
                let (before, rest) = self.last.split_at_mut(slot * ch);
                let (now, after) = rest.split_at_mut(ch);
                let kept = &mut self.recent[r * ch..(r + 1) * ch];
                for ((n, d), &x) in now.iter_mut().zip(kept.iter_mut()).zip(row) {
                    *n = x.abs();
                    *d = *n;
                }
                // row against row, so that each pass is vectorised
                for earlier in before.chunks_exact(ch).chain(after.chunks_exact(ch)) {
                    for ((d, &n), &e) in kept.iter_mut().zip(now.iter()).zip(earlier) {
                        *d = if n == e { T::zero() } else { *d };
                    }
                }
            }
            // most samples cross nowhere: one pass over the row (vectorised) says so
            if self.opened > 0 || self.any_beyond(row) {
                for (c, &x) in row.iter().enumerate() {
                    self.look(c, i, x, &mut emit);
                }
            }
            self.n += 1;
            if self.n % w == 0 {
                self.renew_thresholds();
            }
        }
        Ok(())
    }

    /// Whether any value of `row` is beyond its channel's threshold.
    fn any_beyond(&self, row: &[T]) -> bool {
        let t = &self.threshold;
        let count = |f: fn(T) -> T| row.iter().zip(t).filter(|(&x, &t)| f(x) > t).count();
        let n = match self.cfg.sign {
            Sign::Negative => count(|x| -x),
            Sign::Positive => count(|x| x),
            Sign::Both => count(T::abs),
        };
        n > 0
    }

    /// One value of channel `c` at sample `i`.
    fn look(&mut self, c: usize, i: u64, x: T, emit: &mut impl FnMut(Spike<T>)) {
        let thr = self.threshold[c];
        let over = |v: T| match self.cfg.sign {
            Sign::Negative => -v,
            Sign::Positive => v,
            Sign::Both => v.abs(),
        };
        if let Some(mut o) = self.open[c] {
            let beyond = over(x) > thr;
            if beyond && over(x) > over(o.peak) {
                o.peak = x;
                o.at = i;
            }
            if !beyond || i >= o.until {
                self.open[c] = None;
                self.opened -= 1;
                self.quiet_until[c] = o.at + self.cfg.refractory as u64;
                emit(Spike {
                    channel: c,
                    sample: o.at,
                    peak: o.peak,
                });
            } else {
                self.open[c] = Some(o);
            }
            return;
        }
        if over(x) > thr && i >= self.quiet_until[c] {
            self.opened += 1;
            self.open[c] = Some(Open {
                peak: x,
                at: i,
                until: i + self.cfg.peak_window as u64,
            });
        }
    }

    /// sigma = median(|x|) / 0.6745 over each channel's window, what is not noise left out
    /// (see the module's doc); the threshold k sigma.
    fn renew_thresholds(&mut self) {
        let ch = self.cfg.channels;
        let k = T::from(self.cfg.k / 0.6745).unwrap_or_else(T::infinity);
        let held = T::from(HELD_BELOW).unwrap_or_else(T::zero);
        // only finite values are kept: a total order
        let cmp = |a: &T, b: &T| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal);
        let quarter = self.rows.div_ceil(4);
        for c in 0..ch {
            // the window's finite non-zero |x|
            let mut n = 0;
            for row in self.recent.chunks_exact(ch) {
                let v = row[c];
                if v.is_finite() && v > T::zero() {
                    self.scratch[n] = v;
                    n += 1;
                }
            }
            let levels = &mut self.levels[c * LEVELS..(c + 1) * LEVELS];
            let lowest = levels.iter().fold(T::infinity(), |a, &b| a.min(b));
            let reference = if lowest.is_finite() {
                lowest
            } else if n > 0 {
                *self.scratch[..n].select_nth_unstable_by(n * 9 / 10, cmp).1
            } else {
                T::zero()
            };
            let floor = held * reference;
            // the values above the floor to the front
            let mut live = 0;
            for i in 0..n {
                if self.scratch[i] > floor {
                    self.scratch.swap(live, i);
                    live += 1;
                }
            }
            if live >= quarter {
                self.kept[c] = 0;
            } else if self.kept[c] < KEPT_MAX {
                // mostly held, flat or dead: the threshold stays (infinite before the first
                // estimate)
                self.kept[c] += 1;
                continue;
            } else {
                // the noise really fell, or the input has been held this long: this window
                // as it is, and the next one's floor from its own values
                self.kept[c] = 0;
                levels.fill(T::infinity());
                if n < quarter {
                    // a channel without noise (flat, or coarsely quantised) would see every
                    // non-zero value as a spike: it detects nothing until it has some
                    self.threshold[c] = T::infinity();
                    continue;
                }
                // not remembered as a level: after a long stall it is the stall's
                let m = *self.scratch[..n].select_nth_unstable_by(n / 2, cmp).1;
                self.threshold[c] = k * m;
                continue;
            }
            let m = *self.scratch[..live].select_nth_unstable_by(live / 2, cmp).1;
            levels.rotate_right(1);
            levels[0] = m;
            self.threshold[c] = k * m;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> SpikeConfig {
        SpikeConfig {
            channels: 2,
            k: 5.0,
            sign: Sign::Negative,
            refractory: 30,
            peak_window: 20,
            noise_window: 1000,
        }
    }

    /// Spikes of known place on noise of known size: each is found once, at its peak, on
    /// its channel; one inside another's refractory period is not; nothing before the
    /// first noise estimate.
    #[test]
    fn finds_each_spike_once_at_its_peak() {
        let mut noise = uniform(0x2545_F491_4F6C_DD1D);
        let n = 6000usize;
        let mut data: Vec<f64> = (0..2 * n).map(|_| noise(1.0)).collect();
        // spikes: (channel, peak sample); 500 is before the first estimate; 3010 is 10
        // after 3000 on the same channel, inside the refractory period
        let spikes = [
            (0, 500),
            (0, 1500),
            (1, 2200),
            (0, 3000),
            (0, 3010),
            (1, 4500),
        ];
        for &(c, at) in &spikes {
            for (k, v) in [-2.0, -6.0, -9.0, -6.0, -2.0].iter().enumerate() {
                data[(at - 2 + k) * 2 + c] += v;
            }
        }
        let mut d = SpikeDetector::<f64>::new(cfg()).unwrap();
        let mut found = Vec::new();
        for chunk in data.chunks(2 * 7) {
            d.process(chunk, |s| found.push((s.channel, s.sample)))
                .unwrap();
        }
        assert_eq!(found, [(0, 1500), (1, 2200), (0, 3000), (1, 4500)]);
        // sigma of uniform noise in [-0.5, 0.5): median |x| = 0.25
        let want = 5.0 * 0.25 / 0.6745;
        assert!(
            d.thresholds().iter().all(|t| (t - want).abs() < 0.1 * want),
            "{:?}",
            d.thresholds()
        );
    }

    /// A flat channel (no noise: median |x| is 0) detects nothing, where a threshold of 0
    /// would call every negative value a spike; a NaN in the window is left out of the
    /// estimate.
    #[test]
    fn a_flat_channel_detects_nothing_and_nan_is_left_out() {
        let mut d = SpikeDetector::<f64>::new(cfg()).unwrap();
        let mut noise = uniform(11);
        let mut data = vec![0.0; 2 * 3000];
        for i in 0..3000 {
            data[2 * i + 1] = noise(1.0);
        }
        data[2 * 10 + 1] = f64::NAN;
        for k in (1200..3000).step_by(400) {
            data[2 * k] = -1.0; // small steps on the flat channel
        }
        let mut found = 0;
        d.process(&data, |_| found += 1).unwrap();
        assert_eq!(found, 0);
        assert!(d.thresholds()[0].is_infinite());
        let want = 5.0 * 0.25 / 0.6745;
        assert!(
            (d.thresholds()[1] - want).abs() < 0.1 * want,
            "{:?}",
            d.thresholds()
        );
    }

    #[test]
    fn bad_settings_say_what_is_allowed() {
        let e = |f: fn(&mut SpikeConfig)| {
            let mut c = cfg();
            f(&mut c);
            SpikeDetector::<f32>::new(c).unwrap_err().to_string()
        };
        assert_eq!(
            e(|c| c.channels = 0),
            "spike detection needs at least one channel"
        );
        assert_eq!(
            e(|c| c.k = -1.0),
            "threshold k = -1: give a finite number of noise sigmas > 0 (typically 4 to 6)"
        );
        assert_eq!(
            e(|c| c.noise_window = 0),
            "the noise window must be at least 1 sample"
        );
        assert_eq!(
            e(|c| c.peak_window = 0),
            "the peak window must be at least 1 sample"
        );
        let mut d = SpikeDetector::<f32>::new(cfg()).unwrap();
        assert_eq!(
            d.process(&[0.0; 3], |_| {}).unwrap_err().to_string(),
            "a chunk of 3 values is not whole samples of 2 channels: give samples x channels values"
        );
    }

    /// Uniform noise in [-a/2, a/2): median |x| = a/4.
    fn uniform(seed: u64) -> impl FnMut(f64) -> f64 {
        let mut x = seed;
        move |a| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            a * ((x >> 11) as f64 / (1u64 << 53) as f64 - 0.5)
        }
    }

    /// Gaussian noise of standard deviation `sd` (Box-Muller): unbounded, so a threshold
    /// too low shows as crossings.
    fn gauss(seed: u64) -> impl FnMut(f64) -> f64 {
        let mut u = uniform(seed);
        move |sd| {
            let a = u(1.0) + 0.5;
            let b = u(1.0) + 0.5;
            sd * (-2.0 * (1.0 - a).ln()).sqrt() * (std::f64::consts::TAU * b).cos()
        }
    }

    /// Feeds `rows` (sample-major, 2 channels) in chunks of 10 samples; each channel's
    /// threshold after each renewal (every 1000 samples) and the spikes' samples.
    fn run(rows: &[f64]) -> (Vec<[f64; 2]>, Vec<u64>) {
        let mut d = SpikeDetector::<f64>::new(cfg()).unwrap();
        let (mut after, mut found) = (Vec::new(), Vec::new());
        for (i, chunk) in rows.chunks(2 * 10).enumerate() {
            d.process(chunk, |s| found.push(s.sample)).unwrap();
            if (i + 1) % 100 == 0 {
                after.push([d.thresholds()[0], d.thresholds()[1]]);
            }
        }
        (after, found)
    }

    /// `n` samples of Gaussian noise of standard deviation `sd` on both channels.
    fn noise_rows(g: &mut impl FnMut(f64) -> f64, n: usize, sd: f64) -> Vec<f64> {
        (0..2 * n).map(|_| g(sd)).collect()
    }

    /// A stall, `n` samples: the band-pass's output decaying from `from` within a few samples
    /// onto a cycle of `cycle` values about `residue` (its size follows the held sample's
    /// offset: from 1e-5 to 1e-2 of the noise here, so above the floor too).
    fn held_rows(n: usize, from: f64, residue: f64, cycle: usize) -> Vec<f64> {
        (0..n)
            .flat_map(|i| {
                let settled = residue * (1.0 + (i % cycle) as f64 / 8.0);
                let v = from * (-(i as f64) / 3.0).exp() + settled;
                let v = if i > 200 { settled } else { v };
                [v, v]
            })
            .collect()
    }

    /// Within 20 % of `want`: a median of 400 of a window's 1000 values (the rest held)
    /// is off by 6 % (one standard error); a threshold pulled down by held values was off by
    /// half and more.
    fn near(t: f64, want: f64) -> bool {
        (t - want).abs() < 0.2 * want
    }

    /// An input that stalls, held at its last sample, comes out of a band-pass as a line
    /// that decays within a few ms onto one value or a cycle. Counted as noise, a stall
    /// over most of a window pulled the median and the threshold towards 0, and noise crossed
    /// it for the whole next window (the closed-loop spike example lost its precision after
    /// stalls). Held values are left out: after every renewal the threshold is where the
    /// noise puts it, or, once a stall has filled more than [`KEPT_MAX`] windows, infinite
    /// (nothing detected) until noise comes back, and noise alone crosses nothing; for stalls
    /// over 40 % to 95 % of a window, across windows, over five windows, in the very first
    /// window, settling on one value or a cycle of four or [`REPEATS`], and far above the floor.
    #[test]
    fn a_stalled_input_does_not_pull_the_threshold_down() {
        let stalls = [
            (2100, 400, 1e-5, 1),
            (2100, 600, 1e-5, 4),
            (2050, 900, 1e-2, 1),
            (2500, 1500, 1e-2, 4),
            (2100, 5000, 1e-5, 1),
            (2100, 5000, 1e-2, 4),
            (2100, 5000, 1e-2, REPEATS),
            (100, 600, 1e-5, 1),
            (30, 950, 1e-2, 4),
        ];
        for (at, held, residue, cycle) in stalls {
            let mut g = gauss(0x2545_F491_4F6C_DD1D ^ (held + at) as u64);
            let mut rows = noise_rows(&mut g, at, 1.0);
            rows.extend(held_rows(held, -0.7, residue, cycle));
            let total = at + held + 3000;
            rows.extend(noise_rows(&mut g, total - at - held, 1.0));
            let (after, found) = run(&rows);
            let stall =
                format!("stall of {held} at {at}, settling on {cycle} value(s) of {residue}");
            // the renewal after window w saw samples w*1000 .. (w+1)*1000; infinite is right
            // from the KEPT_MAX-th window after the first mostly held one, while still held
            // (or before the first estimate, when every window so far was held)
            let mostly_held = |w: usize| (at + held).min((w + 1) * 1000) > at.max(w * 1000) + 750;
            let first = (0..after.len()).find(|&w| mostly_held(w));
            for (w, t) in after.iter().enumerate() {
                let may_be_off = (first.is_some_and(|f| w >= f + KEPT_MAX as usize)
                    && mostly_held(w))
                    || (0..=w).all(mostly_held);
                assert!(
                    t.iter()
                        .all(|&t| near(t, 5.0) || (may_be_off && t.is_infinite())),
                    "{stall}: thresholds {t:?} after window {w}, want 5"
                );
            }
            assert!(found.is_empty(), "{stall}: noise crossed at {found:?}");
        }
    }

    /// The stall as it really comes out of the band-pass: the crate's own Butterworth
    /// 300-6000 Hz at 30 kHz in float32, on noise of 5 µV over offsets of 100 µV to 5 mV, held
    /// for six windows. The held input settles on cycles of up to 12 values (about 1e-5 of the
    /// offset), which neither a floor of a thousandth nor a repeat among the last 8 values
    /// caught at every window size; with every value kept (a window of 1000) or every 8th
    /// (15000, the spike example's), the threshold is right or infinite after every renewal and
    /// noise crosses nothing.
    #[test]
    fn a_real_band_pass_of_a_held_input_is_left_out() {
        use crate::{design, Band, SosFilter};
        let offsets = [100.0f32, 1000.0, 5000.0];
        let sections = design(
            Band::Bandpass {
                low: 300.0,
                high: 6000.0,
            },
            2,
            30000.0,
        )
        .unwrap();
        for window in [10000usize, 15000, 30000] {
            let mut g = gauss(window as u64);
            let mut filter = SosFilter::<f32>::new(&sections, 3).unwrap();
            let mut d = SpikeDetector::<f32>::new(SpikeConfig {
                channels: 3,
                noise_window: window,
                // (at 5 sigmas Gaussian noise crosses about once in a million samples)
                k: 6.0,
                ..cfg()
            })
            .unwrap();
            let (stall, end) = (2 * window + window / 3, 8 * window + window / 3);
            let mut last = [0.0f32; 3];
            let mut clean = None;
            let mut found = Vec::new();
            for chunk in 0..(11 * window).div_ceil(30) {
                let mut raw = Vec::with_capacity(90);
                for i in chunk * 30..(chunk + 1) * 30 {
                    for (c, o) in offsets.iter().enumerate() {
                        if !(stall..end).contains(&i) {
                            last[c] = o + g(5.0) as f32;
                        }
                        raw.push(last[c]);
                    }
                }
                filter.process(&mut raw).unwrap();
                let before = d.thresholds().to_vec();
                d.process(&raw, |s| found.push(s.sample)).unwrap();
                if d.thresholds() != before.as_slice() && clean.is_none() {
                    clean = Some(d.thresholds().to_vec());
                }
                let t = d.thresholds();
                let want = clean.as_deref().unwrap_or(t);
                for c in 0..3 {
                    assert!(
                        (t[c] / want[c] - 1.0).abs() < 0.2 || t[c].is_infinite(),
                        "window {window}, offset {}: threshold {} at sample {}, first {}",
                        offsets[c],
                        t[c],
                        (chunk + 1) * 30,
                        want[c]
                    );
                }
            }
            let spurious: Vec<u64> = found.into_iter().filter(|&s| s > window as u64).collect();
            assert!(
                spurious.is_empty(),
                "window {window}: noise crossed at {spurious:?}"
            );
        }
    }

    /// What else is not noise, and what must still be followed. One window of a 3000x
    /// artifact lifts the threshold for the window after it (as before) but not the floor:
    /// the noise after it is estimated again and spikes on it are found (a floor taken from
    /// the last level alone left the channel blind for good). A real fall of the noise to a
    /// tenth is followed at once; to 1/2000, below the floor, after [`KEPT_MAX`] windows
    /// kept. NaN and infinities over most of a window are left out, and a channel that goes
    /// flat keeps its threshold for [`KEPT_MAX`] windows, then detects nothing.
    #[test]
    fn artifacts_real_changes_and_broken_values() {
        let mut g = gauss(7);
        // the artifact in window 2; spikes in window 4, after the renewal that saw clean noise
        let mut rows = noise_rows(&mut g, 2000, 1.0);
        rows.extend(noise_rows(&mut g, 1000, 3000.0));
        rows.extend(noise_rows(&mut g, 3000, 1.0));
        for at in [4300, 4700] {
            rows[2 * at] = -20.0;
        }
        let (after, found) = run(&rows);
        assert!(after[2][0] > 1000.0, "{:?}", after[2]);
        assert!(after[3].iter().all(|&t| near(t, 5.0)), "{:?}", after[3]);
        // (the artifact itself crosses the threshold of the noise before it)
        let after_artifact: Vec<u64> = found.into_iter().filter(|&s| s >= 3000).collect();
        assert_eq!(after_artifact, [4300, 4700]);

        for (fall, followed_after) in [(10.0, 2), (2000.0, 2 + KEPT_MAX as usize)] {
            let mut rows = noise_rows(&mut g, 2000, 1.0);
            rows.extend(noise_rows(&mut g, 6000, 1.0 / fall));
            let (after, _) = run(&rows);
            for (w, t) in after.iter().enumerate() {
                let want = if w < followed_after { 5.0 } else { 5.0 / fall };
                assert!(
                    t.iter().all(|&t| near(t, want)),
                    "noise falling {fall}x: thresholds {t:?} after window {w}, want {want}"
                );
            }
        }

        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0] {
            let mut rows = noise_rows(&mut g, 8000, 1.0);
            // 600 of window 2 broken on channel 0; channel 1 broken from sample 3000 on
            for i in 2000..2600 {
                rows[2 * i] = bad;
            }
            for i in 3000..8000 {
                rows[2 * i + 1] = bad;
            }
            let (after, _) = run(&rows);
            assert!(
                after.iter().all(|t| near(t[0], 5.0)),
                "{bad} over 60 % of a window: {after:?}"
            );
            for (w, t) in after.iter().enumerate().skip(3) {
                let kept = w < 3 + KEPT_MAX as usize;
                assert!(
                    if kept {
                        near(t[1], 5.0)
                    } else {
                        t[1].is_infinite()
                    },
                    "{bad} from window 3 on: threshold {} after window {w}",
                    t[1]
                );
            }
        }
    }
}
