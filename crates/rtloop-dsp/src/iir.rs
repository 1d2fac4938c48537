//! IIR filters as cascaded second-order sections (what `scipy.signal.sosfilt` runs), with
//! one state per section and channel.
//!
//! [`design`] makes Butterworth low-, high- and band-pass filters (scipy's `butter(...,
//! output="sos")`, through `sci-rs`) and notch filters (scipy's `iirnotch`). [`SosFilter`]
//! runs them on `[samples, channels]` chunks in place: direct form II transposed, as scipy
//! does, with the channels of a sample side by side in the innermost loop so that the
//! compiler keeps several channels in each SIMD register.

use crate::ChunkError;
use num_traits::Float;
use sci_rs::signal::filter::design::{butter_dyn, DigitalFilter, FilterBandType, FilterOutputType};

/// One second-order section: `b` over `a`, `a[0]` = 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Section {
    /// Numerator coefficients.
    pub b: [f64; 3],
    /// Denominator coefficients (`a[0]` is 1).
    pub a: [f64; 3],
}

/// The filters [`design`] makes. Frequencies in Hz.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Band {
    /// Butterworth low-pass.
    Lowpass {
        /// -3 dB frequency.
        cutoff: f64,
    },
    /// Butterworth high-pass.
    Highpass {
        /// -3 dB frequency.
        cutoff: f64,
    },
    /// Butterworth band-pass (`order` poles per edge, as scipy's `butter`).
    Bandpass {
        /// Lower -3 dB frequency.
        low: f64,
        /// Upper -3 dB frequency.
        high: f64,
    },
    /// Second-order notch (scipy's `iirnotch`; `order` must be 2).
    Notch {
        /// The frequency removed.
        freq: f64,
        /// Quality factor: the notch's -3 dB width is `freq / q`.
        q: f64,
    },
}

/// A filter that cannot be made, saying what is allowed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DesignError {
    /// The sample rate is not a positive number.
    #[error("sample rate {0} Hz: give a finite rate > 0")]
    Rate(f64),
    /// A frequency outside (0, rate / 2).
    #[error(
        "{what} {value} Hz: must lie strictly between 0 and the Nyquist frequency {nyquist} Hz"
    )]
    Frequency {
        /// Which frequency.
        what: &'static str,
        /// What was given.
        value: f64,
        /// Half the sample rate.
        nyquist: f64,
    },
    /// A band whose edges are not in order.
    #[error("band {low}..{high} Hz: the low edge must be below the high edge")]
    Edges {
        /// The low edge given.
        low: f64,
        /// The high edge given.
        high: f64,
    },
    /// An order out of range.
    #[error("order {order}: {allowed}")]
    Order {
        /// What was given.
        order: usize,
        /// What is allowed.
        allowed: &'static str,
    },
    /// A notch's quality factor that is not positive.
    #[error("notch q {0}: give a finite q > 0 (the notch is freq / q wide)")]
    Quality(f64),
    /// A filter without sections, or for no channel.
    #[error("{0}")]
    Shape(&'static str),
}

/// The highest Butterworth order [`design`] makes: past it, a filter's sections sit so
/// close to the unit circle that 32-bit samples lose their precision.
pub const MAX_ORDER: usize = 12;

