//! Measurement helpers shared by the tools and benchmarks: latency distributions kept in HDR
//! histograms and reported as p50 / p99 / p99.9 / max (never a mean alone, docs/design.md §3),
//! human tables, JSON, and PNG plots.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

use serde::{Deserialize, Serialize};

pub use rtloop_sys::monotonic_ns;

#[cfg(feature = "charts")]
pub mod charts;

/// A latency (or any duration) distribution in nanoseconds, 3 significant digits,
/// from 1 ns to 60 s.
#[derive(Clone)]
pub struct LatencyHistogram {
    h: hdrhistogram::Histogram<u64>,
}

impl std::fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LatencyHistogram")
            .field(&self.summary())
            .finish()
    }
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram.
    #[must_use]
    pub fn new() -> Self {
        Self::with_figures(3)
    }

    /// 1 ns to 60 s, keeping `figures` significant figures.
    fn with_figures(figures: u8) -> Self {
        LatencyHistogram {
            h: hdrhistogram::Histogram::new_with_bounds(1, 60_000_000_000, figures)
                .expect("valid bounds"),
        }
    }

    /// An empty histogram that keeps two significant figures (values within 1 %) instead of
    /// three: a seventh of the buckets, so its percentiles and bins cost a seventh of the time
    /// to read. For live lines read once a second beside a timed loop; the figures a run
    /// reports keep three.
    #[must_use]
    pub fn coarse() -> Self {
        Self::with_figures(2)
    }

    /// Record one value (clamped into the histogram's range).
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.h.saturating_record(ns.max(1));
    }

    /// Forget every value (keeps the allocation: cheap inside a timing loop).
    pub fn reset(&mut self) {
        self.h.reset();
    }

    /// Record `count` occurrences of one value.
    pub fn record_n(&mut self, ns: u64, count: u64) {
        let _ = self.h.record_n(ns.max(1).min(self.h.high()), count);
    }

    /// Every recorded value (the highest-equivalent value of its bucket) with its count: a
    /// compact form to send a histogram to another process (`record_n` rebuilds it).
    #[must_use]
    pub fn recorded(&self) -> Vec<(u64, u64)> {
        self.h
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect()
    }

    /// Add another histogram's values.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        let _ = self.h.add(&other.h);
    }

    /// Values recorded.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.h.len()
    }

    /// Whether nothing was recorded.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.h.is_empty()
    }

    /// The value at quantile `q` (0..=1).
    #[must_use]
    pub fn quantile(&self, q: f64) -> u64 {
        self.h.value_at_quantile(q)
    }

    /// p50 / p99 / p99.9 / max and friends.
    #[must_use]
    pub fn summary(&self) -> Summary {
        Summary {
            count: self.h.len(),
            min_ns: if self.h.is_empty() { 0 } else { self.h.min() },
            p50_ns: self.h.value_at_quantile(0.5),
            p99_ns: self.h.value_at_quantile(0.99),
            p999_ns: self.h.value_at_quantile(0.999),
            max_ns: self.h.max(),
            mean_ns: self.h.mean(),
        }
    }

    /// Counts per bin of `bin_ns` from 0 to `max_ns` (values above go in the last bin):
    /// what a histogram plot draws.
    #[must_use]
    pub fn bins(&self, bin_ns: u64, max_ns: u64) -> Vec<u64> {
        let n = (max_ns / bin_ns).max(1) as usize;
        let mut out = vec![0u64; n];
        for v in self.h.iter_recorded() {
            let i = ((v.value_iterated_to() / bin_ns) as usize).min(n - 1);
            out[i] += v.count_at_value();
        }
        out
    }
}

/// The figures every latency report gives.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Summary {
    /// Values recorded.
    pub count: u64,
    /// Smallest.
    pub min_ns: u64,
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest.
    pub max_ns: u64,
    /// Mean (reported beside the quantiles, never alone).
    pub mean_ns: f64,
}

