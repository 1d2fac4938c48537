//! PNG charts of what people would rather look at than read: latency histograms, time series
//! (occupancy over time, throughput curves) and bar charts (a figure against its reference).
//! Drawn with plotters' bitmap backend; text uses a system TTF (DejaVu Sans, Debian's
//! `fonts-dejavu-core`) loaded at run time.

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;

use crate::{fmt_ns, LatencyHistogram};

const SIZE: (u32, u32) = (1000, 600);
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// Register a font for chart text once; `false` if none was found (charts then carry no
/// text: plotters draws nothing for missing glyphs).
pub fn fonts_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let Some(bytes) = FONT_PATHS.iter().find_map(|p| std::fs::read(p).ok()) else {
            return false;
        };
        // the font registry keeps &'static bytes; one font per process
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok()
    })
}

/// What plotters' bitmap backend reports: drawing failed, or writing the PNG did.
pub type DrawError = DrawingAreaErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>;

/// A chart that could not be drawn or written.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    /// Drawing it or writing its file failed.
    #[error("cannot draw chart {}: {source}", path.display())]
    Draw {
        /// The PNG file.
        path: std::path::PathBuf,
        /// plotters' error.
        source: DrawError,
    },
}

/// The error of drawing the chart at `path`.
fn err(path: &Path) -> impl Fn(DrawError) -> ChartError + '_ {
    move |source| ChartError::Draw {
        path: path.to_owned(),
        source,
    }
}

// ten distinct colours (matplotlib's tab10), so charts of up to ten series never repeat one
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Bins per decade of the latency histogram's log time axis.
const BINS_PER_DECADE: f64 = 20.0;

/// The histogram's counts in logarithmic bins (20 per decade) from `lo_ns` up: bin `i` spans
/// `lo_ns * 10^(i/20) .. lo_ns * 10^((i+1)/20)`. Every recorded value lands in a bin, so the
/// counts add up to the histogram's count and a single sample of a long tail shows.
#[must_use]
pub fn log_bins(h: &LatencyHistogram, lo_ns: f64, hi_ns: f64) -> Vec<u64> {
    let n = ((hi_ns / lo_ns).log10() * BINS_PER_DECADE).ceil().max(1.0) as usize;
    let mut bins = vec![0u64; n];
    for (v, c) in h.recorded() {
        let x = (v as f64).max(lo_ns);
        let i = ((x / lo_ns).log10() * BINS_PER_DECADE).floor() as usize;
        bins[i.min(n - 1)] += c;
    }
    bins
}

/// A latency as the axis shows it: "800 ns", "20 µs", "1.5 ms".
fn axis_time(us: f64) -> String {
    fmt_ns((us * 1e3).round() as u64)
}

/// A latency histogram on a logarithmic time axis (20 bins per decade, from below the
/// fastest sample to above the slowest), counts on a log axis, with the p50 / p99 / p99.9
/// marked: the mode stays readable and a tail of milliseconds shows beside microseconds.
pub fn latency_histogram_png(
    path: &Path,
    title: &str,
    h: &LatencyHistogram,
) -> Result<(), ChartError> {
    fonts_available();
    let s = h.summary();
    let (lo_ns, hi_ns) = if s.count == 0 {
        (1_000.0, 10_000.0)
    } else {
        let min = h.quantile(0.0).max(1) as f64;
        (
            (min / 1.5).max(1.0),
            (s.max_ns as f64 * 1.5).max(min * 10.0),
        )
    };
    let bins = log_bins(h, lo_ns, hi_ns);
    let top = bins.iter().copied().max().unwrap_or(1).max(1) as f64;
    let edge_us = |i: usize| lo_ns * 10f64.powf(i as f64 / BINS_PER_DECADE) / 1e3;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err(path))?;
    let caption = format!(
        "{title}  (n={}, p50 {}, p99 {}, p99.9 {}, max {})",
        s.count,
        fmt_ns(s.p50_ns),
        fmt_ns(s.p99_ns),
        fmt_ns(s.p999_ns),
        fmt_ns(s.max_ns)
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (lo_ns / 1e3..hi_ns / 1e3).log_scale(),
            (0.8f64..top * 2.0).log_scale(),
        )
        .map_err(err(path))?;
    chart
        .configure_mesh()
        .x_desc("latency (log scale, 20 bins per decade)")
        .y_desc("count")
        .x_labels(8)
        .x_label_formatter(&|v| axis_time(*v))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err(path))?;
    chart
        .draw_series(
            bins.iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(i, &c)| {
                    Rectangle::new(
                        [(edge_us(i), 0.8), (edge_us(i + 1), c as f64)],
                        PALETTE[0].filled(),
                    )
                }),
        )
        .map_err(err(path))?;
    for (q, name, color) in [
        (s.p50_ns, "p50", PALETTE[2]),
        (s.p99_ns, "p99", PALETTE[1]),
        (s.p999_ns, "p99.9", PALETTE[3]),
    ] {
        let x = (q as f64).clamp(lo_ns, hi_ns) / 1e3;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x, 0.8), (x, top * 2.0)],
                color.stroke_width(2),
            )))
            .map_err(err(path))?
            .label(format!("{name} {}", fmt_ns(q)))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err(path))?;
    root.present().map_err(err(path))
}

