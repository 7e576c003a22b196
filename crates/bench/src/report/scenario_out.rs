//! Where a scenario writes: `--out DIR` (default `bench-out/{scenario}`), holding report.md,
//! results.json, config.json (the options, for `sluice bench rerun`) and charts/*.png (with
//! the `charts` feature).

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use crate::report::chart::Chart;

/// What can go wrong writing a scenario's output directory.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("creating {}", dir.display())]
    Create {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `file` names what was being encoded: the options or a file of the directory.
    #[error("encoding {file}")]
    Encode {
        file: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("writing {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl OutputError {
    fn encode(file: &'static str) -> impl FnOnce(serde_json::Error) -> OutputError {
        move |source| OutputError::Encode { file, source }
    }

    fn write(path: PathBuf) -> impl FnOnce(std::io::Error) -> OutputError {
        move |source| OutputError::Write { path, source }
    }
}

/// The subdirectory of the charts.
#[cfg(feature = "charts")]
pub const CHARTS_DIR: &str = "charts";
/// The saved options of a run.
pub const CONFIG_FILE: &str = "config.json";

/// The output directory, created if missing.
pub fn out_dir(given: Option<&Path>, scenario: &str) -> Result<PathBuf, OutputError> {
    let dir = given.map_or_else(
        || PathBuf::from("bench-out").join(scenario),
        Path::to_path_buf,
    );
    create_dir(&dir)?;
    Ok(dir)
}

/// `dir` and its parents, created if missing.
pub fn create_dir(dir: &Path) -> Result<(), OutputError> {
    std::fs::create_dir_all(dir).map_err(|source| OutputError::Create {
        dir: dir.to_path_buf(),
        source,
    })
}

/// What `config.json` holds: enough to run the same scenario again.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedConfig {
    pub scenario: String,
    /// The version of the `sluice` that ran it.
    pub version: String,
    /// The scenario's options as given (before `--quick` is applied); never the password.
    pub args: serde_json::Value,
}

/// Writes `dir/config.json` for `scenario` run with `args`.
pub fn save_config<A: Serialize>(dir: &Path, scenario: &str, args: &A) -> Result<(), OutputError> {
    let saved = SavedConfig {
        scenario: scenario.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        args: serde_json::to_value(args).map_err(OutputError::encode("the options"))?,
    };
    let json = serde_json::to_string_pretty(&saved).map_err(OutputError::encode(CONFIG_FILE))?;
    create_dir(dir)?;
    let path = dir.join(CONFIG_FILE);
    std::fs::write(&path, json + "\n").map_err(OutputError::write(path))
}

/// Writes `results` as results.json into `dir`, draws `charts` into `dir/charts/`, and writes
/// `markdown` as report.md with a Charts section that shows them (or says why there are
/// none).
pub fn write_report<T: Serialize>(
    dir: &Path,
    results: &T,
    markdown: &str,
    charts: &[Chart],
) -> Result<(), OutputError> {
    let json =
        serde_json::to_string_pretty(results).map_err(OutputError::encode("results.json"))?;
    let path = dir.join("results.json");
    std::fs::write(&path, json + "\n").map_err(OutputError::write(path))?;
    let mut md = markdown.to_string();
    md.push_str(&draw_charts(dir, charts));
    let path = dir.join("report.md");
    std::fs::write(&path, md).map_err(OutputError::write(path))?;
    Ok(())
}

/// Draws the charts that have data; returns the report's Charts section.
fn draw_charts(dir: &Path, charts: &[Chart]) -> String {
    let charts: Vec<&Chart> = charts.iter().filter(|c| c.has_data()).collect();
    if charts.is_empty() {
        return String::new();
    }
    format!("\n## Charts\n\n{}", draw_pngs(dir, &charts))
}

/// Draws each chart into `dir/charts/`; returns the Charts section's lines. A chart that
/// cannot be drawn is named with the reason instead: the figures are in the tables anyway.
#[cfg(feature = "charts")]
fn draw_pngs(dir: &Path, charts: &[&Chart]) -> String {
    if let Err(why) = crate::report::chart_png::available() {
        let why = crate::error::Chain(why);
        eprintln!("charts skipped: {why}");
        return format!("No charts were drawn: {why}.\n");
    }
    let charts_dir = dir.join(CHARTS_DIR);
    if let Err(e) = std::fs::create_dir_all(&charts_dir) {
        return format!(
            "No charts were drawn: creating {}: {e}.\n",
            charts_dir.display()
        );
    }
    let mut md = String::new();
    for c in charts {
        match crate::report::chart_png::draw(c, &charts_dir) {
            Ok(()) => md.push_str(&format!(
                "![{}]({CHARTS_DIR}/{})\n\n",
                c.title().replace(['[', ']'], ""),
                c.file
            )),
            Err(e) => {
                let why = crate::error::Chain(&e);
                eprintln!("chart {}: {why}", c.file);
                md.push_str(&format!("- {}: not drawn ({why})\n", c.title()));
            }
        }
    }
    md
}

/// Why a build without plotters draws no charts.
#[cfg(not(feature = "charts"))]
const NO_CHARTS: &str = "built without the `charts` feature";

/// Built without plotters: the report says so, and stderr once per process (not per report).
#[cfg(not(feature = "charts"))]
fn draw_pngs(_dir: &Path, _charts: &[&Chart]) -> String {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| eprintln!("charts: not drawn ({NO_CHARTS})"));
    format!("No charts were drawn: {NO_CHARTS}.\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_both_files_into_a_created_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = out_dir(Some(&tmp.path().join("a/b")), "clients").unwrap();
        write_report(
            &dir,
            &serde_json::json!({"scenario": "clients"}),
            "# hi\n",
            &[],
        )
        .unwrap();
        let json = std::fs::read_to_string(dir.join("results.json")).unwrap();
        assert!(json.contains("\"clients\""));
        assert_eq!(
            std::fs::read_to_string(dir.join("report.md")).unwrap(),
            "# hi\n"
        );
    }

    #[test]
    fn charts_are_drawn_and_shown_in_the_report() {
        use crate::report::chart::{LineChart, Marks, Series};
        let tmp = tempfile::tempdir().unwrap();
        let chart = |file: &str, points: Vec<(f64, f64)>| {
            Chart::line(
                file,
                LineChart {
                    title: format!("t {file}"),
                    x_label: "x (s)".into(),
                    y_label: "y (ms)".into(),
                    series: vec![Series {
                        name: "s".into(),
                        points,
                    }],
                    marks: Marks::Dots,
                },
            )
        };
        let charts = [
            chart("a.png", vec![(0.0, 1.0), (1.0, 2.0)]),
            chart("e.png", vec![]),
        ];
        write_report(tmp.path(), &1, "# r\n", &charts).unwrap();
        let md = std::fs::read_to_string(tmp.path().join("report.md")).unwrap();
        assert!(md.contains("## Charts"), "{md}");
        assert!(!md.contains("e.png"), "an empty chart is left out: {md}");
        // Drawn where this build and this machine can draw; otherwise the report says why.
        #[cfg(feature = "charts")]
        let drawable =
            crate::report::chart_png::available().map_err(|e| crate::error::Chain(e).to_string());
        #[cfg(not(feature = "charts"))]
        let drawable: Result<(), String> = Err(NO_CHARTS.to_string());
        match drawable {
            Ok(()) => {
                assert!(md.contains("![t a.png](charts/a.png)"), "{md}");
                assert!(tmp.path().join("charts/a.png").is_file());
            }
            Err(why) => assert!(md.contains(&why), "{md}"),
        }
    }

    #[test]
    fn the_config_is_saved_without_the_password() {
        let tmp = tempfile::tempdir().unwrap();
        let args = serde_json::json!({"runs": 3});
        save_config(tmp.path(), "parallel", &args).unwrap();
        let text = std::fs::read_to_string(tmp.path().join(CONFIG_FILE)).unwrap();
        let saved: SavedConfig = serde_json::from_str(&text).unwrap();
        assert_eq!((saved.scenario.as_str(), saved.args), ("parallel", args));
    }
}