/// Format nanoseconds for people: `850 ns`, `12.3 µs`, `4.56 ms`, `1.20 s`.
#[must_use]
pub fn fmt_ns(ns: u64) -> String {
    let f = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", f / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", f / 1e6)
    } else {
        format!("{:.2} s", f / 1e9)
    }
}

/// A plain text table: a header row and rows, columns padded to their widest cell.
#[derive(Debug, Default, Clone)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    #[must_use]
    pub fn new<S: ToString>(header: &[S]) -> Self {
        Table {
            header: header.iter().map(ToString::to_string).collect(),
            rows: Vec::new(),
        }
    }

    /// Add a row.
    pub fn row<S: ToString>(&mut self, cells: &[S]) {
        self.rows
            .push(cells.iter().map(ToString::to_string).collect());
    }

    /// Render with two spaces between columns.
    #[must_use]
    pub fn render(&self) -> String {
        let cols = self
            .header
            .len()
            .max(self.rows.iter().map(Vec::len).max().unwrap_or(0));
        let mut width = vec![0usize; cols];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in r.iter().enumerate() {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let line = |r: &Vec<String>| {
            let cells: Vec<String> = (0..cols)
                .map(|i| {
                    let c = r.get(i).map_or("", String::as_str);
                    format!("{c}{}", " ".repeat(width[i] - c.chars().count()))
                })
                .collect();
            cells.join("  ").trim_end().to_owned()
        };
        let mut out = line(&self.header);
        out.push('\n');
        out.push_str(
            &width
                .iter()
                .map(|w| "-".repeat(*w))
                .collect::<Vec<_>>()
                .join("  "),
        );
        for r in &self.rows {
            out.push('\n');
            out.push_str(&line(r));
        }
        out.push('\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_coarse_histogram_agrees_with_a_full_one_within_one_percent() {
        let (mut full, mut coarse) = (LatencyHistogram::new(), LatencyHistogram::coarse());
        for v in 1..=10_000u64 {
            // 17-37 µs, and every 500th a few ms
            let ns = 17_000 + (v * 7919) % 20_000 + if v % 500 == 0 { 3_000_000 } else { 0 };
            full.record(ns);
            coarse.record(ns);
        }
        let (f, c) = (full.summary(), coarse.summary());
        assert_eq!(f.count, c.count);
        for (a, b) in [
            (f.p50_ns, c.p50_ns),
            (f.p99_ns, c.p99_ns),
            (f.p999_ns, c.p999_ns),
            (f.max_ns, c.max_ns),
        ] {
            assert!(a.abs_diff(b) * 100 <= a, "{f:?} against {c:?}");
        }
        assert_eq!(full.bins(1000, 1_001_000).len(), 1001);
        let bins = coarse.bins(1000, 1_001_000);
        assert_eq!(bins.iter().sum::<u64>(), 10_000);
        assert_eq!(bins[1000], 20, "the values beyond 1 ms in the last bin");
    }

    #[test]
    fn summary_reports_quantiles_of_what_was_recorded() {
        let mut h = LatencyHistogram::new();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert!((499_000..=501_000).contains(&s.p50_ns), "{s:?}");
        assert!((989_000..=991_000).contains(&s.p99_ns), "{s:?}");
        assert!(s.max_ns >= 999_000);
        let bins = h.bins(100_000, 1_000_000);
        assert_eq!(bins.len(), 10);
        assert_eq!(bins.iter().sum::<u64>(), 1000);
    }

    #[test]
    fn table_pads_columns() {
        let mut t = Table::new(&["a", "long header"]);
        t.row(&["value", "1"]);
        let s = t.render();
        assert!(s.starts_with("a      long header\n"), "{s}");
        assert!(s.contains("value  1"), "{s}");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(fmt_ns(850), "850 ns");
        assert_eq!(fmt_ns(12_345), "12.3 µs");
        assert_eq!(fmt_ns(4_560_000), "4.56 ms");
    }
}
