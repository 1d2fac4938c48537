//! Anti-aliased decimation by an integer factor, causal: a Butterworth low-pass at 0.8 of
//! the new Nyquist frequency (order 8, as second-order sections), then every `factor`-th
//! sample, counted across chunks: `sosfilt(butter(8, 0.8 / factor, output="sos"),
//! x)[::factor]`. scipy's `decimate` keeps the same band edge but uses a Chebyshev type I
//! low-pass (which sci-rs cannot design yet) and filters forwards and backwards (which a live
//! stream cannot). The Butterworth is 16–22 dB down at the new Nyquist frequency (factor 10
//! to 2) and 45–83 dB at 1.5 times it, so what aliases onto the top of the new band is
//! attenuated less than scipy's filter would: low-pass what lies just above the new
//! Nyquist first when it is strong.
//!
//! Delay: the low-pass's group delay at 0 Hz ([`Decimator::delay_samples`], in input
//! samples).

use num_traits::Float;

use crate::iir::{design, group_delay, Band, DesignError, Section, SosFilter};

/// The low-pass's order.
pub const ORDER: usize = 8;

/// Bad decimation settings or chunks, saying what is allowed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecimateError {
    /// A factor below 2.
    #[error("decimation factor {0}: give a whole factor of 2 or more")]
    Factor(usize),
    /// The low-pass could not be made.
    #[error(transparent)]
    Design(#[from] DesignError),
    /// A chunk that is not whole samples.
    #[error(transparent)]
    Chunk(#[from] crate::ChunkError),
    /// An output that is not the size of what the chunk keeps.
    #[error("the output holds {given} values; this chunk keeps {kept} samples of {channels} channels ({} values)", kept * channels)]
    Output {
        /// Values the output holds.
        given: usize,
        /// Samples the chunk keeps.
        kept: usize,
        /// Channels per sample.
        channels: usize,
    },
}

/// Decimates `[samples, channels]` chunks by a whole factor.
#[derive(Debug, Clone)]
pub struct Decimator<T> {
    factor: usize,
    filter: SosFilter<T>,
    sections: Vec<Section>,
    /// Samples seen.
    n: u64,
}

impl<T: Float> Decimator<T> {
    /// Keep one sample in `factor` of `channels` channels.
    ///
    /// # Errors
    /// A factor below 2, or no channel.
    pub fn new(channels: usize, factor: usize) -> Result<Self, DecimateError> {
        if factor < 2 {
            return Err(DecimateError::Factor(factor));
        }
        // any rate: the cutoff is a fraction of it (rate 2 puts Nyquist at 1)
        let sections = design(
            Band::Lowpass {
                cutoff: 0.8 / factor as f64,
            },
            ORDER,
            2.0,
        )?;
        Ok(Decimator {
            factor,
            filter: SosFilter::new(&sections, channels)?,
            sections,
            n: 0,
        })
    }

    /// The low-pass's delay at 0 Hz, in input samples.
    #[must_use]
    pub fn delay_samples(&self) -> f64 {
        group_delay(&self.sections, 0.0, 2.0)
    }

    /// How many samples [`Decimator::process`] keeps of the next `samples` input samples.
    #[must_use]
    pub fn kept(&self, samples: usize) -> usize {
        let f = self.factor as u64;
        let first = (f - self.n % f) % f; // offset of the next kept sample
        if (samples as u64) <= first {
            0
        } else {
            ((samples as u64 - first - 1) / f + 1) as usize
        }
    }

    /// Filter `data` (whole samples, changed in place) and copy every `factor`-th sample,
    /// counted from the first sample ever given, into `out`, which must hold exactly
    /// [`Decimator::kept`] samples.
    ///
    /// # Errors
    /// `data` is not whole samples, or `out` is not the size of what is kept; nothing is
    /// changed then.
    pub fn process(&mut self, data: &mut [T], out: &mut [T]) -> Result<(), DecimateError> {
        let ch = self.filter.channels();
        crate::ChunkError::check(data.len(), ch)?;
        let kept = self.kept(data.len() / ch);
        if out.len() != kept * ch {
            return Err(DecimateError::Output {
                given: out.len(),
                kept,
                channels: ch,
            });
        }
        self.filter.process(data)?;
        let f = self.factor as u64;
        let mut k = 0;
        for (i, row) in data.chunks_exact(ch).enumerate() {
            if (self.n + i as u64) % f == 0 {
                out[k * ch..(k + 1) * ch].copy_from_slice(row);
                k += 1;
            }
        }
        self.n += (data.len() / ch) as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_every_factorth_sample_across_chunks() {
        let mut d = Decimator::<f64>::new(1, 3).unwrap();
        let mut kept = 0;
        for len in [1usize, 2, 4, 5, 1, 1, 7] {
            let k = d.kept(len);
            let mut x = vec![1.0; len];
            let mut out = vec![0.0; k];
            d.process(&mut x, &mut out).unwrap();
            kept += k;
        }
        assert_eq!(kept, 21usize.div_ceil(3)); // samples 0, 3, ..., 18 of 21
        assert!(d.delay_samples() > 0.0);
    }

    #[test]
    fn bad_settings_say_what_is_allowed() {
        assert_eq!(
            Decimator::<f32>::new(2, 1).unwrap_err().to_string(),
            "decimation factor 1: give a whole factor of 2 or more"
        );
        let mut d = Decimator::<f32>::new(2, 2).unwrap();
        assert_eq!(
            d.process(&mut [0.0; 4], &mut [0.0; 4])
                .unwrap_err()
                .to_string(),
            "the output holds 4 values; this chunk keeps 1 samples of 2 channels (2 values)"
        );
    }
}