/// Lines over time (or any x): each series is a name and its `(x, y)` points.
pub fn time_series_png(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(&str, &[(f64, f64)])],
) -> Result<(), ChartError> {
    fonts_available();
    let pts = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y1 = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err(path))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, 0f64..y1)
        .map_err(err(path))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(err(path))?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(err(path))?
            .label(*name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err(path))?;
    root.present().map_err(err(path))
}

/// A number as an axis tick: "2", "250", "4k", "64k", "1M", "0.5".
fn axis_number(v: f64) -> String {
    let a = v.abs();
    let (x, unit) = if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    // whole numbers and numbers of two digits or more without decimals
    let text = if (x - x.round()).abs() < 1e-9 || x.abs() >= 10.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    };
    format!("{text}{unit}")
}

/// Lines on log-log axes (throughput or latency against block size, as FieldTrip's FAQ plots
/// them): each series is a name and its `(x, y)` points; points with x or y <= 0 are skipped.
/// `marks` are labelled vertical lines (for example the sizes a tuner found stable or
/// recommends).
pub fn loglog_png(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(&str, &[(f64, f64)])],
    marks: &[(f64, &str)],
) -> Result<(), ChartError> {
    fonts_available();
    let pts = series
        .iter()
        .flat_map(|(_, p)| p.iter())
        .filter(|(x, y)| *x > 0.0 && *y > 0.0);
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (1.0, 10.0, 1.0, 10.0);
    }
    let (x0, x1) = (x0 / 1.5, x1 * 1.5);
    let (y0, y1) = (y0 / 2.0, y1 * 2.0);
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err(path))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
        .map_err(err(path))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&|v| axis_number(*v))
        .y_label_formatter(&|v| axis_number(*v))
        .draw()
        .map_err(err(path))?;
    for (k, (x, name)) in marks.iter().enumerate() {
        if *x <= 0.0 {
            continue;
        }
        let color = PALETTE[(series.len() + k) % PALETTE.len()];
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(*x, y0), (*x, y1)],
                color.stroke_width(3),
            )))
            .map_err(err(path))?
            .label(format!("{name}: {}", axis_number(*x)))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
            });
    }
    for (i, (name, points)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let pts: Vec<(f64, f64)> = points
            .iter()
            .copied()
            .filter(|(x, y)| *x > 0.0 && *y > 0.0)
            .collect();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(err(path))?
            .label(*name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .map_err(err(path))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err(path))?;
    root.present().map_err(err(path))
}

/// How a bar chart's value axis runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// From 0, linear.
    Linear,
    /// Logarithmic, so bars that differ a hundredfold both stay readable.
    Log,
}

