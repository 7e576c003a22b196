//! Draws [`Chart`]s into PNG files with plotters' bitmap backend.
//!
//! Text needs a TrueType font, read at run time (plotters' pure-Rust glyph path, so the
//! build needs no system font library): `SLUICE_BENCH_FONT` if set, else the first of the
//! usual DejaVu / Liberation / Noto paths that exists. Debian's `fonts-dejavu-core` provides
//! one; without any, the charts are skipped and the report says why.

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::report::chart::{BarChart, Chart, ChartKind, LineChart, Marks};

const SIZE: (u32, u32) = (1000, 560);
const FONT: &str = "sans-serif";
/// Label text size in pixels. At 14 px the glyph placement ran "cl" together into a "d".
const LABEL_PX: u32 = 15;
/// Roughly the advance of an average character at [`LABEL_PX`], for wrapping.
const CHAR_PX: u32 = 8;
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/liberation2/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];
/// Series colours, in order (a colour-blind-safe palette).
const PALETTE: &[RGBColor] = &[
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(240, 228, 66),
];

/// What plotters' bitmap backend fails with.
type DrawError = DrawingAreaErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>;

/// Why no chart can be drawn here (found once per process, then kept).
#[derive(Debug, thiserror::Error)]
pub enum FontError {
    #[error(
        "no TrueType font found (install fonts-dejavu-core, or set SLUICE_BENCH_FONT to a .ttf \
         file)"
    )]
    NotFound,
    #[error("reading font {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a usable TrueType font", path.display())]
    NotTrueType { path: PathBuf },
}

/// Why one chart was not drawn.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error(transparent)]
    Font(&'static FontError),
    #[error("preparing {}", path.display())]
    Fill {
        path: PathBuf,
        #[source]
        source: DrawError,
    },
    #[error("drawing {}", path.display())]
    Draw {
        path: PathBuf,
        #[source]
        source: DrawError,
    },
    #[error("writing {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: DrawError,
    },
}

/// The font registered for plotters, once per process; the error says why there is none.
fn font() -> Result<&'static Path, &'static FontError> {
    static FONT_FILE: OnceLock<Result<PathBuf, FontError>> = OnceLock::new();
    FONT_FILE
        .get_or_init(|| {
            let candidates: Vec<PathBuf> = match std::env::var_os("SLUICE_BENCH_FONT") {
                Some(p) => vec![PathBuf::from(p)],
                None => FONT_PATHS.iter().map(PathBuf::from).collect(),
            };
            let path = candidates
                .into_iter()
                .find(|p| p.is_file())
                .ok_or(FontError::NotFound)?;
            let bytes = match std::fs::read(&path) {
                Ok(b) => b,
                Err(source) => return Err(FontError::Read { path, source }),
            };
            // plotters keeps fonts for the life of the process; this happens once.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_err() {
                return Err(FontError::NotTrueType { path });
            }
            Ok(path)
        })
        .as_ref()
        .map(PathBuf::as_path)
}

/// Whether charts can be drawn here; `Err` gives the reason they cannot.
pub fn available() -> Result<(), &'static FontError> {
    font().map(|_| ())
}

fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Draws `chart` into `dir/chart.file`.
pub fn draw(chart: &Chart, dir: &Path) -> Result<(), ChartError> {
    font().map_err(ChartError::Font)?;
    let path = dir.join(&chart.file);
    let root = BitMapBackend::new(&path, SIZE).into_drawing_area();
    // `path.clone()`: the backend borrows `path` until it is dropped.
    root.fill(&WHITE).map_err(|source| ChartError::Fill {
        path: path.clone(),
        source,
    })?;
    match &chart.kind {
        ChartKind::Line(c) => draw_line(c, &root),
        ChartKind::Bars(c) => draw_bars(c, &root),
    }
    .map_err(|source| ChartError::Draw {
        path: path.clone(),
        source,
    })?;
    root.present().map_err(|source| ChartError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(())
}

fn draw_line(c: &LineChart, root: &DrawingArea<BitMapBackend, Shift>) -> Result<(), DrawError> {
    let points = || c.series.iter().flat_map(|s| s.points.iter().copied());
    let (x0, x1) = span(points().map(|p| p.0));
    let (y0, y1) = value_range(points().map(|p| p.1));
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, (FONT, 22))
        .margin(14)
        .x_label_area_size(48)
        .y_label_area_size(78)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    chart
        .configure_mesh()
        .x_desc(&c.x_label)
        .y_desc(&c.y_label)
        .label_style((FONT, LABEL_PX))
        .axis_desc_style((FONT, 16))
        .x_label_formatter(&|v| short_number(*v))
        .y_label_formatter(&|v| short_number(*v))
        .draw()?;
    for (i, s) in c.series.iter().enumerate() {
        let col = colour(i);
        let finite = s
            .points
            .iter()
            .copied()
            .filter(|(x, y)| x.is_finite() && y.is_finite());
        let drawn = match c.marks {
            Marks::Lines => {
                let pts: Vec<(f64, f64)> = finite.collect();
                chart.draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))?;
                chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, col.filled())))?
            }
            Marks::Dots => chart.draw_series(finite.map(|p| Circle::new(p, 2, col.filled())))?,
        };
        drawn.label(&s.name).legend(swatch(col));
    }
    if c.series.len() > 1 || c.series.iter().any(|s| !s.name.is_empty()) {
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    }
    Ok(())
}

type Plot<'a, 'b> =
    ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The series names in a framed box at `at`.
fn legend<'a, 'b: 'a>(chart: &mut Plot<'a, 'b>, at: SeriesLabelPosition) -> Result<(), DrawError> {
    chart
        .configure_series_labels()
        .position(at)
        .label_font((FONT, LABEL_PX))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// A legend entry's colour square.
fn swatch(col: RGBColor) -> impl Fn((i32, i32)) -> Rectangle<(i32, i32)> {
    move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], col.filled())
}

fn draw_bars(c: &BarChart, root: &DrawingArea<BitMapBackend, Shift>) -> Result<(), DrawError> {
    let n = c.categories.len().max(1);
    let (y0, y1) = value_range(c.series.iter().flat_map(|s| s.1.iter().copied()));
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, (FONT, 22))
        .margin(14)
        .x_label_area_size(76)
        .y_label_area_size(78)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), y0..y1)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(&c.y_label)
        .label_style((FONT, LABEL_PX))
        .axis_desc_style((FONT, 16))
        .y_label_formatter(&|v| short_number(*v))
        .draw()?;
    let groups = c.series.len().max(1) as f64;
    let width = 0.8 / groups;
    for (i, (name, values)) in c.series.iter().enumerate() {
        let col = colour(i);
        let bars = values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_finite())
            .map(|(cat, v)| {
                let left = cat as f64 - 0.4 + width * i as f64;
                Rectangle::new(
                    [(left, y0.min(0.0)), (left + width * 0.92, *v)],
                    col.filled(),
                )
            });
        chart.draw_series(bars)?.label(name).legend(swatch(col));
    }
    // Category names under the axis, in pixels (the x axis itself is numeric), wrapped to
    // the width of a category.
    let style =
        TextStyle::from((FONT, LABEL_PX).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    let (left, _) = chart.backend_coord(&(-0.5, y0));
    let (right, _) = chart.backend_coord(&(n as f64 - 0.5, y0));
    let slot = ((right - left).max(1) as u32 / n as u32).max(CHAR_PX);
    for (cat, name) in c.categories.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(cat as f64, y0));
        for (i, line) in wrap(name, (slot / CHAR_PX) as usize).iter().enumerate() {
            let y = py + 8 + i as i32 * (LABEL_PX as i32 + 3);
            root.draw(&Text::new(line.clone(), (px, y), style.clone()))?;
        }
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)
}

/// `text` in lines of at most `width` characters, broken at spaces (a longer word gets a
/// line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(l) if l.len() + 1 + word.len() <= width => {
                l.push(' ');
                l.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// Axis numbers: 12 k, 1.5 M, 0.25.
