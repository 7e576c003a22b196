//! What `bench clients` reports: per case, seed 002's JMeter table (TOTAL row: count,
//! average, min, max in ms, error %, throughput per second) for the write and the read phase,
//! plus JMeter's aggregate-report lines (median, 90 %, 99 %); where the time of a sample goes
//! (bootstrap and request) with the nodes' own figures (connections opened, CPU); and the
//! seed's numbers beside ours. Every figure is the median over runs.

use serde::Serialize;
use std::path::Path;
use std::time::Duration;

use crate::harness::node_probe::NodeReading;
use crate::report::chart::{BarChart, Chart};
use crate::report::median;
use crate::report::scenario_out::{write_report, OutputError};
use crate::report::table::Table;
use crate::scenarios::clients::args::{ClientCase, ClientsArgs};
use crate::scenarios::clients::phase::PhaseResult;

/// Seed 002's published TOTAL rows: (users, servers, ramp s, phase, average ms, throughput/s).
const SEED_002: [(u32, u16, f64, &str, f64, f64); 6] = [
    (100, 1, 4.0, "write", 1006.0, 20.10858637),
    (100, 1, 4.0, "read", 1002.0, 20.14099),
    (500, 5, 10.0, "write", 1010.0, 45.1589595375722),
    (500, 5, 10.0, "read", 1011.0, 45.06534),
    (1000, 10, 20.0, "write", 1519.0, 70.32348805),
    (1000, 10, 20.0, "read", 5790.0, 60.94959469),
];

/// One phase of one run, as reported.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PhaseSummary {
    pub count: u64,
    pub errors: u64,
    pub error_pct: f64,
    pub avg_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub median_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub throughput_per_s: f64,
    pub bootstrap_avg_ms: f64,
    pub bootstrap_p99_ms: f64,
    pub request_avg_ms: f64,
    pub request_p99_ms: f64,
    /// The phase from its first user's start to its end, on the bench's clock.
    pub wall_s: f64,
    /// Connections the nodes accepted during the phase (STAT `total_connections`).
    pub connections_opened: u64,
    /// CPU seconds of all nodes together; None for a cluster the bench did not start.
    pub server_cpu_s: Option<f64>,
    pub bench_cpu_s: f64,
    pub first_error: Option<String>,
}

impl PhaseSummary {
    pub fn new(
        r: &PhaseResult,
        wall: Duration,
        nodes: &NodeReading,
        bench_cpu: Duration,
    ) -> PhaseSummary {
        let ms = |us: f64| us / 1000.0;
        let all = r.samples.summary();
        let boot = r.bootstrap.summary();
        let req = r.request.summary();
        PhaseSummary {
            count: r.count,
            errors: r.errors,
            error_pct: r.error_pct(),
            avg_ms: ms(all.mean_us),
            min_ms: ms(all.min_us),
            max_ms: ms(all.max_us),
            median_ms: ms(all.p50_us),
            p90_ms: ms(r.samples.quantile_us(0.90)),
            p99_ms: ms(all.p99_us),
            throughput_per_s: r.throughput(),
            bootstrap_avg_ms: ms(boot.mean_us),
            bootstrap_p99_ms: ms(boot.p99_us),
            request_avg_ms: ms(req.mean_us),
            request_p99_ms: ms(req.p99_us),
            wall_s: wall.as_secs_f64(),
            connections_opened: nodes.stats.first().copied().unwrap_or(0),
            server_cpu_s: nodes.cpu_total_s(),
            bench_cpu_s: bench_cpu.as_secs_f64(),
            first_error: r.first_error.clone(),
        }
    }

    /// Field by field medians (counts too: runs of one case have the same count).
    fn median_of(runs: &[&PhaseSummary]) -> PhaseSummary {
        let m =
            |f: fn(&PhaseSummary) -> f64| median(&runs.iter().map(|s| f(s)).collect::<Vec<_>>());
        let cpu: Vec<f64> = runs.iter().filter_map(|s| s.server_cpu_s).collect();
        PhaseSummary {
            count: m(|s| s.count as f64).round() as u64,
            errors: m(|s| s.errors as f64).round() as u64,
            error_pct: m(|s| s.error_pct),
            avg_ms: m(|s| s.avg_ms),
            min_ms: m(|s| s.min_ms),
            max_ms: m(|s| s.max_ms),
            median_ms: m(|s| s.median_ms),
            p90_ms: m(|s| s.p90_ms),
            p99_ms: m(|s| s.p99_ms),
            throughput_per_s: m(|s| s.throughput_per_s),
            bootstrap_avg_ms: m(|s| s.bootstrap_avg_ms),
            bootstrap_p99_ms: m(|s| s.bootstrap_p99_ms),
            request_avg_ms: m(|s| s.request_avg_ms),
            request_p99_ms: m(|s| s.request_p99_ms),
            wall_s: m(|s| s.wall_s),
            connections_opened: m(|s| s.connections_opened as f64).round() as u64,
            server_cpu_s: (!cpu.is_empty()).then(|| median(&cpu)),
            bench_cpu_s: m(|s| s.bench_cpu_s),
            first_error: runs.iter().find_map(|s| s.first_error.clone()),
        }
    }
}

