//! Causal phase estimation for phase-locked stimulation: the endpoint-corrected Hilbert
//! transform (ecHT; Schreglmann et al., Nature Communications 2021), and a trigger at a
//! target phase.
//!
//! ecHT takes the last `window` samples, their spectrum's negative frequencies removed (the
//! analytic signal) and weighted by a causal band-pass's response (a second-order
//! Butterworth over the band), and reads the phase of the result's last sample: the phase
//! now, without the distortion a plain Hilbert transform has at a window's end. All of it is
//! linear in the window, so it is computed once, at construction, as one complex kernel of
//! `window` taps; each estimate is then a dot product (no FFT per sample).
//!
//! A trigger fires when a channel's estimated phase passes the target phase going forward,
//! its amplitude (the estimate's magnitude) at least `min_amplitude`, and at least
//! `refractory` samples after that channel's last trigger. Delay: none by construction (the
//! phase is of the newest sample); its error is measured against the offline phase.

use std::f64::consts::{PI, TAU};

use num_traits::Float;

use crate::iir::{design, Band, DesignError, Section};

/// Phase estimation and trigger settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhaseConfig {
    /// Channels per sample.
    pub channels: usize,
    /// Sample rate, Hz.
    pub rate: f64,
    /// The band whose phase is estimated, Hz (8–12 for alpha).
    pub band: (f64, f64),
    /// Samples in each estimate's window (about 0.5–1 s of data).
    pub window: usize,
    /// The phase to trigger at, radians (0: the peak, -pi/2: the rising zero crossing).
    pub target: f64,
    /// The smallest amplitude (in the signal's units) a trigger needs.
    pub min_amplitude: f64,
    /// Samples after a trigger in which its channel fires none.
    pub refractory: usize,
}

/// A trigger at the target phase.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhaseTrigger {
    /// Its channel.
    pub channel: usize,
    /// The sample it fired at.
    pub sample: u64,
    /// The estimated phase there, radians.
    pub phase: f64,
}