fn short_number(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1} M", v / 1e6).replace(".0 ", " ")
    } else if a >= 1e4 {
        format!("{:.0} k", v / 1e3)
    } else if a >= 100.0 || a == 0.0 || (v.fract() == 0.0 && a >= 1.0) {
        format!("{v:.0}")
    } else {
        // 2.5, 0.25, 0.5: no trailing zeros.
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The axis range of `values` with some air above, starting at 0 unless values go below
/// it; never empty.
fn value_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (0.0f64, f64::MIN);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if hi <= lo {
        return (lo, lo + 1.0);
    }
    (lo, hi + (hi - lo) * 0.08)
}

/// The x range of the points, exactly (a little wider when there is only one x).
fn span(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return (0.0, 1.0);
    }
    if (hi - lo).abs() < f64::EPSILON {
        let pad = (lo.abs() * 0.1).max(0.5);
        return (lo - pad, hi + pad);
    }
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::chart::Series;

    #[test]
    fn labels_wrap_at_spaces() {
        assert_eq!(
            wrap("in-proc couchbase 2048 MiB", 12),
            ["in-proc", "couchbase", "2048 MiB"]
        );
        assert_eq!(wrap("ephemeral 64 MiB", 20), ["ephemeral 64 MiB"]);
        assert_eq!(
            wrap("averyveryverylongword x", 5),
            ["averyveryverylongword", "x"]
        );
        assert!(wrap("", 5).is_empty());
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(short_number(0.0), "0");
        assert_eq!(short_number(12_000.0), "12 k");
        assert_eq!(short_number(1_500_000.0), "1.5 M");
        assert_eq!(short_number(2_000_000.0), "2 M");
        assert_eq!(short_number(250.0), "250");
        assert_eq!(short_number(2.5), "2.5");
        assert_eq!(short_number(0.25), "0.25");
        assert_eq!(short_number(0.5), "0.5");
        assert_eq!(short_number(1.25), "1.25");
    }

    #[test]
    fn ranges_leave_air_and_are_never_empty() {
        let (lo, hi) = value_range([2.0, 10.0].into_iter());
        assert!(lo == 0.0 && (hi - 10.8).abs() < 1e-9, "{hi}");
        assert_eq!(value_range([f64::NAN].into_iter()), (0.0, 1.0));
        let (lo, hi) = value_range([-5.0, 5.0].into_iter());
        assert!(lo == -5.0 && hi > 5.0);
        assert_eq!(span([3.0, 1.0, 2.0].into_iter()), (1.0, 3.0));
        assert_eq!(span([4.0].into_iter()), (3.5, 4.5));
        assert_eq!(span(std::iter::empty()), (0.0, 1.0));
    }

    /// Draws one of each kind where a font exists (CI installs one); a PNG starts with its
    /// signature and is not blank.
    #[test]
    fn draws_png_files() {
        if let Err(why) = available() {
            // CI installs fonts-dejavu-core, so there a missing font is a failure.
            let why = crate::error::Chain(why);
            assert!(std::env::var_os("CI").is_none(), "{why}");
            eprintln!("skipped: {why}");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let line = Chart::line(
            "l.png",
            LineChart {
                title: "p99".into(),
                x_label: "set rate (ops/s)".into(),
                y_label: "latency (ms)".into(),
                series: vec![
                    Series {
                        name: "a".into(),
                        points: vec![(1.0, 2.0), (2.0, 3.0)],
                    },
                    Series {
                        name: "b".into(),
                        points: vec![(1.0, 1.0), (2.0, f64::NAN)],
                    },
                ],
                marks: Marks::Lines,
            },
        );
        let bars = Chart::bars(
            "b.png",
            BarChart {
                title: "ops".into(),
                y_label: "ops/s".into(),
                categories: vec!["x".into(), "y".into()],
                series: vec![("s".into(), vec![5.0, 7.0]), ("m".into(), vec![6.0, 1.0])],
            },
        );
        for c in [&line, &bars] {
            draw(c, dir.path()).unwrap();
            let png = std::fs::read(dir.path().join(&c.file)).unwrap();
            assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
            assert!(png.len() > 5_000, "{} is {} bytes", c.file, png.len());
        }
    }
}