/// One case: its runs (each `[write, read]`) and their medians.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub case: ClientCase,
    /// Nodes of the cluster's map (with --connect it may differ from the case's label).
    pub nodes: usize,
    pub runs: Vec<Vec<PhaseSummary>>,
    pub write: PhaseSummary,
    pub read: PhaseSummary,
}

impl CaseResult {
    pub fn new(case: ClientCase, nodes: usize, runs: Vec<Vec<PhaseSummary>>) -> CaseResult {
        assert!(
            runs.iter().all(|r| r.len() == 2),
            "a write and a read per run"
        );
        let phase = |i: usize| {
            let of: Vec<&PhaseSummary> = runs.iter().map(|r| &r[i]).collect();
            PhaseSummary::median_of(&of)
        };
        CaseResult {
            case,
            nodes,
            write: phase(0),
            read: phase(1),
            runs,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ClientsReport {
    pub scenario: &'static str,
    pub settings: ClientsArgs,
    pub cases: Vec<CaseResult>,
}

impl ClientsReport {
    pub fn new(settings: ClientsArgs, cases: Vec<CaseResult>) -> ClientsReport {
        ClientsReport {
            scenario: "clients",
            settings,
            cases,
        }
    }

    /// Seed 002's table for one phase: the TOTAL row, in ms.
    pub fn jmeter_table(p: &PhaseSummary) -> Table {
        let mut t = Table::new(&[
            "sampler_label",
            "count",
            "average",
            "min",
            "max",
            "error%",
            "Throughput/sec",
            "median",
            "90% line",
            "99% line",
        ]);
        t.push(vec![
            "TOTAL".into(),
            p.count.to_string(),
            ms(p.avg_ms),
            ms(p.min_ms),
            ms(p.max_ms),
            format!("{:.1}", p.error_pct),
            format!("{:.2}", p.throughput_per_s),
            ms(p.median_ms),
            ms(p.p90_ms),
            ms(p.p99_ms),
        ]);
        t
    }

    /// Where a sample's time goes, and what the nodes did, per phase of one case.
    pub fn detail_table(c: &CaseResult) -> Table {
        let mut t = Table::new(&[
            "phase",
            "bootstrap avg / p99 (ms)",
            "request avg / p99 (ms)",
            "connections opened (nodes)",
            "server CPU (s)",
            "bench CPU (s)",
            "phase wall (s)",
        ]);
        for (name, p) in [("write", &c.write), ("read", &c.read)] {
            t.push(vec![
                name.into(),
                format!("{} / {}", ms(p.bootstrap_avg_ms), ms(p.bootstrap_p99_ms)),
                format!("{} / {}", ms(p.request_avg_ms), ms(p.request_p99_ms)),
                p.connections_opened.to_string(),
                p.server_cpu_s.map_or("-".into(), |s| format!("{s:.2}")),
                format!("{:.2}", p.bench_cpu_s),
                format!("{:.2}", p.wall_s),
            ]);
        }
        t
    }

    /// Seed 002's figures beside ours, for the cases the seed ran.
    pub fn seed_table(&self) -> Table {
        let mut t = Table::new(&[
            "case",
            "phase",
            "seed average (ms)",
            "Sluice average (ms)",
            "seed throughput/s",
            "Sluice throughput/s",
        ]);
        for c in &self.cases {
            for (name, p) in [("write", &c.write), ("read", &c.read)] {
                let seed = SEED_002.iter().find(|s| {
                    s.0 == c.case.users
                        && s.1 == c.case.servers
                        && s.2 == c.case.ramp_s
                        && s.3 == name
                });
                if let Some(s) = seed {
                    t.push(vec![
                        c.case.label(),
                        name.into(),
                        format!("{:.0}", s.4),
                        ms(p.avg_ms),
                        format!("{:.2}", s.5),
                        format!("{:.2}", p.throughput_per_s),
                    ]);
                }
            }
        }
        t
    }

    fn heading(&self) -> String {
        let s = &self.settings;
        format!(
            "{} run(s) per case, {} B values, {} vbuckets, {} replica(s) where the servers allow, \
             users are fresh smart clients (SCRAM-SHA512) making one request each",
            s.runs, s.value_bytes, s.cluster.vbuckets, s.cluster.replicas
        )
    }

    pub fn to_text(&self) -> String {
        let mut out = format!("{}\n", self.heading());
        for (i, c) in self.cases.iter().enumerate() {
            out.push_str(&format!("\ntest case {}: {}\n", i + 1, c.case.label()));
            for (name, p) in [("write", &c.write), ("read", &c.read)] {
                out.push_str(&format!("{name}:\n{}", Self::jmeter_table(p).to_text()));
            }
        }
        out
    }

    pub fn to_markdown(&self) -> String {
        let mut md = String::from("# sluice bench clients (seed 002)\n\n");
        md.push_str(&format!("{}.\n\n", self.heading()));
        md.push_str(
            "Times are in milliseconds: a sample is one user's visit, from its scheduled start \
             (bootstrap: TCP, HELLO, SASL, bucket, cluster map) to its answer. Throughput is \
             samples over the span from the first start to the last answer, as JMeter counts \
             it, so the ramp-up bounds it (users / ramp-up).\n",
        );
        for (i, c) in self.cases.iter().enumerate() {
            md.push_str(&format!("\n## Test case {}: ({})\n", i + 1, c.case.label()));
            for (name, p) in [("Write", &c.write), ("Read", &c.read)] {
                md.push_str(&format!(
                    "\n### {name}\n\n{}",
                    Self::jmeter_table(p).to_markdown()
                ));
                if let Some(e) = &p.first_error {
                    md.push_str(&format!("\nFirst error: `{e}`\n"));
                }
            }
            md.push_str(&format!(
                "\n### Where the time goes ({} node(s))\n\n{}",
                c.nodes,
                Self::detail_table(c).to_markdown()
            ));
        }
        let seed = self.seed_table();
        if !seed.rows.is_empty() {
            md.push_str(&format!(
                "\n## Seed 002 beside Sluice\n\n{}",
                seed.to_markdown()
            ));
        }
        md
    }

    /// Average and 99th percentile sample time per case and phase.
    pub fn charts(&self) -> Vec<Chart> {
        let categories = self
            .cases
            .iter()
            .map(|c| format!("{} users × {} servers", c.case.users, c.case.servers))
            .collect();
        let series = |name: &str, f: fn(&CaseResult) -> f64| {
            (name.to_string(), self.cases.iter().map(f).collect())
        };
        vec![Chart::bars(
            "clients-sample-time.png",
            BarChart {
                title: "Sample time per case (median of runs)".into(),
                y_label: "sample time (ms)".into(),
                categories,
                series: vec![
                    series("write average", |c| c.write.avg_ms),
                    series("write 99%", |c| c.write.p99_ms),
                    series("read average", |c| c.read.avg_ms),
                    series("read 99%", |c| c.read.p99_ms),
                ],
            },
        )]
    }

    pub fn write(&self, dir: &Path) -> Result<(), OutputError> {
        write_report(dir, self, &self.to_markdown(), &self.charts())
    }
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(avg: f64, tput: f64, cpu: Option<f64>) -> PhaseSummary {
        PhaseSummary {
            count: 100,
            avg_ms: avg,
            throughput_per_s: tput,
            server_cpu_s: cpu,
            ..PhaseSummary::default()
        }
    }

    #[test]
    fn medians_over_runs_per_phase() {
        let runs = vec![
            vec![summary(3.0, 20.0, Some(1.0)), summary(2.0, 19.0, None)],
            vec![summary(1.0, 22.0, Some(3.0)), summary(4.0, 21.0, None)],
            vec![summary(2.0, 21.0, Some(2.0)), summary(6.0, 20.0, None)],
        ];
        let case = "100x1x4".parse().unwrap();
        let c = CaseResult::new(case, 1, runs);
        assert_eq!((c.write.avg_ms, c.write.throughput_per_s), (2.0, 21.0));
        assert_eq!(c.write.server_cpu_s, Some(2.0));
        assert_eq!((c.read.avg_ms, c.read.server_cpu_s), (4.0, None));
        assert_eq!(c.write.count, 100);
    }

    #[test]
    fn the_report_has_the_seeds_tables_and_its_numbers_beside_ours() {
        let case: ClientCase = "100x1x4".parse().unwrap();
        let other: ClientCase = "7x2x1".parse().unwrap();
        let runs = vec![vec![
            summary(1.5, 24.0, Some(0.5)),
            summary(1.2, 24.5, Some(0.4)),
        ]];
        let args = {
            use clap::Parser;
            #[derive(Parser)]
            struct Cli {
                #[command(flatten)]
                a: ClientsArgs,
            }
            Cli::parse_from(["x"]).a
        };
        let report = ClientsReport::new(
            args,
            vec![
                CaseResult::new(case, 1, runs.clone()),
                CaseResult::new(other, 2, runs),
            ],
        );
        let md = report.to_markdown();
        for needle in [
            "## Test case 1: (100 users, 1 server, 4 s ramp-up)",
            "### Write",
            "### Read",
            "| sampler_label | count | average | min | max | error% | Throughput/sec |",
            "| TOTAL | 100 | 1.50 |",
            "## Seed 002 beside Sluice",
            "| 100 users, 1 server, 4 s ramp-up | write | 1006 | 1.50 | 20.11 | 24.00 |",
        ] {
            assert!(md.contains(needle), "missing {needle:?} in\n{md}");
        }
        // The 7-user case is not one of the seed's: no seed row for it.
        assert_eq!(report.seed_table().rows.len(), 2);
        // One bar per case in each of the four series, the figures of the table.
        let charts = report.charts();
        let crate::report::chart::ChartKind::Bars(b) = &charts[0].kind else {
            panic!("bars expected")
        };
        assert_eq!(
            b.categories,
            ["100 users × 1 servers", "7 users × 2 servers"]
        );
        assert_eq!(b.series.len(), 4);
        assert_eq!(b.series[0].1, vec![1.5, 1.5]);
        assert_eq!(b.series[2].1, vec![1.2, 1.2]);
    }
}