/// Bad phase settings or chunks, saying what is allowed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PhaseError {
    /// The band could not be made.
    #[error("phase band: {0}")]
    Design(#[from] DesignError),
    /// A window too short to hold one cycle of the band's lowest frequency.
    #[error("window of {window} samples: it must hold at least one cycle of {low} Hz ({need} samples at {rate} Hz)")]
    Window {
        /// What was given.
        window: usize,
        /// The band's low edge.
        low: f64,
        /// The rate.
        rate: f64,
        /// The least allowed.
        need: usize,
    },
    /// A band too high for the rate: the phase must advance less than a quarter turn per
    /// sample for a crossing of the target to be seen going forward.
    #[error("band high edge {high} Hz: the phase tracker follows bands below a quarter of the rate ({quarter} Hz)")]
    TooHigh {
        /// The band's high edge.
        high: f64,
        /// A quarter of the rate.
        quarter: f64,
    },
    /// A target or amplitude that is not a finite number.
    #[error("{0} must be a finite number")]
    NotFinite(&'static str),
    /// No channel.
    #[error("phase estimation needs at least one channel")]
    NoChannels,
    /// A chunk that is not whole samples.
    #[error(transparent)]
    Chunk(#[from] crate::ChunkError),
}

/// The angle `a` wrapped into [-pi, pi).
#[must_use]
pub fn wrap(a: f64) -> f64 {
    (a + PI).rem_euclid(TAU) - PI
}

/// A causal phase estimator and trigger over `[samples, channels]` chunks.
#[derive(Debug, Clone)]
pub struct PhaseTracker {
    cfg: PhaseConfig,
    /// The ecHT kernel, oldest tap first: real and imaginary parts.
    kre: Vec<f64>,
    kim: Vec<f64>,
    /// The last `window` samples, sample-major.
    ring: Vec<f64>,
    /// Each channel's last phase, and the sample it may fire again at.
    last: Vec<Option<f64>>,
    quiet_until: Vec<u64>,
    /// Each channel's latest phase and amplitude.
    now: Vec<(f64, f64)>,
    n: u64,
}

impl PhaseTracker {
    /// A tracker for `cfg`, before its first sample.
    ///
    /// # Errors
    /// No channel, a band the band-pass refuses, a window shorter than one cycle of the
    /// band's low edge, or a target or amplitude that is not finite.
    pub fn new(cfg: PhaseConfig) -> Result<Self, PhaseError> {
        if cfg.channels == 0 {
            return Err(PhaseError::NoChannels);
        }
        if !cfg.target.is_finite() {
            return Err(PhaseError::NotFinite("the target phase"));
        }
        if !cfg.min_amplitude.is_finite() {
            return Err(PhaseError::NotFinite("min_amplitude"));
        }
        // order 1 per edge: the second-order band-pass of ecHT
        let sections = design(
            Band::Bandpass {
                low: cfg.band.0,
                high: cfg.band.1,
            },
            1,
            cfg.rate,
        )?;
        if cfg.band.1 >= cfg.rate / 4.0 {
            return Err(PhaseError::TooHigh {
                high: cfg.band.1,
                quarter: cfg.rate / 4.0,
            });
        }
        let need = (cfg.rate / cfg.band.0).ceil() as usize;
        if cfg.window < need {
            return Err(PhaseError::Window {
                window: cfg.window,
                low: cfg.band.0,
                rate: cfg.rate,
                need,
            });
        }
        let (kre, kim) = kernel(cfg.window, &sections);
        Ok(PhaseTracker {
            kre,
            kim,
            ring: vec![0.0; cfg.window * cfg.channels],
            last: vec![None; cfg.channels],
            quiet_until: vec![0; cfg.channels],
            now: vec![(0.0, 0.0); cfg.channels],
            n: 0,
            cfg,
        })
    }

    /// Each channel's latest estimate: (phase in radians, amplitude).
    #[must_use]
    pub fn latest(&self) -> &[(f64, f64)] {
        &self.now
    }

    /// Look at `data`, whole samples, and call `emit` for each trigger.
    ///
    /// # Errors
    /// `data` is not whole samples; nothing is looked at then.
    pub fn process<T: Float>(
        &mut self,
        data: &[T],
        mut emit: impl FnMut(PhaseTrigger),
    ) -> Result<(), PhaseError> {
        let ch = self.cfg.channels;
        crate::ChunkError::check(data.len(), ch)?;
        let w = self.cfg.window;
        for row in data.chunks_exact(ch) {
            let slot = (self.n % w as u64) as usize;
            for (d, v) in self.ring[slot * ch..(slot + 1) * ch].iter_mut().zip(row) {
                *d = v.to_f64().unwrap_or(0.0);
            }
            let i = self.n;
            self.n += 1;
            if self.n < w as u64 {
                continue; // the first window is not full yet
            }
            // oldest sample at slot + 1 (mod w): tap t reads ring row (slot + 1 + t) % w
            for c in 0..ch {
                let (mut re, mut im) = (0.0, 0.0);
                let first = (slot + 1) % w;
                let taps = self.kre.iter().zip(&self.kim);
                for (t, (kr, ki)) in taps.enumerate() {
                    let mut r = first + t;
                    if r >= w {
                        r -= w;
                    }
                    let x = self.ring[r * ch + c];
                    re += x * kr;
                    im += x * ki;
                }
                let phase = im.atan2(re);
                let amp = re.hypot(im);
                self.now[c] = (phase, amp);
                if let Some(before) = self.last[c] {
                    let (d0, d1) = (
                        wrap(before - self.cfg.target),
                        wrap(phase - self.cfg.target),
                    );
                    let forward = wrap(phase - before) > 0.0 && wrap(phase - before) < PI / 2.0;
                    if d0 < 0.0
                        && d1 >= 0.0
                        && forward
                        && amp >= self.cfg.min_amplitude
                        && i >= self.quiet_until[c]
                    {
                        self.quiet_until[c] = i + self.cfg.refractory as u64;
                        emit(PhaseTrigger {
                            channel: c,
                            sample: i,
                            phase,
                        });
                    }
                }
                self.last[c] = Some(phase);
            }
        }
        Ok(())
    }
}

/// The ecHT kernel of `n` taps (oldest first) for the band-pass `sections`: the analytic
/// signal's last sample, `y[n-1] = 1/n sum_k X[k] h[k] C[k] e^{2 pi j k (n-1)/n}`, written as
/// `sum_t x[t] K[t]`.
fn kernel(n: usize, sections: &[Section]) -> (Vec<f64>, Vec<f64>) {
    // per bin: the one-sided mask h, the band-pass response C, and the endpoint's twiddle
    let mut m = vec![(0.0f64, 0.0f64); n];
    for (k, mk) in m.iter_mut().enumerate() {
        let h = if k == 0 || (n % 2 == 0 && k == n / 2) {
            1.0
        } else if k < n.div_ceil(2) {
            2.0
        } else {
            0.0
        };
        if h == 0.0 {
            continue;
        }
        let w = TAU * k as f64 / n as f64;
        let c = response(sections, w);
        let (s, co) = (w * (n - 1) as f64).sin_cos();
        // h * C * e^{j w (n-1)} / n
        let (re, im) = (c.0 * co - c.1 * s, c.0 * s + c.1 * co);
        *mk = (h * re / n as f64, h * im / n as f64);
    }
    // K[t] = sum_k m[k] e^{-j 2 pi k t / n}
    let mut kre = vec![0.0; n];
    let mut kim = vec![0.0; n];
    for t in 0..n {
        let (mut re, mut im) = (0.0, 0.0);
        for (k, &(mr, mi)) in m.iter().enumerate() {
            if mr == 0.0 && mi == 0.0 {
                continue;
            }
            let a = -TAU * ((k * t) % n) as f64 / n as f64;
            let (s, co) = a.sin_cos();
            re += mr * co - mi * s;
            im += mr * s + mi * co;
        }
        kre[t] = re;
        kim[t] = im;
    }
    (kre, kim)
}

/// The frequency response of `sections` at angular frequency `w` (radians per sample).
fn response(sections: &[Section], w: f64) -> (f64, f64) {
    let poly = |p: &[f64; 3]| {
        let (mut re, mut im) = (0.0, 0.0);
        for (k, &c) in p.iter().enumerate() {
            let (s, co) = (w * k as f64).sin_cos();
            re += c * co;
            im -= c * s;
        }
        (re, im)
    };
    sections.iter().fold((1.0, 0.0), |acc, s| {
        let (br, bi) = poly(&s.b);
        let (ar, ai) = poly(&s.a);
        let den = ar * ar + ai * ai;
        let (qr, qi) = ((br * ar + bi * ai) / den, (bi * ar - br * ai) / den);
        (acc.0 * qr - acc.1 * qi, acc.0 * qi + acc.1 * qr)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> PhaseConfig {
        PhaseConfig {
            channels: 1,
            rate: 500.0,
            band: (8.0, 12.0),
            window: 250,
            target: 0.0,
            min_amplitude: 0.0,
            refractory: 25,
        }
    }

    /// On a clean 10 Hz cosine the estimated phase is the true phase, and a trigger at
    /// phase 0 fires at each peak.
    #[test]
    fn a_clean_rhythm_is_tracked_at_its_phase() {
        let mut p = PhaseTracker::new(cfg()).unwrap();
        let x: Vec<f64> = (0..2000)
            .map(|i| (TAU * 10.0 * i as f64 / 500.0 + 0.3).cos())
            .collect();
        let mut triggers = Vec::new();
        let mut worst = 0.0f64;
        for (i, chunk) in x.chunks(10).enumerate() {
            p.process(chunk, |t| triggers.push(t)).unwrap();
            let last = (i * 10 + 9) as f64;
            let truth = wrap(TAU * 10.0 * last / 500.0 + 0.3);
            if last > 300.0 {
                worst = worst.max(wrap(p.latest()[0].0 - truth).abs());
            }
        }
        assert!(worst < 0.1, "largest phase error {worst} rad");
        // 10 Hz for 4 s less the first window: about 35 peaks, each within a sample
        assert!(triggers.len() >= 33, "{}", triggers.len());
        for t in &triggers {
            let truth = wrap(TAU * 10.0 * t.sample as f64 / 500.0 + 0.3);
            assert!(
                truth.abs() < TAU * 10.0 / 500.0 + 0.1,
                "{t:?} at true phase {truth}"
            );
        }
    }

    #[test]
    fn bad_settings_say_what_is_allowed() {
        let e = |f: fn(&mut PhaseConfig)| {
            let mut c = cfg();
            f(&mut c);
            PhaseTracker::new(c).unwrap_err().to_string()
        };
        assert_eq!(
            e(|c| c.window = 40),
            "window of 40 samples: it must hold at least one cycle of 8 Hz (63 samples at 500 Hz)"
        );
        assert_eq!(
            e(|c| c.target = f64::NAN),
            "the target phase must be a finite number"
        );
        assert_eq!(
            e(|c| c.channels = 0),
            "phase estimation needs at least one channel"
        );
        assert_eq!(
            e(|c| c.band = (12.0, 8.0)),
            "phase band: band 12..8 Hz: the low edge must be below the high edge"
        );
        assert_eq!(
            e(|c| c.band = (100.0, 130.0)),
            "band high edge 130 Hz: the phase tracker follows bands below a quarter of the rate (125 Hz)"
        );
    }
}
