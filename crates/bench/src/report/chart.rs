//! What a report's charts show, as plain data: line charts (one line or point cloud per
//! series) and grouped bar charts. Reports build these (pure, unit-tested), with or without
//! the `charts` feature; `chart_png` draws them (only with it).

/// One named series of (x, y) points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// How a line chart's series are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marks {
    /// Points joined by lines (a figure per step or per setting).
    Lines,
    /// Unjoined dots (samples over time, as in the seeds' latency pictures).
    Dots,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    pub title: String,
    /// Axis descriptions, units included ("set rate (ops/s)").
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    pub marks: Marks,
}

/// Bars grouped by category: `series[i].1[c]` is series i's bar in category c.
#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    pub title: String,
    pub y_label: String,
    pub categories: Vec<String>,
    pub series: Vec<(String, Vec<f64>)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ChartKind {
    Line(LineChart),
    Bars(BarChart),
}

/// A chart and the PNG file (a plain name, no directories) it is drawn into.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub file: String,
    pub kind: ChartKind,
}

impl Chart {
    pub fn line(file: impl Into<String>, chart: LineChart) -> Chart {
        Chart {
            file: file.into(),
            kind: ChartKind::Line(chart),
        }
    }

    pub fn bars(file: impl Into<String>, chart: BarChart) -> Chart {
        Chart {
            file: file.into(),
            kind: ChartKind::Bars(chart),
        }
    }

    /// Drawn above the chart, and names it where it could not be drawn.
    #[cfg(feature = "charts")]
    pub fn title(&self) -> &str {
        match &self.kind {
            ChartKind::Line(c) => &c.title,
            ChartKind::Bars(c) => &c.title,
        }
    }

    /// Whether there is anything to draw (a chart without a single finite value is left out
    /// rather than drawn empty).
    pub fn has_data(&self) -> bool {
        match &self.kind {
            ChartKind::Line(c) => c
                .series
                .iter()
                .flat_map(|s| &s.points)
                .any(|(x, y)| x.is_finite() && y.is_finite()),
            ChartKind::Bars(c) => {
                !c.categories.is_empty()
                    && c.series.iter().flat_map(|s| &s.1).any(|v| v.is_finite())
            }
        }
    }
}

/// A file name made of `parts`: lower case, anything but letters and digits becomes one
/// `-`, `.png` appended.
pub fn file_name(parts: &[&str]) -> String {
    let mut out = String::new();
    for part in parts {
        for c in part.chars() {
            if c.is_ascii_alphanumeric() {
                out.push(c.to_ascii_lowercase());
            } else if !out.is_empty() && !out.ends_with('-') {
                out.push('-');
            }
        }
        if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out.push_str(".png");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_plain() {
        assert_eq!(
            file_name(&["repl", "sluice + 5 clients", "10000/s"]),
            "repl-sluice-5-clients-10000-s.png"
        );
        assert_eq!(
            file_name(&["Redis (AOF everysec)"]),
            "redis-aof-everysec.png"
        );
        assert_eq!(file_name(&[]), ".png");
    }

    #[test]
    fn empty_charts_have_no_data() {
        let mut c = Chart::line(
            "a.png",
            LineChart {
                title: "t".into(),
                x_label: "x".into(),
                y_label: "y".into(),
                series: vec![Series {
                    name: "s".into(),
                    points: vec![],
                }],
                marks: Marks::Lines,
            },
        );
        assert!(!c.has_data());
        if let ChartKind::Line(l) = &mut c.kind {
            l.series[0].points.push((1.0, 2.0));
        }
        assert!(c.has_data());
        let b = Chart::bars(
            "b.png",
            BarChart {
                title: "t".into(),
                y_label: "y".into(),
                categories: vec![],
                series: vec![("s".into(), vec![1.0])],
            },
        );
        assert!(!b.has_data());
    }
}
