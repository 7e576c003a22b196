//! Results: per-run figures, medians over runs, Sluice/peer ratios; written as results.json
//! and report.md, and printed as a table.

use serde::Serialize;
use std::path::Path;

use crate::load::in_process::InProcessResult;
use crate::load::latency::format_us;
use crate::load::measure::RunResult;
use crate::report::chart::{BarChart, Chart};
use crate::report::median;
use crate::report::table::{thousands, Table};
use crate::scenarios::kv::args::KvArgs;

#[derive(Debug, Serialize)]
pub struct Report {
    pub settings: KvArgs,
    /// "closed-loop", "open-loop" or "in-process".
    pub mode: &'static str,
    pub targets: Vec<TargetReport>,
    /// Sluice / peer, when a peer ran in the same invocation.
    pub ratios: Option<Ratios>,
    pub in_process: Vec<InProcessResult>,
}

#[derive(Debug, Serialize)]
pub struct TargetReport {
    pub name: &'static str,
    pub addr: String,
    pub runs: Vec<RunResult>,
    pub median: Median,
}

/// Each figure's median over the runs, taken separately.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Median {
    pub ops_per_s: f64,
    pub get_per_s: f64,
    pub set_per_s: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Ratios {
    pub peer: &'static str,
    /// Sluice ops/s ÷ peer ops/s: above 1 is Sluice faster.
    pub throughput: f64,
    /// Sluice p99 ÷ peer p99: above 1 is Sluice slower.
    pub p99: f64,
}

impl TargetReport {
    pub fn new(name: &'static str, addr: String, runs: Vec<RunResult>, secs: f64) -> TargetReport {
        let m = |f: fn(&RunResult) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
        let median = Median {
            ops_per_s: m(|r| r.ops_per_s),
            get_per_s: m(|r| r.gets as f64) / secs,
            set_per_s: m(|r| r.sets as f64) / secs,
            p50_us: m(|r| r.latency.p50_us),
            p95_us: m(|r| r.latency.p95_us),
            p99_us: m(|r| r.latency.p99_us),
            max_us: m(|r| r.latency.max_us),
        };
        TargetReport {
            name,
            addr,
            runs,
            median,
        }
    }
}

impl Ratios {
    pub fn of(sluice: &Median, peer: &Median, peer_name: &'static str) -> Ratios {
        Ratios {
            peer: peer_name,
            throughput: sluice.ops_per_s / peer.ops_per_s,
            p99: sluice.p99_us / peer.p99_us,
        }
    }
}

impl Report {
    /// One line saying what was run, for the table's heading.
    pub fn heading(&self) -> String {
        let s = &self.settings;
        if self.mode == "in-process" {
            return format!(
                "in-process engine load: {} B values, {} keys, {:.0}% get, {} s × {} run(s), median",
                s.value_bytes,
                s.keys,
                s.get_ratio * 100.0,
                s.duration_s,
                s.runs
            );
        }
        let pacing = if s.is_open_loop() {
            format!("open loop at {} ops/s", thousands(s.rate_ops_per_s))
        } else {
            "closed loop".to_string()
        };
        let mix = match s.collections {
            0 => s.mix.label().to_string(),
            n => format!("{} over {n} collections", s.mix.label()),
        };
        format!(
            "{} connections × pipeline {}, {}, {}, {} B values, {} keys, {:.0}% get, {} s (+{} s warmup) × {} run(s)",
            s.connections,
            s.pipeline,
            pacing,
            mix,
            s.value_bytes,
            s.keys,
            s.get_ratio * 100.0,
            s.duration_s,
            s.warmup_s,
            s.runs
        )
    }

