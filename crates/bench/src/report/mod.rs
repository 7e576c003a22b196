//! What the scenarios show and write, shared by all of them.
//! - `median`       — the median over runs, which every scenario reports;
//! - `table`        — aligned text tables for stdout, the same rows as Markdown;
//! - `progress`     — the stderr progress bar while a phase runs;
//! - `chart`        — what a chart shows, as plain data; `chart_png` — draws it with plotters
//!   (only with the `charts` feature: without it, plotters is not linked and the reports say
//!   their charts were not drawn);
//! - `scenario_out` — the output directory: report.md, results.json, config.json, charts;
//! - `rerun`        — `sluice bench rerun DIR`: a scenario again with its saved options.

pub mod chart;
#[cfg(feature = "charts")]
pub mod chart_png;
mod median;
pub mod progress;
pub mod rerun;
pub mod scenario_out;
pub mod table;

pub use median::median;