/// Bars: a label and a value each (for example a throughput beside its memcpy reference),
/// on a linear or log value axis, with an optional target drawn as a labelled horizontal
/// line across the chart (for example the rate a rig needs).
pub fn bar_chart_png(
    path: &Path,
    title: &str,
    y_label: &str,
    bars: &[(String, f64)],
    axis: Axis,
    target: Option<(f64, &str)>,
) -> Result<(), ChartError> {
    fonts_available();
    let values = bars
        .iter()
        .map(|b| b.1)
        .chain(target.map(|t| t.0))
        .filter(|v| *v > 0.0);
    let (lo, hi) = values.fold((f64::MAX, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let hi = if hi > 0.0 { hi } else { 1.0 };
    let n = bars.len().max(1);
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err(path))?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(80)
        .y_label_area_size(70);
    let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    let x_label = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
        _ => String::new(),
    };
    // both axis kinds draw the same bars, values and target; only the coordinates differ
    macro_rules! draw {
        ($chart:expr, $floor:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .y_desc(y_label)
                .x_labels(n)
                .x_label_formatter(&x_label)
                .y_label_formatter(&|v| format!("{v}"))
                .draw()
                .map_err(err(path))?;
            chart
                .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
                    let mut r = Rectangle::new(
                        [
                            (SegmentValue::Exact(i), $floor),
                            (SegmentValue::Exact(i + 1), v.max($floor)),
                        ],
                        PALETTE[i % PALETTE.len()].filled(),
                    );
                    r.set_margin(0, 0, 12, 12);
                    r
                }))
                .map_err(err(path))?;
            chart
                .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
                    Text::new(
                        format!("{v:.2}"),
                        (SegmentValue::CenterOf(i), v.max($floor)),
                        ("sans-serif", 16),
                    )
                }))
                .map_err(err(path))?;
            if let Some((t, name)) = target {
                let red = PALETTE[3];
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(SegmentValue::Exact(0), t), (SegmentValue::Exact(n), t)],
                        red.stroke_width(3),
                    )))
                    .map_err(err(path))?
                    .label(format!("{name}: {t:.1}"))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], red.stroke_width(3))
                    });
                chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::UpperRight)
                    .background_style(WHITE.mix(0.8))
                    .border_style(BLACK)
                    .draw()
                    .map_err(err(path))?;
            }
        }};
    }
    match axis {
        Axis::Linear => draw!(
            builder
                .build_cartesian_2d((0..n - 1).into_segmented(), 0f64..hi * 1.15)
                .map_err(err(path))?,
            0.0
        ),
        Axis::Log => {
            let floor = if lo < f64::MAX { lo / 3.0 } else { 0.1 };
            draw!(
                builder
                    .build_cartesian_2d((0..n - 1).into_segmented(), (floor..hi * 3.0).log_scale())
                    .map_err(err(path))?,
                floor
            )
        }
    }
    root.present().map_err(err(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_bins_hold_every_sample_and_a_millisecond_tail_shows() {
        let mut h = LatencyHistogram::new();
        for v in 0..10_000u64 {
            h.record(15_000 + v % 500); // the mode, about 15 µs
        }
        h.record(3_000_000); // one 3 ms tail sample
        let bins = log_bins(&h, 10_000.0, 4_500_000.0);
        assert_eq!(bins.iter().sum::<u64>(), 10_001);
        // 20 bins per decade: 10 µs..4.5 ms is 2.65 decades
        assert_eq!(bins.len(), 54);
        // the tail sample is alone in its bin near the right end, far from the mode's
        let tail = bins.iter().rposition(|&c| c > 0).unwrap();
        assert_eq!(bins[tail], 1);
        assert!(tail >= 49, "tail in bin {tail}");
        assert!(bins[3] + bins[4] > 9_000, "{bins:?}");
    }

    #[test]
    fn axis_ticks_read_as_numbers() {
        assert_eq!(axis_number(4000.0), "4k");
        assert_eq!(axis_number(4096.0), "4.1k");
        assert_eq!(axis_number(65536.0), "66k");
        assert_eq!(axis_number(1_000_000.0), "1M");
        assert_eq!(axis_number(250.0), "250");
        assert_eq!(axis_number(2.5), "2.5");
        assert_eq!(axis_time(1_500.0), fmt_ns(1_500_000));
    }

    fn decoded(path: &Path) -> image::RgbImage {
        image::open(path).expect("a PNG that decodes").to_rgb8()
    }

    fn not_blank(img: &image::RgbImage) -> bool {
        img.pixels().filter(|p| p.0 != [255, 255, 255]).count() > 1000
    }

    #[test]
    fn each_chart_writes_a_png_of_the_expected_size_with_something_drawn() {
        let dir = std::env::temp_dir().join(format!("rtloop-charts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut h = LatencyHistogram::new();
        for v in 0..10_000u64 {
            h.record(1_000 + (v % 97) * 300);
        }
        let p1 = dir.join("hist.png");
        latency_histogram_png(&p1, "loopback", &h).unwrap();
        let p2 = dir.join("series.png");
        let pts: Vec<(f64, f64)> = (0..100)
            .map(|i| (f64::from(i) * 0.1, f64::from(i % 10)))
            .collect();
        time_series_png(&p2, "occupancy", "time (s)", "%", &[("stream", &pts)]).unwrap();
        let p3 = dir.join("bars.png");
        bar_chart_png(
            &p3,
            "throughput",
            "GB/s",
            &[("memcpy".into(), 8.0), ("stream".into(), 9.5)],
            Axis::Linear,
            None,
        )
        .unwrap();
        let p4 = dir.join("bars-log.png");
        bar_chart_png(
            &p4,
            "pipeline",
            "MB/s",
            &[("record".into(), 300.0), ("network".into(), 20_000.0)],
            Axis::Log,
            Some((184.0, "needed")),
        )
        .unwrap();
        for p in [&p1, &p2, &p3, &p4] {
            let img = decoded(p);
            assert_eq!(img.dimensions(), SIZE, "{}", p.display());
            assert!(not_blank(&img), "{} is blank", p.display());
        }
        if std::env::var_os("RTLOOP_KEEP_CHARTS").is_none() {
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}