/// Design `band` of `order` for sample rate `rate` (Hz).
///
/// # Errors
/// A rate, frequency, order or quality factor out of range ([`DesignError`] says which and
/// what is allowed).
pub fn design(band: Band, order: usize, rate: f64) -> Result<Vec<Section>, DesignError> {
    if !(rate.is_finite() && rate > 0.0) {
        return Err(DesignError::Rate(rate));
    }
    let nyquist = rate / 2.0;
    let freq = |what: &'static str, value: f64| {
        if value.is_finite() && value > 0.0 && value < nyquist {
            Ok(value)
        } else {
            Err(DesignError::Frequency {
                what,
                value,
                nyquist,
            })
        }
    };
    let (wn, btype) = match band {
        Band::Notch { freq: f, q } => {
            let f = freq("notch frequency", f)?;
            if order != 2 {
                return Err(DesignError::Order {
                    order,
                    allowed: "a notch is a second-order filter: give order 2",
                });
            }
            if !(q.is_finite() && q > 0.0) {
                return Err(DesignError::Quality(q));
            }
            return Ok(vec![notch(f / nyquist, q)]);
        }
        Band::Lowpass { cutoff } => (vec![freq("cutoff", cutoff)?], FilterBandType::Lowpass),
        Band::Highpass { cutoff } => (vec![freq("cutoff", cutoff)?], FilterBandType::Highpass),
        Band::Bandpass { low, high } => {
            let (low, high) = (freq("low edge", low)?, freq("high edge", high)?);
            if low >= high {
                return Err(DesignError::Edges { low, high });
            }
            (vec![low, high], FilterBandType::Bandpass)
        }
    };
    if !(1..=MAX_ORDER).contains(&order) {
        return Err(DesignError::Order {
            order,
            allowed: "a Butterworth filter's order must be 1 to 12",
        });
    }
    let f = butter_dyn(
        order,
        wn,
        Some(btype),
        Some(false),
        Some(FilterOutputType::Sos),
        Some(rate),
    );
    let DigitalFilter::Sos(sos) = f else {
        unreachable!("sci-rs returns the output type asked for")
    };
    Ok(sos
        .sos
        .iter()
        .map(|s| {
            let a0 = s.a[0];
            Section {
                b: s.b.map(|v| v / a0),
                a: s.a.map(|v| v / a0),
            }
        })
        .collect())
}

/// scipy's `iirnotch(w0, Q)` with `w0` a fraction of the Nyquist frequency.
fn notch(w0: f64, q: f64) -> Section {
    let w0 = w0 * std::f64::consts::PI;
    let beta = (w0 / q / 2.0).tan();
    let gain = 1.0 / (1.0 + beta);
    let c = w0.cos();
    Section {
        b: [gain, -2.0 * gain * c, gain],
        a: [1.0, -2.0 * gain * c, 2.0 * gain - 1.0],
    }
}

/// The group delay, in samples, of `sections` at `freq` (Hz, sample rate `rate`): how late
/// a narrow-band signal at that frequency comes out.
#[must_use]
pub fn group_delay(sections: &[Section], freq: f64, rate: f64) -> f64 {
    let w = std::f64::consts::TAU * freq / rate;
    // for P(z) = sum p_k z^-k on the unit circle, -d(arg P)/dw = Re(sum k p_k e^-jwk / P)
    let gd = |p: &[f64; 3]| {
        let (mut re, mut im, mut kre, mut kim) = (0.0, 0.0, 0.0, 0.0);
        for (k, &c) in p.iter().enumerate() {
            let (s, co) = (w * k as f64).sin_cos();
            re += c * co;
            im -= c * s;
            kre += k as f64 * c * co;
            kim -= k as f64 * c * s;
        }
        let den = re * re + im * im;
        if den == 0.0 {
            0.0
        } else {
            (kre * re + kim * im) / den
        }
    };
    sections.iter().map(|s| gd(&s.b) - gd(&s.a)).sum()
}

/// A cascade of second-order sections run on `[samples, channels]` chunks in place, each
/// channel with its own state, carried from chunk to chunk.
#[derive(Debug, Clone)]
pub struct SosFilter<T> {
    /// b0, b1, b2, a1, a2 of each section.
    coefs: Vec<[T; 5]>,
    channels: usize,
    /// Per section: the two delay lines, each `channels` long.
    state: Vec<T>,
}

impl<T: Float> SosFilter<T> {
    /// A filter of `sections` for `channels` channels, at rest.
    ///
    /// # Errors
    /// No section, or no channel.
    pub fn new(sections: &[Section], channels: usize) -> Result<Self, DesignError> {
        if sections.is_empty() {
            return Err(DesignError::Shape("a filter needs at least one section"));
        }
        if channels == 0 {
            return Err(DesignError::Shape("a filter needs at least one channel"));
        }
        let t = |v: f64| T::from(v).unwrap_or_else(T::nan);
        let coefs = sections
            .iter()
            .map(|s| [t(s.b[0]), t(s.b[1]), t(s.b[2]), t(s.a[1]), t(s.a[2])])
            .collect();
        Ok(SosFilter {
            coefs,
            channels,
            state: vec![T::zero(); sections.len() * 2 * channels],
        })
    }

