//! Sharp-wave ripple detection, causal and per channel: the signal band-passed (Butterworth,
//! by default 150–250 Hz), its envelope (a moving RMS), and that envelope as a z-score
//! against a running baseline (an exponential mean and variance; inside a ripple it learns
//! ten times slower, so that a ripple barely raises its own bar, yet a lasting change of
//! level is learnt and cannot hold the detector in one endless ripple). A ripple starts
//! where the z-score rises above `z_start`; it is reported at its `min_duration`-th sample
//! above `z_start` (so a stimulator can act during the ripple), and ends where the z-score
//! falls below `z_end`.
//!
//! Delay: an event comes `min_duration - 1` samples after the envelope crosses `z_start`, and
//! the envelope lags the ripple by the band-pass's group delay at the band's centre plus
//! half the RMS window ([`RippleDetector::delay_samples`] sums those two).

use num_traits::Float;

use crate::envelope::{EnvelopeError, MovingRms};
use crate::iir::{design, group_delay, Band, DesignError, SosFilter};

/// Ripple detection settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RippleConfig {
    /// Channels per sample.
    pub channels: usize,
    /// Sample rate, Hz.
    pub rate: f64,
    /// The ripple band, Hz (150–250 for rodent hippocampus).
    pub band: (f64, f64),
    /// The band-pass's order.
    pub order: usize,
    /// The envelope's RMS window, samples.
    pub rms_window: usize,
    /// The z-score a ripple starts above.
    pub z_start: f64,
    /// The z-score it ends below.
    pub z_end: f64,
    /// Samples the z-score must stay above `z_start` before the ripple is reported.
    pub min_duration: usize,
    /// The baseline's time constant, samples.
    pub baseline: f64,
    /// Samples before the first detection, while the baseline settles.
    pub warmup: u64,
}

impl RippleConfig {
    /// Usual settings for `channels` channels at `rate` Hz: 150–250 Hz, order 3, an 8 ms RMS
    /// window, start above z 3 for 15 ms, end below z 1, a 2 s baseline, 2 s warm-up.
    #[must_use]
    pub fn usual(channels: usize, rate: f64) -> Self {
        RippleConfig {
            channels,
            rate,
            band: (150.0, 250.0),
            order: 3,
            rms_window: ((rate * 0.008).round() as usize).max(1),
            z_start: 3.0,
            z_end: 1.0,
            min_duration: ((rate * 0.015).round() as usize).max(1),
            baseline: rate * 2.0,
            warmup: (rate * 2.0) as u64,
        }
    }
}

/// A detected ripple.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ripple {
    /// Its channel.
    pub channel: usize,
    /// Where its z-score rose above `z_start`.
    pub onset: u64,
    /// Where it was detected (the event's sample).
    pub detected: u64,
}

