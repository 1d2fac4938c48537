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

/// Any drawing failure, as text.
#[derive(Debug)]
pub struct ChartError(pub String);

impl std::error::Error for ChartError {}

impl std::fmt::Display for ChartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot draw chart: {}", self.0)
    }
}

fn err<E: std::fmt::Display>(e: E) -> ChartError {
    ChartError(e.to_string())
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

/// A latency histogram from 0 to `max_ns` in bins of `bin_ns`, counts on a log axis, with the
/// p50 / p99 / p99.9 marked (the ONIX loopback visualiser's view).
pub fn latency_histogram_png(
    path: &Path,
    title: &str,
    h: &LatencyHistogram,
    bin_ns: u64,
    max_ns: u64,
) -> Result<(), ChartError> {
    fonts_available();
    let bins = h.bins(bin_ns, max_ns);
    let top = bins.iter().copied().max().unwrap_or(1).max(1) as f64;
    let s = h.summary();
    let x_us = |ns: u64| ns as f64 / 1e3;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
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
        .build_cartesian_2d(0f64..x_us(max_ns), (0.8f64..top * 2.0).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("latency (µs); the last bin holds everything above")
        .y_desc("count")
        .draw()
        .map_err(err)?;
    chart
        .draw_series(
            bins.iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(i, &c)| {
                    let x0 = x_us(i as u64 * bin_ns);
                    Rectangle::new(
                        [(x0, 0.8), (x0 + x_us(bin_ns), c as f64)],
                        PALETTE[0].filled(),
                    )
                }),
        )
        .map_err(err)?;
    for (q, name, color) in [
        (s.p50_ns, "p50", PALETTE[2]),
        (s.p99_ns, "p99", PALETTE[1]),
        (s.p999_ns, "p99.9", PALETTE[3]),
    ] {
        let x = x_us(q.min(max_ns));
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x, 0.8), (x, top * 2.0)],
                color.stroke_width(2),
            )))
            .map_err(err)?
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
        .map_err(err)?;
    root.present().map_err(err)
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
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, 0f64..y1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(err)?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(err)?
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
        .map_err(err)?;
    root.present().map_err(err)
}

/// Lines on log-log axes (throughput or latency against block size, as FieldTrip's FAQ plots
/// them): each series is a name and its `(x, y)` points; points with x or y <= 0 are skipped.
pub fn loglog_png(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(&str, &[(f64, f64)])],
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
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .y_label_formatter(&|v| format!("{v:.0e}"))
        .draw()
        .map_err(err)?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let pts: Vec<(f64, f64)> = points
            .iter()
            .copied()
            .filter(|(x, y)| *x > 0.0 && *y > 0.0)
            .collect();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(err)?
            .label(*name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// Bars: a label and a value each (for example a throughput beside its memcpy reference).
pub fn bar_chart_png(
    path: &Path,
    title: &str,
    y_label: &str,
    bars: &[(String, f64)],
) -> Result<(), ChartError> {
    fonts_available();
    let top = bars.iter().map(|b| b.1).fold(0f64, f64::max);
    let top = if top > 0.0 { top * 1.15 } else { 1.0 };
    let n = bars.len().max(1);
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(80)
        .y_label_area_size(70)
        .build_cartesian_2d((0..n - 1).into_segmented(), 0f64..top)
        .map_err(err)?;
    let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(y_label)
        .x_labels(n)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .draw()
        .map_err(err)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
            let mut r = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), *v),
                ],
                PALETTE[i % PALETTE.len()].filled(),
            );
            r.set_margin(0, 0, 12, 12);
            r
        }))
        .map_err(err)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
            Text::new(
                format!("{v:.2}"),
                (SegmentValue::CenterOf(i), *v),
                ("sans-serif", 16),
            )
        }))
        .map_err(err)?;
    root.present().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        latency_histogram_png(&p1, "loopback", &h, 1_000, 100_000).unwrap();
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
        )
        .unwrap();
        for p in [&p1, &p2, &p3] {
            let img = decoded(p);
            assert_eq!(img.dimensions(), SIZE, "{}", p.display());
            assert!(not_blank(&img), "{} is blank", p.display());
        }
        if std::env::var_os("RTLOOP_KEEP_CHARTS").is_none() {
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}
