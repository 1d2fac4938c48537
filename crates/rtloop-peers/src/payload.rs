//! What every sample carries at its start: its absolute index, its chunk's production stamp
//! (CLOCK_MONOTONIC ns, taken just before the chunk is handed to the transport) and the
//! phase of the run, as three native-endian u64 words. The rest of the sample is a fixed
//! pattern the writer sets once (acquisition data the transports move but nobody reads).

/// Bytes of the header words.
pub const HEADER_BYTES: usize = 24;

/// The phases of a trial, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum Phase {
    /// Chunks that open the connections' buffers; not measured.
    Warmup = 0,
    /// Paced at the nominal rate; each chunk's latency is recorded.
    Latency = 1,
    /// As fast as the transport takes them; samples are counted.
    Throughput = 2,
    /// The last chunk: the reader reports and ends.
    End = 3,
    /// A value no writer sends (a corrupted sample).
    Unknown = u64::MAX,
}

impl Phase {
    fn from_word(w: u64) -> Phase {
        match w {
            0 => Phase::Warmup,
            1 => Phase::Latency,
            2 => Phase::Throughput,
            3 => Phase::End,
            _ => Phase::Unknown,
        }
    }
}

/// Write the header words of every sample of `chunk` (whole samples of `sample_bytes`),
/// numbering them from `first`.
pub fn stamp_chunk(chunk: &mut [u8], sample_bytes: usize, first: u64, stamp: u64, phase: Phase) {
    for (i, s) in chunk.chunks_exact_mut(sample_bytes).enumerate() {
        s[0..8].copy_from_slice(&(first + i as u64).to_ne_bytes());
        s[8..16].copy_from_slice(&stamp.to_ne_bytes());
        s[16..24].copy_from_slice(&(phase as u64).to_ne_bytes());
    }
}

/// One sample's header: `(index, stamp, phase)`.
#[must_use]
pub fn read(sample: &[u8]) -> (u64, u64, Phase) {
    let w = |k: usize| u64::from_ne_bytes(sample[k..k + 8].try_into().expect("8 bytes"));
    (w(0), w(8), Phase::from_word(w(16)))
}

/// A chunk of `samples` samples with the fixed pattern in every value after the header.
#[must_use]
pub fn pattern_chunk(samples: usize, sample_bytes: usize) -> Vec<u8> {
    let mut v = vec![0u8; samples * sample_bytes];
    for s in v.chunks_exact_mut(sample_bytes) {
        for (j, b) in s.iter_mut().enumerate().skip(HEADER_BYTES) {
            *b = (j as u8).wrapping_mul(31);
        }
    }
    v
}

/// A sum over every byte after the header (u64 words, then the odd bytes): each reader
/// checks every sample's against the pattern's, so every byte a transport delivers is read
/// and a torn or corrupted sample is counted.
#[inline]
#[must_use]
pub fn payload_sum(sample: &[u8]) -> u64 {
    let body = &sample[HEADER_BYTES..];
    let words = body.chunks_exact(8);
    let tail = words.remainder();
    let mut sum = words.fold(0u64, |a, w| {
        a.wrapping_add(u64::from_ne_bytes(w.try_into().expect("8 bytes")))
    });
    for &b in tail {
        sum = sum.wrapping_add(u64::from(b));
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_leave_the_pattern_alone() {
        let mut c = pattern_chunk(3, 32);
        let tail: Vec<u8> = c[24..32].to_vec();
        stamp_chunk(&mut c, 32, 100, 7, Phase::Throughput);
        for (i, s) in c.chunks_exact(32).enumerate() {
            assert_eq!(read(s), (100 + i as u64, 7, Phase::Throughput));
            assert_eq!(&s[24..32], &tail[..]);
        }
        let sum = payload_sum(&c[..32]);
        assert!(c.chunks_exact(32).all(|s| payload_sum(s) == sum));
        let mut torn = c.clone();
        torn[60] ^= 1; // sample 1, after its header
        assert_ne!(payload_sum(&torn[32..64]), sum);
        let mut bad = c.clone();
        bad[16] = 9;
        assert_eq!(read(&bad).2, Phase::Unknown);
    }
}
