//! Envelope: the moving root mean square of each channel over the last `window` samples
//! (samples before the first count as 0), in place. On a band-passed signal its square is the
//! band power. Delay: `(window - 1) / 2` samples (the window's centre).

use num_traits::Float;

/// Bad envelope settings or chunks, saying what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// No channel, or a window of no samples.
    #[error("{0} must be at least 1")]
    Size(&'static str),
    /// A chunk that is not whole samples.
    #[error(transparent)]
    Chunk(#[from] crate::ChunkError),
}

/// The moving RMS of `[samples, channels]` chunks, in place.
#[derive(Debug, Clone)]
pub struct MovingRms<T> {
    channels: usize,
    window: usize,
    /// The last `window` squares, sample-major.
    squares: Vec<T>,
    /// Each channel's sum of `squares`.
    sums: Vec<T>,
    /// Samples seen.
    n: u64,
}

impl<T: Float> MovingRms<T> {
    /// A moving RMS over `window` samples of `channels` channels, before its first sample.
    ///
    /// # Errors
    /// No channel, or a window of no samples.
    pub fn new(channels: usize, window: usize) -> Result<Self, EnvelopeError> {
        if channels == 0 {
            return Err(EnvelopeError::Size("channels"));
        }
        if window == 0 {
            return Err(EnvelopeError::Size("the window (samples)"));
        }
        Ok(MovingRms {
            channels,
            window,
            squares: vec![T::zero(); channels * window],
            sums: vec![T::zero(); channels],
            n: 0,
        })
    }

    /// The delay of the envelope, in samples: the centre of its window.
    #[must_use]
    pub fn delay_samples(&self) -> f64 {
        (self.window - 1) as f64 / 2.0
    }

    /// Replace each value of `data`, whole samples, by its channel's moving RMS.
    ///
    /// # Errors
    /// `data` is not whole samples; nothing is changed then.
    pub fn process(&mut self, data: &mut [T]) -> Result<(), EnvelopeError> {
        let ch = self.channels;
        crate::ChunkError::check(data.len(), ch)?;
        let w = self.window;
        let inv = T::one() / T::from(w).unwrap_or_else(T::one);
        for row in data.chunks_exact_mut(ch) {
            let slot = (self.n % w as u64) as usize;
            let old = &mut self.squares[slot * ch..(slot + 1) * ch];
            for ((x, sq), sum) in row.iter_mut().zip(old.iter_mut()).zip(self.sums.iter_mut()) {
                let s = *x * *x;
                *sum = *sum + s - *sq;
                *sq = s;
                // a running sum drifts by rounding: never below 0
                *x = (sum.max(T::zero()) * inv).sqrt();
            }
            self.n += 1;
            if slot == w - 1 {
                // once a window, the sums afresh from what they hold, so rounding never piles up
                self.sums.iter_mut().for_each(|s| *s = T::zero());
                for row in self.squares.chunks_exact(ch) {
                    for (s, &q) in self.sums.iter_mut().zip(row) {
                        *s = *s + q;
                    }
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
    fn a_sine_has_the_rms_of_a_sine() {
        let mut e = MovingRms::<f64>::new(2, 100).unwrap();
        let mut x: Vec<f64> = (0..2000)
            .flat_map(|i| {
                let s = (std::f64::consts::TAU * i as f64 / 50.0).sin();
                [3.0 * s, 0.0]
            })
            .collect();
        for chunk in x.chunks_mut(2 * 7) {
            e.process(chunk).unwrap();
        }
        let last = &x[x.len() - 2..];
        assert!((last[0] - 3.0 / 2f64.sqrt()).abs() < 1e-9, "{last:?}");
        assert_eq!(last[1], 0.0);
        assert_eq!(e.delay_samples(), 49.5);
    }

    #[test]
    fn bad_settings_say_what_is_allowed() {
        assert_eq!(
            MovingRms::<f32>::new(0, 3).unwrap_err().to_string(),
            "channels must be at least 1"
        );
        assert_eq!(
            MovingRms::<f32>::new(2, 0).unwrap_err().to_string(),
            "the window (samples) must be at least 1"
        );
        let mut e = MovingRms::<f32>::new(2, 3).unwrap();
        assert_eq!(
            e.process(&mut [1.0; 3]).unwrap_err().to_string(),
            "a chunk of 3 values is not whole samples of 2 channels: give samples x channels values"
        );
    }
}