/// Bad ripple settings or chunks, saying what is allowed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RippleError {
    /// The band-pass could not be made.
    #[error("ripple band: {0}")]
    Design(#[from] DesignError),
    /// Thresholds out of order or not finite.
    #[error("z_start {start} and z_end {end}: give finite thresholds with z_end <= z_start")]
    Thresholds {
        /// What was given.
        start: f64,
        /// What was given.
        end: f64,
    },
    /// A size of 0.
    #[error("{0} must be at least 1")]
    Size(&'static str),
    /// A chunk that is not whole samples.
    #[error(transparent)]
    Chunk(#[from] crate::ChunkError),
}

/// A causal ripple detector over `[samples, channels]` chunks.
#[derive(Debug, Clone)]
pub struct RippleDetector {
    cfg: RippleConfig,
    filter: SosFilter<f64>,
    rms: MovingRms<f64>,
    delay: f64,
    /// Each channel's baseline mean and variance of the envelope.
    mean: Vec<f64>,
    var: Vec<f64>,
    /// Each channel's ripple in progress: where it started, and whether it was reported.
    current: Vec<Option<(u64, bool)>>,
    /// The chunk's working copy: it grows to the largest chunk once (a runtime tick's chunk
    /// is always the same size, so only the first tick allocates, or none after
    /// [`RippleDetector::reserve`]).
    work: Vec<f64>,
    n: u64,
}

impl RippleDetector {
    /// A detector for `cfg`, before its first sample.
    ///
    /// # Errors
    /// A band, order or rate the band-pass refuses; thresholds out of order; a size of 0.
    pub fn new(cfg: RippleConfig) -> Result<Self, RippleError> {
        if !(cfg.z_start.is_finite() && cfg.z_end.is_finite() && cfg.z_end <= cfg.z_start) {
            return Err(RippleError::Thresholds {
                start: cfg.z_start,
                end: cfg.z_end,
            });
        }
        if cfg.min_duration == 0 {
            return Err(RippleError::Size("min_duration (samples)"));
        }
        if !(cfg.baseline.is_finite() && cfg.baseline >= 1.0) {
            return Err(RippleError::Size("the baseline's time constant (samples)"));
        }
        if cfg.channels == 0 {
            return Err(RippleError::Size("channels"));
        }
        if cfg.rms_window == 0 {
            return Err(RippleError::Size("the RMS window (samples)"));
        }
        let sections = design(
            Band::Bandpass {
                low: cfg.band.0,
                high: cfg.band.1,
            },
            cfg.order,
            cfg.rate,
        )?;
        let centre = (cfg.band.0 * cfg.band.1).sqrt();
        let delay = group_delay(&sections, centre, cfg.rate) + (cfg.rms_window - 1) as f64 / 2.0;
        let ch = cfg.channels;
        Ok(RippleDetector {
            filter: SosFilter::new(&sections, ch)?,
            rms: MovingRms::new(ch, cfg.rms_window).map_err(|_| RippleError::Size("channels"))?,
            delay,
            mean: vec![0.0; ch],
            var: vec![0.0; ch],
            current: vec![None; ch],
            work: Vec::new(),
            n: 0,
            cfg,
        })
    }

    /// Make room for chunks of up to `samples` samples now, so that processing them
    /// allocates nothing (a runtime block calls this when it opens).
    pub fn reserve(&mut self, samples: usize) {
        // each chunk clears it first: what it held is not needed
        self.work.clear();
        self.work.reserve(samples * self.cfg.channels);
    }

    /// The envelope's lag behind the ripple, in samples (band-pass group delay at the band's
    /// centre plus half the RMS window); events come `min_duration` samples after that.
    #[must_use]
    pub fn delay_samples(&self) -> f64 {
        self.delay
    }

    /// Look at `data`, whole samples, and call `emit` for each ripple when it is detected.
    ///
    /// # Errors
    /// `data` is not whole samples; nothing is looked at then.
    pub fn process<T: Float>(
        &mut self,
        data: &[T],
        mut emit: impl FnMut(Ripple),
    ) -> Result<(), RippleError> {
        let ch = self.cfg.channels;
        crate::ChunkError::check(data.len(), ch)?;
        self.work.clear();
        self.work
            .extend(data.iter().map(|v| v.to_f64().unwrap_or(f64::NAN)));
        // whole samples (checked above): neither can refuse the chunk
        self.filter.process(&mut self.work)?;
        if let Err(EnvelopeError::Chunk(e)) = self.rms.process(&mut self.work) {
            return Err(e.into());
        }
        let alpha = 1.0 / self.cfg.baseline;
        for row in self.work.chunks_exact(ch) {
            let i = self.n;
            for (c, &env) in row.iter().enumerate() {
                let sd = self.var[c].sqrt();
                let z = if sd > 0.0 {
                    (env - self.mean[c]) / sd
                } else {
                    0.0
                };
                let live = i >= self.cfg.warmup;
                match self.current[c] {
                    Some((onset, reported)) => {
                        if z < self.cfg.z_end {
                            self.current[c] = None;
                        } else if !reported && z >= self.cfg.z_start {
                            if i + 1 - onset >= self.cfg.min_duration as u64 {
                                self.current[c] = Some((onset, true));
                                emit(Ripple {
                                    channel: c,
                                    onset,
                                    detected: i,
                                });
                            }
                        } else if !reported {
                            // fell back below the start before lasting: not a ripple yet
                            self.current[c] = None;
                        }
                    }
                    None => {
                        if live && z >= self.cfg.z_start {
                            self.current[c] = Some((i, false));
                            if self.cfg.min_duration == 1 {
                                self.current[c] = Some((i, true));
                                emit(Ripple {
                                    channel: c,
                                    onset: i,
                                    detected: i,
                                });
                            }
                        }
                    }
                }
                // the baseline learns, ten times slower inside a ripple
                let a = if self.current[c].is_none() {
                    alpha
                } else {
                    alpha / 10.0
                };
                let d = env - self.mean[c];
                self.mean[c] += a * d;
                self.var[c] = (1.0 - a) * (self.var[c] + a * d * d);
            }
            self.n += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_say_what_is_allowed() {
        let e = |f: fn(&mut RippleConfig)| {
            let mut c = RippleConfig::usual(2, 1250.0);
            f(&mut c);
            RippleDetector::new(c).unwrap_err().to_string()
        };
        assert_eq!(
            e(|c| c.z_end = 5.0),
            "z_start 3 and z_end 5: give finite thresholds with z_end <= z_start"
        );
        assert_eq!(
            e(|c| c.min_duration = 0),
            "min_duration (samples) must be at least 1"
        );
        assert_eq!(
            e(|c| c.band = (150.0, 700.0)),
            "ripple band: high edge 700 Hz: must lie strictly between 0 and the Nyquist frequency 625 Hz"
        );
        assert_eq!(e(|c| c.channels = 0), "channels must be at least 1");
    }
}

/// Synthetic ripples on noise: each found once, none where there is none, and how late.
#[cfg(test)]
mod synthetic {
    use super::*;

    /// LFP at 1250 Hz: white noise (sd 1) and an 8 Hz rhythm (amplitude 2), plus 20 ripples
    /// (180 Hz under a Gaussian of sd 10 ms, amplitude 5) at known times. A ripple's onset
    /// is 2 sd before its centre, where its amplitude reaches e^-2 of its peak.
    #[test]
    fn detection_delay_from_ripple_onset() {
        let rate = 1250.0;
        let n = (rate * 30.0) as usize;
        let centres: Vec<f64> = (0..20)
            .map(|k| 3.0 + 1.3 * k as f64 + 0.01 * k as f64)
            .collect();
        let sd = 0.010;
        let mut x = 0x853C_49E6_748F_EA9Bu64;
        let mut gauss = move || {
            // sum of 12 uniforms minus 6: close enough to normal, sd 1
            (0..12)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x >> 11) as f64 / (1u64 << 53) as f64
                })
                .sum::<f64>()
                - 6.0
        };
        let data: Vec<f32> = (0..n)
            .map(|i| {
                let t = i as f64 / rate;
                let mut v = gauss() + 2.0 * (std::f64::consts::TAU * 8.0 * t).sin();
                for &c in &centres {
                    let g = (-0.5 * ((t - c) / sd).powi(2)).exp();
                    v += 5.0 * g * (std::f64::consts::TAU * 180.0 * t).sin();
                }
                v as f32
            })
            .collect();
        let mut d = RippleDetector::new(RippleConfig::usual(1, rate)).unwrap();
        let mut events = Vec::new();
        for chunk in data.chunks(25) {
            d.process(chunk, |r| events.push(r)).unwrap();
        }
        let onsets: Vec<f64> = centres.iter().map(|c| c - 2.0 * sd).collect();
        let mut delays = Vec::new();
        let mut false_positives = 0;
        let mut hits = vec![0; onsets.len()];
        for e in &events {
            let t = e.detected as f64 / rate;
            match onsets.iter().position(|&o| t >= o - 0.01 && t <= o + 0.1) {
                Some(k) => {
                    hits[k] += 1;
                    delays.push((t - onsets[k]) * 1e3);
                }
                None => false_positives += 1,
            }
        }
        assert!(
            hits.iter().all(|&h| h == 1),
            "each ripple exactly once: {hits:?}"
        );
        delays.sort_by(f64::total_cmp);
        println!(
            "{} ripples, {} detected, {false_positives} false; delay from onset, ms: min {:.1}, median {:.1}, max {:.1} (envelope lag {:.1} ms + 15 ms minimum duration)",
            onsets.len(),
            delays.len(),
            delays.first().copied().unwrap_or(f64::NAN),
            delays.get(delays.len() / 2).copied().unwrap_or(f64::NAN),
            delays.last().copied().unwrap_or(f64::NAN),
            d.delay_samples() / rate * 1e3,
        );
        assert_eq!(delays.len(), onsets.len(), "every ripple once: {events:?}");
        assert_eq!(false_positives, 0, "{events:?}");
        assert!(delays[delays.len() / 2] < 50.0, "median delay {delays:?}");
    }
}
