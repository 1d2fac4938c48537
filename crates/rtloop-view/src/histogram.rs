//! The histogram view: the distribution of one channel over the newest samples, on a log
//! axis when every value is positive (latencies: the mode and millisecond tails both show,
//! as in the lab's PNGs), with the percentiles a latency table quotes.

use rtloop_stream::{DType, Stream};

/// Most samples one histogram looks at.
pub const MAX_SAMPLES: u64 = 1_000_000;
/// Bins per decade on a log axis.
const PER_DECADE: f64 = 20.0;
/// Bins on a linear axis.
const LINEAR_BINS: usize = 60;

/// A histogram of one channel's newest samples.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Histogram {
    /// The channel.
    pub channel: usize,
    /// Samples counted.
    pub n: u64,
    /// Bin edges (`counts.len() + 1` of them).
    pub edges: Vec<f64>,
    /// Samples per bin.
    pub counts: Vec<u64>,
    /// Whether the edges are log-spaced.
    pub log: bool,
    /// Smallest value.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest value.
    pub max: f64,
}

/// A refused histogram request.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum HistogramError {
    /// No such channel.
    #[error("channel {channel} is outside the stream's 0..{n_channels}")]
    Channel {
        /// Asked for.
        channel: usize,
        /// The stream's channels.
        n_channels: usize,
    },
    /// Nothing to count yet.
    #[error("no samples yet")]
    Empty,
}

/// The histogram of `channel` over the newest `samples` (at most [`MAX_SAMPLES`] and what the
/// ring keeps). NaNs are left out.
pub fn histogram(
    stream: &Stream,
    channel: usize,
    samples: u64,
) -> Result<Histogram, HistogramError> {
    let info = stream.info();
    if channel >= info.n_channels {
        return Err(HistogramError::Channel {
            channel,
            n_channels: info.n_channels,
        });
    }
    let mut values = Vec::new();
    let mut scratch: Vec<u64> = Vec::new();
    // the newest samples, copied in slices; a slice the writer laps is retried nearer the end
    let n = samples
        .min(MAX_SAMPLES)
        .min(info.capacity - info.capacity / 8);
    let written = stream.written();
    let mut first = written.saturating_sub(n);
    while first < written {
        let end = written.min(first + 4096);
        let bytes = (end - first) as usize * info.sample_bytes;
        scratch.resize(bytes.div_ceil(8), 0);
        let buf = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut scratch)[..bytes];
        if stream.read_into(first, end, buf, None).is_err() {
            values.clear();
            first = stream.written().saturating_sub(n / 2).max(end);
            continue;
        }
        column(info.dtype, buf, info.n_channels, channel, &mut values);
        first = end;
    }
    values.retain(|v| !v.is_nan());
    summarise(channel, values)
}

fn column(dtype: DType, bytes: &[u8], nch: usize, ch: usize, out: &mut Vec<f64>) {
    macro_rules! pick {
        ($t:ty) => {
            out.extend(
                bytemuck::cast_slice::<u8, $t>(bytes)
                    .chunks_exact(nch)
                    .map(|r| r[ch] as f64),
            )
        };
    }
    match dtype {
        DType::U8 => pick!(u8),
        DType::U16 => pick!(u16),
        DType::U32 => pick!(u32),
        DType::U64 => pick!(u64),
        DType::I8 => pick!(i8),
        DType::I16 => pick!(i16),
        DType::I32 => pick!(i32),
        DType::I64 => pick!(i64),
        DType::F32 => pick!(f32),
        DType::F64 => pick!(f64),
    }
}

fn summarise(channel: usize, mut v: Vec<f64>) -> Result<Histogram, HistogramError> {
    if v.is_empty() {
        return Err(HistogramError::Empty);
    }
    v.sort_unstable_by(f64::total_cmp);
    let q = |p: f64| v[((p * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)];
    let (min, max) = (v[0], v[v.len() - 1]);
    let log = min > 0.0 && max > min;
    let edges: Vec<f64> = if log {
        let (lo, hi) = (min.log10(), max.log10());
        let k = (((hi - lo) * PER_DECADE).ceil() as usize).max(1);
        (0..=k)
            .map(|i| 10f64.powf(lo + (hi - lo) * i as f64 / k as f64))
            .collect()
    } else {
        let span = if max > min { max - min } else { 1.0 };
        (0..=LINEAR_BINS)
            .map(|i| min + span * i as f64 / LINEAR_BINS as f64)
            .collect()
    };
    let nb = edges.len() - 1;
    let mut counts = vec![0u64; nb];
    // values are sorted: walk the edges once
    let mut b = 0;
    for x in &v {
        while b + 1 < nb && *x >= edges[b + 1] {
            b += 1;
        }
        counts[b] += 1;
    }
    Ok(Histogram {
        channel,
        n: v.len() as u64,
        p50: q(0.5),
        p99: q(0.99),
        p999: q(0.999),
        edges,
        counts,
        log,
        min,
        max,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtloop_stream::StreamConfig;

    #[test]
    fn latencies_are_counted_on_a_log_axis_and_a_millisecond_tail_shows() {
        let name = rtloop_testkit::unique_name("view-hist");
        let s = Stream::create(&name, &StreamConfig::new(DType::F64, 2, 0.0, 4096)).unwrap();
        let mut w = s.writer().unwrap();
        // 999 loopbacks near 20 us and one at 3 ms, channel 1
        let mut x: Vec<f64> = (0..999)
            .flat_map(|i| [0.0, 20.0 + (i % 5) as f64])
            .collect();
        x.extend([0.0, 3000.0]);
        w.write(&x).unwrap();
        let h = histogram(&s, 1, 10_000).unwrap();
        assert!(h.log);
        assert_eq!(h.n, 1000);
        assert_eq!(h.counts.iter().sum::<u64>(), 1000);
        assert_eq!(
            *h.counts.last().unwrap(),
            1,
            "the 3 ms sample has a bin of its own"
        );
        assert_eq!((h.min, h.p50, h.max), (20.0, 22.0, 3000.0));
        assert_eq!(
            histogram(&s, 2, 10).unwrap_err().to_string(),
            "channel 2 is outside the stream's 0..2"
        );
        Stream::remove(&name).unwrap();
    }
}