    /// Channels per sample.
    #[must_use]
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// Back to rest (every state 0), as a new filter.
    pub fn reset(&mut self) {
        self.state.iter_mut().for_each(|z| *z = T::zero());
    }

    /// Filter `data`, whole samples of [`SosFilter::channels`] values each, in place.
    ///
    /// # Errors
    /// `data` is not a whole number of samples; nothing is filtered then.
    pub fn process(&mut self, data: &mut [T]) -> Result<(), ChunkError> {
        let ch = self.channels;
        ChunkError::check(data.len(), ch)?;
        for row in data.chunks_exact_mut(ch) {
            for (co, z) in self.coefs.iter().zip(self.state.chunks_exact_mut(2 * ch)) {
                let [b0, b1, b2, a1, a2] = *co;
                let (z0, z1) = z.split_at_mut(ch);
                // channels side by side: the same arithmetic on each, no dependency between
                // them, so this loop is vectorised
                for ((x, z0), z1) in row.iter_mut().zip(z0.iter_mut()).zip(z1.iter_mut()) {
                    let xi = *x;
                    let y = b0 * xi + *z0;
                    *z0 = b1 * xi - a1 * y + *z1;
                    *z1 = b2 * xi - a2 * y;
                    *x = y;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_parameters_say_what_is_allowed() {
        let e = |b, o, r| design(b, o, r).unwrap_err().to_string();
        assert_eq!(
            e(Band::Lowpass { cutoff: 600.0 }, 4, 1000.0),
            "cutoff 600 Hz: must lie strictly between 0 and the Nyquist frequency 500 Hz"
        );
        assert_eq!(
            e(Band::Lowpass { cutoff: 100.0 }, 0, 1000.0),
            "order 0: a Butterworth filter's order must be 1 to 12"
        );
        assert_eq!(
            e(
                Band::Bandpass {
                    low: 250.0,
                    high: 150.0
                },
                4,
                1000.0
            ),
            "band 250..150 Hz: the low edge must be below the high edge"
        );
        assert_eq!(
            e(Band::Notch { freq: 50.0, q: 0.0 }, 2, 1000.0),
            "notch q 0: give a finite q > 0 (the notch is freq / q wide)"
        );
        assert_eq!(
            e(
                Band::Notch {
                    freq: 50.0,
                    q: 30.0
                },
                4,
                1000.0
            ),
            "order 4: a notch is a second-order filter: give order 2"
        );
        assert_eq!(
            e(Band::Highpass { cutoff: 1.0 }, 2, f64::NAN),
            "sample rate NaN Hz: give a finite rate > 0"
        );
        assert!(SosFilter::<f32>::new(&[], 4).is_err());
        let s = design(Band::Lowpass { cutoff: 100.0 }, 2, 1000.0).unwrap();
        assert!(SosFilter::<f32>::new(&s, 0).is_err());
        let mut f = SosFilter::<f32>::new(&s, 3).unwrap();
        let mut x = [1.0f32; 7];
        assert_eq!(
            f.process(&mut x).unwrap_err().to_string(),
            "a chunk of 7 values is not whole samples of 3 channels: give samples x channels values"
        );
        assert_eq!(x, [1.0; 7], "nothing filtered");
    }

    /// A low-pass passes DC with gain 1 and its stated delay is the DC group delay of a
    /// 2nd-order Butterworth: sqrt(2) / (2 pi fc / fs) samples for a low cutoff.
    #[test]
    fn a_low_pass_passes_dc_and_states_its_delay() {
        let s = design(Band::Lowpass { cutoff: 10.0 }, 2, 1000.0).unwrap();
        let mut f = SosFilter::<f64>::new(&s, 3).unwrap();
        let mut x = vec![1.0; 3 * 5000];
        f.process(&mut x).unwrap();
        assert!(x[x.len() - 3..].iter().all(|v| (v - 1.0).abs() < 1e-9));
        let d = group_delay(&s, 0.0, 1000.0);
        let analog = std::f64::consts::SQRT_2 / (std::f64::consts::TAU * 10.0 / 1000.0);
        assert!((d - analog).abs() / analog < 0.01, "{d} against {analog}");
    }
}
