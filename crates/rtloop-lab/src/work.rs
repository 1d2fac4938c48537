//! Real work in the loop (`--work bandpass`): a band-pass biquad per channel and a threshold
//! detector over the load tester's words, as a spike detector would run on every block, so
//! tuning includes computational load (the ONIX tutorial's advice).

/// Work done on every block: gets the load tester's words of the block's frames,
/// sample-major (`channels` u16 values per frame), returns how many events it found.
pub trait BlockWork {
    /// Process one block's samples.
    fn process(&mut self, samples: &[u8]) -> u64;
    /// The work failed (for example a Python function raised): end the run.
    fn failed(&self) -> bool {
        false
    }
}

impl BlockWork for Work {
    fn process(&mut self, samples: &[u8]) -> u64 {
        Work::process(self, samples)
    }
}

/// A band-pass + threshold detector over `channels` u16 channels.
#[derive(Debug, Clone)]
pub struct Work {
    channels: usize,
    b: [f32; 3],
    a: [f32; 2],
    state: Vec<[f32; 2]>,
    threshold: f32,
    below: Vec<bool>,
}

impl Work {
    /// RBJ band-pass (constant 0 dB peak) from `lo` to `hi` Hz at `fs`, threshold on the
    /// filtered value (a crossing downward counts once).
    #[must_use]
    pub fn bandpass(channels: usize, fs: f64, lo: f64, hi: f64, threshold: f32) -> Work {
        let f0 = (lo * hi).sqrt().min(fs * 0.45);
        let q = f0 / (hi - lo).max(1.0);
        let w0 = 2.0 * std::f64::consts::PI * f0 / fs;
        let alpha = w0.sin() / (2.0 * q);
        let a0 = 1.0 + alpha;
        Work {
            channels: channels.max(1),
            b: [(alpha / a0) as f32, 0.0, (-alpha / a0) as f32],
            a: [(-2.0 * w0.cos() / a0) as f32, ((1.0 - alpha) / a0) as f32],
            state: vec![[0.0; 2]; channels.max(1)],
            threshold,
            below: vec![false; channels.max(1)],
        }
    }

    /// Filter sample-major u16 samples (little-endian) and count threshold crossings.
    pub fn process(&mut self, samples: &[u8]) -> u64 {
        let mut crossings = 0;
        let per = self.channels * 2;
        for sample in samples.chunks_exact(per) {
            for (c, v) in sample.chunks_exact(2).enumerate() {
                let x = f32::from(u16::from_le_bytes([v[0], v[1]])) - 32768.0;
                // transposed direct form II
                let z = &mut self.state[c];
                let y = self.b[0] * x + z[0];
                z[0] = self.b[1] * x - self.a[0] * y + z[1];
                z[1] = self.b[2] * x - self.a[1] * y;
                let below = y < self.threshold;
                if below && !self.below[c] {
                    crossings += 1;
                }
                self.below[c] = below;
            }
        }
        crossings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(freq: f64, fs: f64, n: usize) -> Vec<u8> {
        (0..n)
            .flat_map(|i| {
                let v =
                    32768.0 + 10000.0 * (2.0 * std::f64::consts::PI * freq * i as f64 / fs).sin();
                (v as u16).to_le_bytes()
            })
            .collect()
    }

    #[test]
    fn passes_the_band_and_counts_crossings() {
        let fs = 30_000.0;
        // 1 kHz is in 300..3000 Hz: about one crossing of -5000 per period
        let mut w = Work::bandpass(1, fs, 300.0, 3000.0, -5000.0);
        let n = w.process(&tone(1000.0, fs, 30_000));
        assert!((900..=1000).contains(&n), "{n}");
        // 10 Hz is far below the band: no crossings
        let mut w = Work::bandpass(1, fs, 300.0, 3000.0, -5000.0);
        assert_eq!(w.process(&tone(10.0, fs, 30_000)), 0);
    }
}