    pub fn table(&self) -> Table {
        if self.mode == "in-process" {
            let mut t = Table::new(&["bucket", "threads", "ops/s (median)", "runs", "errors"]);
            for r in &self.in_process {
                let runs: Vec<String> = r.runs_ops_per_s.iter().map(|x| thousands(*x)).collect();
                t.push(vec![
                    r.bucket_type.to_string(),
                    r.threads.to_string(),
                    thousands(r.median_ops_per_s),
                    runs.join(" "),
                    r.errors.to_string(),
                ]);
            }
            return t;
        }
        let mut t = Table::new(&[
            "target", "ops/s", "get/s", "set/s", "p50", "p95", "p99", "max", "misses", "errors",
            "behind",
        ]);
        let secs = self.settings.duration_s as f64;
        for target in &self.targets {
            for (i, r) in target.runs.iter().enumerate() {
                let name = if target.runs.len() > 1 {
                    format!("{} #{}", target.name, i + 1)
                } else {
                    target.name.to_string()
                };
                t.push(vec![
                    name,
                    thousands(r.ops_per_s),
                    thousands(r.gets as f64 / secs),
                    thousands(r.sets as f64 / secs),
                    format_us(r.latency.p50_us),
                    format_us(r.latency.p95_us),
                    format_us(r.latency.p99_us),
                    format_us(r.latency.max_us),
                    r.get_misses.to_string(),
                    r.errors.to_string(),
                    r.behind_schedule.to_string(),
                ]);
            }
            if target.runs.len() > 1 {
                let m = &target.median;
                t.push(vec![
                    format!("{} median", target.name),
                    thousands(m.ops_per_s),
                    thousands(m.get_per_s),
                    thousands(m.set_per_s),
                    format_us(m.p50_us),
                    format_us(m.p95_us),
                    format_us(m.p99_us),
                    format_us(m.max_us),
                    String::new(),
                    String::new(),
                    String::new(),
                ]);
            }
        }
        t
    }

    pub fn ratio_line(&self) -> Option<String> {
        self.ratios.map(|r| {
            format!(
                "sluice/{}: throughput {:.2}×, p99 latency {:.2}× (medians)",
                r.peer, r.throughput, r.p99
            )
        })
    }

    pub fn to_text(&self) -> String {
        let mut out = format!("{}\n\n{}", self.heading(), self.table().to_text());
        if let Some(line) = self.ratio_line() {
            out.push_str(&format!("\n{line}\n"));
        }
        out
    }

    pub fn to_markdown(&self) -> String {
        let mut out = format!(
            "# sluice bench kv\n\n{}\n\n{}",
            self.heading(),
            self.table().to_markdown()
        );
        if let Some(line) = self.ratio_line() {
            out.push_str(&format!("\n{line}\n"));
        }
        if self.mode == "open-loop" {
            out.push_str(
                "\nLatency counts from each request's scheduled send time; `behind` is how many \
                 scheduled requests were never sent (the target rate was not reached).\n",
            );
        }
        out
    }

    /// Throughput and latency percentiles per target (over sockets), or ops/s per bucket
    /// type (in process).
    pub fn charts(&self) -> Vec<Chart> {
        if !self.in_process.is_empty() {
            return vec![Chart::bars(
                "kv-in-process.png",
                BarChart {
                    title: "Engine called in process (median of runs)".into(),
                    y_label: "ops/s".into(),
                    categories: self
                        .in_process
                        .iter()
                        .map(|r| format!("{} bucket", r.bucket_type))
                        .collect(),
                    series: vec![(
                        "ops/s".into(),
                        self.in_process.iter().map(|r| r.median_ops_per_s).collect(),
                    )],
                },
            )];
        }
        let names: Vec<String> = self.targets.iter().map(|t| t.name.to_string()).collect();
        let per_target = |f: fn(&Median) -> f64| -> Vec<f64> {
            self.targets.iter().map(|t| f(&t.median)).collect()
        };
        vec![
            Chart::bars(
                "kv-throughput.png",
                BarChart {
                    title: "Throughput (median of runs)".into(),
                    y_label: "ops/s".into(),
                    categories: names.clone(),
                    series: vec![("ops/s".into(), per_target(|m| m.ops_per_s))],
                },
            ),
            Chart::bars(
                "kv-latency.png",
                BarChart {
                    title: "Request latency (median of runs)".into(),
                    y_label: "latency (µs)".into(),
                    categories: names,
                    series: vec![
                        ("p50".into(), per_target(|m| m.p50_us)),
                        ("p95".into(), per_target(|m| m.p95_us)),
                        ("p99".into(), per_target(|m| m.p99_us)),
                    ],
                },
            ),
        ]
    }

    pub fn write(&self, dir: &Path) -> Result<(), crate::report::scenario_out::OutputError> {
        crate::report::scenario_out::create_dir(dir)?;
        crate::report::scenario_out::write_report(dir, self, &self.to_markdown(), &self.charts())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_say_which_side_is_better() {
        let m = |ops, p99| Median {
            ops_per_s: ops,
            get_per_s: 0.0,
            set_per_s: 0.0,
            p50_us: 0.0,
            p95_us: 0.0,
            p99_us: p99,
            max_us: 0.0,
        };
        let r = Ratios::of(&m(120_000.0, 400.0), &m(100_000.0, 500.0), "memcached");
        assert!((r.throughput - 1.2).abs() < 1e-9 && (r.p99 - 0.8).abs() < 1e-9);
    }
}
