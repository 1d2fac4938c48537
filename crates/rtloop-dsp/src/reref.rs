//! Re-referencing: from every channel of a sample, subtract the mean (common average
//! reference) or the median (common median reference) of chosen reference channels of the
//! same sample, as Open Ephys' common average reference and SpikeInterface's
//! `common_reference` do. No delay; no state between chunks.

use num_traits::Float;

/// What is subtracted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference {
    /// The mean of the reference channels (CAR).
    Average,
    /// The median of the reference channels (CMR; of an even count, the mean of the two
    /// middle values, as numpy's `median`).
    Median,
}

/// Bad re-referencing parameters or chunks, saying what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RerefError {
    /// No channel.
    #[error("a re-reference needs at least one channel")]
    NoChannels,
    /// An empty reference set.
    #[error("the reference channels are empty: name at least one of the {channels} channels")]
    NoReference {
        /// Channels per sample.
        channels: usize,
    },
    /// A reference channel that does not exist.
    #[error("reference channel {index}: channels are 0 to {last}")]
    Channel {
        /// What was given.
        index: usize,
        /// The last channel.
        last: usize,
    },
    /// A reference channel named twice.
    #[error("reference channel {0} is named twice: name each once")]
    Twice(usize),
    /// A chunk that is not whole samples.
    #[error(transparent)]
    Chunk(#[from] crate::ChunkError),
}

/// Common average or median re-referencing of `[samples, channels]` chunks in place.
#[derive(Debug, Clone)]
pub struct Reref<T> {
    channels: usize,
    reference: Vec<usize>,
    kind: Reference,
    /// The median's working copy of one sample's reference values (made once, here).
    scratch: Vec<T>,
}

impl<T: Float> Reref<T> {
    /// Subtract `kind` of channels `reference` (all channels if `None`) from each of
    /// `channels` channels.
    ///
    /// # Errors
    /// No channel, an empty reference set, or a reference channel out of range or named
    /// twice.
    pub fn new(
        channels: usize,
        reference: Option<&[usize]>,
        kind: Reference,
    ) -> Result<Self, RerefError> {
        if channels == 0 {
            return Err(RerefError::NoChannels);
        }
        let reference: Vec<usize> =
            reference.map_or_else(|| (0..channels).collect(), <[usize]>::to_vec);
        if reference.is_empty() {
            return Err(RerefError::NoReference { channels });
        }
        let mut seen = vec![false; channels];
        for &c in &reference {
            if c >= channels {
                return Err(RerefError::Channel {
                    index: c,
                    last: channels - 1,
                });
            }
            if std::mem::replace(&mut seen[c], true) {
                return Err(RerefError::Twice(c));
            }
        }
        Ok(Reref {
            channels,
            scratch: vec![T::zero(); reference.len()],
            reference,
            kind,
        })
    }

    /// Re-reference `data`, whole samples, in place.
    ///
    /// # Errors
    /// `data` is not whole samples; nothing is changed then.
    pub fn process(&mut self, data: &mut [T]) -> Result<(), RerefError> {
        let ch = self.channels;
        crate::ChunkError::check(data.len(), ch)?;
        let n = T::from(self.reference.len()).unwrap_or_else(T::one);
        let two = T::one() + T::one();
        for row in data.chunks_exact_mut(ch) {
            let r = match self.kind {
                Reference::Average => self.reference.iter().fold(T::zero(), |s, &c| s + row[c]) / n,
                Reference::Median => {
                    for (d, &c) in self.scratch.iter_mut().zip(&self.reference) {
                        *d = row[c];
                    }
                    median(&mut self.scratch, two)
                }
            };
            for v in row.iter_mut() {
                *v = *v - r;
            }
        }
        Ok(())
    }
}

/// The median of `v` (reordered), averaging the two middle values of an even count.
fn median<T: Float>(v: &mut [T], two: T) -> T {
    // a total order: NaN (a broken channel) after every number
    let cmp = |a: &T, b: &T| {
        a.partial_cmp(b)
            .unwrap_or_else(|| a.is_nan().cmp(&b.is_nan()))
    };
    let (mid, odd) = (v.len() / 2, v.len() % 2 == 1);
    let (below, &mut m, _) = v.select_nth_unstable_by(mid, cmp);
    if odd {
        m
    } else {
        let lower = below.iter().copied().fold(T::neg_infinity(), T::max);
        (lower + m) / two
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn average_and_median_of_chosen_channels() {
        let mut car = Reref::<f64>::new(4, Some(&[0, 1, 2]), Reference::Average).unwrap();
        let mut x = [1.0, 2.0, 6.0, 10.0, 0.0, 0.0, 3.0, -3.0];
        car.process(&mut x).unwrap();
        assert_eq!(x, [-2.0, -1.0, 3.0, 7.0, -1.0, -1.0, 2.0, -4.0]);
        let mut cmr = Reref::<f64>::new(4, None, Reference::Median).unwrap();
        let mut x = [1.0, 2.0, 6.0, 10.0, 5.0, -1.0, 0.0, 7.0];
        cmr.process(&mut x).unwrap();
        // medians 4 (2 and 6) and 2.5 (0 and 5)
        assert_eq!(x, [-3.0, -2.0, 2.0, 6.0, 2.5, -3.5, -2.5, 4.5]);
    }

    #[test]
    fn bad_parameters_say_what_is_allowed() {
        let e = |ch, r: Option<&[usize]>| {
            Reref::<f32>::new(ch, r, Reference::Average)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(e(0, None), "a re-reference needs at least one channel");
        assert_eq!(
            e(4, Some(&[])),
            "the reference channels are empty: name at least one of the 4 channels"
        );
        assert_eq!(
            e(4, Some(&[1, 4])),
            "reference channel 4: channels are 0 to 3"
        );
        assert_eq!(
            e(4, Some(&[1, 1])),
            "reference channel 1 is named twice: name each once"
        );
        let mut r = Reref::<f32>::new(3, None, Reference::Median).unwrap();
        let mut x = [1.0f32; 4];
        assert_eq!(
            r.process(&mut x).unwrap_err().to_string(),
            "a chunk of 4 values is not whole samples of 3 channels: give samples x channels values"
        );
        assert_eq!(x, [1.0; 4]);
    }
}
