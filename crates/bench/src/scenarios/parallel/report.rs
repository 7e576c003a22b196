//! What `bench parallel` reports: seed 004's table (time to finish and average sum of client
//! latency per clients × nodes), with the CPU of each node (which the seed only eyeballed in
//! htop), the operations the clients made against what the nodes counted, and the seed's own
//! rows beside it. Every figure is the median over runs.

use serde::Serialize;
use std::path::Path;
use std::time::Duration;

use crate::harness::node_probe::NodeReading;
use crate::load::latency::Latency;
use crate::report::chart::{Chart, LineChart, Marks, Series};
use crate::report::median;
use crate::report::scenario_out::{write_report, OutputError};
use crate::report::table::{thousands, Table};
use crate::scenarios::parallel::args::ParallelArgs;
use crate::scenarios::parallel::client::ClientOutcome;

/// Seed 004's rows: (RAM/cores, clients, MDSs, time in minutes, average sum of client
/// latency; None where the seed lost it).
const SEED_004: [(&str, u32, u16, f64, Option<f64>); 12] = [
    ("2GB/1", 8, 1, 99.0, Some(3326.75)),
    ("2GB/1", 8, 2, 80.0, Some(1364.04)),
    ("2GB/1", 8, 3, 63.0, Some(1307.50)),
    ("2GB/1", 16, 1, 323.0, Some(16633.70)),
    ("2GB/1", 16, 2, 263.0, None),
    ("2GB/1", 16, 3, 84.0, Some(2499.43)),
    ("4GB/2", 8, 1, 68.0, Some(2037.89)),
    ("4GB/2", 8, 2, 73.0, Some(1235.29)),
    ("4GB/2", 8, 3, 50.0, Some(847.45)),
    ("4GB/2", 16, 1, 147.0, Some(5277.31)),
    ("4GB/2", 16, 2, 115.0, Some(3274.02)),
    ("4GB/2", 16, 3, 108.0, Some(2876.89)),
];

/// One cell (clients × nodes) of one run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CellRun {
    pub nodes: usize,
    pub clients: u32,
    pub run: u32,
    /// From the common start to the last client's last answer.
    pub time_s: f64,
    /// Each client's sum of operation latencies, averaged over the clients.
    pub avg_latency_sum_s: f64,
    pub ops: u64,
    pub ops_per_s: f64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub op_p50_us: f64,
    pub op_p99_us: f64,
    pub op_max_us: f64,
    /// Each node's CPU over the cell, in % of one core (empty when the bench did not start
    /// the nodes).
    pub node_cpu_pct: Vec<f64>,
    /// What the nodes counted meanwhile (STAT cmd_get, cmd_set, cmd_delete, summed).
    pub node_gets: u64,
    pub node_sets: u64,
    pub node_deletes: u64,
}

impl CellRun {
    pub fn new(
        nodes: usize,
        clients: u32,
        run: u32,
        outcomes: &[ClientOutcome],
        delta: &NodeReading,
        wall: Duration,
    ) -> CellRun {
        let mut all = Latency::new();
        for o in outcomes {
            all.merge(&o.latency);
        }
        let s = all.summary();
        let time_s = outcomes
            .iter()
            .map(|o| o.finished.as_secs_f64())
            .fold(0.0, f64::max);
        let ops: u64 = outcomes.iter().map(|o| o.ops).sum();
        let n = outcomes.len().max(1) as f64;
        let wall_s = wall.as_secs_f64();
        let stat = |i: usize| delta.stats.get(i).copied().unwrap_or(0);
        CellRun {
            nodes,
            clients,
            run,
            time_s,
            avg_latency_sum_s: outcomes
                .iter()
                .map(|o| o.latency_sum.as_secs_f64())
                .sum::<f64>()
                / n,
            ops,
            ops_per_s: if time_s > 0.0 {
                ops as f64 / time_s
            } else {
                0.0
            },
            errors: outcomes.iter().map(|o| o.errors).sum(),
            first_error: outcomes.iter().find_map(|o| o.first_error.clone()),
            op_p50_us: s.p50_us,
            op_p99_us: s.p99_us,
            op_max_us: s.max_us,
            node_cpu_pct: delta
                .cpu
                .iter()
                .map(|c| {
                    if wall_s > 0.0 {
                        100.0 * c.as_secs_f64() / wall_s
                    } else {
                        0.0
                    }
                })
                .collect(),
            node_gets: stat(0),
            node_sets: stat(1),
            node_deletes: stat(2),
        }
    }

    fn median_of(runs: &[&CellRun]) -> CellRun {
        let m = |f: fn(&CellRun) -> f64| median(&runs.iter().map(|c| f(c)).collect::<Vec<_>>());
        let first = runs[0];
        let cpu_nodes = first.node_cpu_pct.len();
        CellRun {
            nodes: first.nodes,
            clients: first.clients,
            run: 0,
            time_s: m(|c| c.time_s),
            avg_latency_sum_s: m(|c| c.avg_latency_sum_s),
            ops: first.ops,
            ops_per_s: m(|c| c.ops_per_s),
            errors: m(|c| c.errors as f64).round() as u64,
            first_error: runs.iter().find_map(|c| c.first_error.clone()),
            op_p50_us: m(|c| c.op_p50_us),
            op_p99_us: m(|c| c.op_p99_us),
            op_max_us: m(|c| c.op_max_us),
            node_cpu_pct: (0..cpu_nodes)
                .map(|i| {
                    median(
                        &runs
                            .iter()
                            .filter_map(|c| c.node_cpu_pct.get(i).copied())
                            .collect::<Vec<_>>(),
                    )
                })
                .collect(),
            node_gets: m(|c| c.node_gets as f64).round() as u64,
            node_sets: m(|c| c.node_sets as f64).round() as u64,
            node_deletes: m(|c| c.node_deletes as f64).round() as u64,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ParallelReport {
    pub scenario: &'static str,
    pub settings: ParallelArgs,
    pub runs: Vec<CellRun>,
    /// One per (nodes, clients), in the order run.
    pub medians: Vec<CellRun>,
}

impl ParallelReport {
    pub fn new(settings: ParallelArgs, runs: Vec<CellRun>) -> ParallelReport {
        let mut keys: Vec<(usize, u32)> = Vec::new();
        for c in &runs {
            if !keys.contains(&(c.nodes, c.clients)) {
                keys.push((c.nodes, c.clients));
            }
        }
        let medians = keys
            .iter()
            .map(|&(n, k)| {
                let of: Vec<&CellRun> = runs
                    .iter()
                    .filter(|c| c.nodes == n && c.clients == k)
                    .collect();
                CellRun::median_of(&of)
            })
            .collect();
        ParallelReport {
            scenario: "parallel",
            settings,
            runs,
            medians,
        }
    }

    /// Seed 004's table, with our figures.
    pub fn summary_table(&self) -> Table {
        let mut t = Table::new(&[
            "# of clients",
            "# of nodes",
            "Time (s)",
            "Average Sum of Client Latency (s)",
            "CPU per node (% of a core)",
            "ops/s",
            "op p50 / p99",
            "errors",
        ]);
        let mut cells: Vec<&CellRun> = self.medians.iter().collect();
        cells.sort_by_key(|c| (c.clients, c.nodes));
        for c in cells {
            t.push(vec![
                c.clients.to_string(),
                c.nodes.to_string(),
                format!("{:.2}", c.time_s),
                format!("{:.2}", c.avg_latency_sum_s),
                if c.node_cpu_pct.is_empty() {
                    "-".into()
                } else {
                    c.node_cpu_pct
                        .iter()
                        .map(|p| format!("{p:.0}"))
                        .collect::<Vec<_>>()
                        .join(" / ")
                },
                thousands(c.ops_per_s),
                format!(
                    "{} / {}",
                    crate::load::latency::format_us(c.op_p50_us),
                    crate::load::latency::format_us(c.op_p99_us)
                ),
                c.errors.to_string(),
            ]);
        }
        t
    }

    /// What the clients asked against what the nodes counted.
    pub fn counts_table(&self) -> Table {
        let mut t = Table::new(&[
            "# of clients",
            "# of nodes",
            "client ops",
            "node gets",
            "node sets",
            "node deletes",
        ]);
        for c in &self.medians {
            t.push(vec![
                c.clients.to_string(),
                c.nodes.to_string(),
                thousands(c.ops as f64),
                thousands(c.node_gets as f64),
                thousands(c.node_sets as f64),
                thousands(c.node_deletes as f64),
            ]);
        }
        t
    }

    /// Seed 004's own rows, as published.
    pub fn seed_table() -> Table {
        let mut t = Table::new(&[
            "RAM/Cores",
            "# of Clients",
            "# of MDSs",
            "Time",
            "Average Sum of Client Latency",
        ]);
        for (ram, clients, mds, minutes, sum) in SEED_004 {
            t.push(vec![
                ram.into(),
                clients.to_string(),
                mds.to_string(),
                format!("{minutes:.0}m"),
                sum.map_or("(lost: corrupt db)".into(), |s| format!("{s:.2}")),
            ]);
        }
        t
    }

    pub fn to_markdown(&self) -> String {
        let s = &self.settings;
        let mut md = String::from("# sluice bench parallel (seed 004)\n\n");
        md.push_str(&format!(
            "Each client builds a tree of {} source files ({} B documents) through its own \
             smart client, one request at a time: unpack (create directories and sources, \
             update each directory), compile (read each source, create its object, update the \
             source), link (read every object, create the image), clean (delete everything). \
             An update is a read and a CAS-checked write. {} run(s) per cell, medians; \
             {} replica(s) where the nodes allow; all nodes and clients share this machine's \
             cores.\n\n",
            s.files, s.doc_bytes, s.runs, s.cluster.replicas
        ));
        md.push_str("## Sluice\n\n");
        md.push_str(&self.summary_table().to_markdown());
        md.push_str(
            "\nTime: from the common start to the last client's last answer. Average sum of \
             client latency: each client's operation latencies added up, averaged over the \
             clients (seconds). CPU per node: each node process's CPU over the cell.\n",
        );
        for c in self.medians.iter().filter(|c| c.first_error.is_some()) {
            md.push_str(&format!(
                "\nFirst error with {} clients on {} node(s): `{}`\n",
                c.clients,
                c.nodes,
                c.first_error.as_deref().unwrap_or_default()
            ));
        }
        md.push_str("\n## Operations: what the clients asked, what the nodes counted\n\n");
        md.push_str(&self.counts_table().to_markdown());
        md.push_str("\n## Seed 004 (Ceph MDS, kernel build on Linode VMs), as published\n\n");
        md.push_str(&Self::seed_table().to_markdown());
        md
    }

    /// Seed 004's two figures against the number of nodes, a line per client count.
    pub fn charts(&self) -> Vec<Chart> {
        let mut clients: Vec<u32> = self.medians.iter().map(|c| c.clients).collect();
        clients.sort_unstable();
        clients.dedup();
        let lines = |f: fn(&CellRun) -> f64| -> Vec<Series> {
            clients
                .iter()
                .map(|&k| {
                    let mut points: Vec<(f64, f64)> = self
                        .medians
                        .iter()
                        .filter(|c| c.clients == k)
                        .map(|c| (c.nodes as f64, f(c)))
                        .collect();
                    points.sort_by(|a, b| a.0.total_cmp(&b.0));
                    Series {
                        name: format!("{k} clients"),
                        points,
                    }
                })
                .collect()
        };
        let chart = |file: &str, title: &str, y_label: &str, f: fn(&CellRun) -> f64| {
            Chart::line(
                file,
                LineChart {
                    title: title.into(),
                    x_label: "nodes".into(),
                    y_label: y_label.into(),
                    series: lines(f),
                    marks: Marks::Lines,
                },
            )
        };
        vec![
            chart(
                "parallel-time.png",
                "Time to finish the builds (median of runs)",
                "time (s)",
                |c| c.time_s,
            ),
            chart(
                "parallel-latency-sum.png",
                "Average sum of client latency (median of runs)",
                "latency sum per client (s)",
                |c| c.avg_latency_sum_s,
            ),
        ]
    }

    pub fn write(&self, dir: &Path) -> Result<(), OutputError> {
        write_report(dir, self, &self.to_markdown(), &self.charts())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(ops: u64, sum_ms: u64, finished_ms: u64) -> ClientOutcome {
        let mut latency = Latency::new();
        for _ in 0..ops {
            latency.record(Duration::from_millis(sum_ms) / ops as u32);
        }
        ClientOutcome {
            latency,
            latency_sum: Duration::from_millis(sum_ms),
            ops,
            errors: 0,
            first_error: None,
            finished: Duration::from_millis(finished_ms),
        }
    }

    #[test]
    fn a_cell_takes_the_last_finisher_and_averages_the_sums() {
        let delta = NodeReading {
            stats: vec![10, 20, 30],
            cpu: vec![Duration::from_millis(500), Duration::from_millis(250)],
        };
        let c = CellRun::new(
            2,
            2,
            0,
            &[outcome(100, 1000, 1500), outcome(100, 3000, 2000)],
            &delta,
            Duration::from_secs(1),
        );
        assert_eq!(c.time_s, 2.0);
        assert_eq!(c.avg_latency_sum_s, 2.0);
        assert_eq!(c.ops, 200);
        assert_eq!(c.ops_per_s, 100.0);
        assert_eq!(c.node_cpu_pct, vec![50.0, 25.0]);
        assert_eq!((c.node_gets, c.node_sets, c.node_deletes), (10, 20, 30));
    }

    #[test]
    fn medians_per_cell_and_the_seed_beside() {
        let delta = NodeReading::default();
        let cell = |clients, finished| {
            CellRun::new(
                1,
                clients,
                0,
                &[outcome(10, 100, finished)],
                &delta,
                Duration::from_secs(1),
            )
        };
        let runs = vec![
            cell(8, 1000),
            cell(16, 4000),
            cell(8, 3000),
            cell(16, 2000),
            cell(8, 2000),
        ];
        let args = {
            use clap::Parser;
            #[derive(Parser)]
            struct Cli {
                #[command(flatten)]
                a: ParallelArgs,
            }
            Cli::parse_from(["x"]).a
        };
        let r = ParallelReport::new(args, runs);
        assert_eq!(r.medians.len(), 2);
        assert_eq!(r.medians[0].time_s, 2.0);
        assert_eq!(r.medians[1].time_s, 3.0);
        let md = r.to_markdown();
        for needle in [
            "| # of clients | # of nodes | Time (s) | Average Sum of Client Latency (s) |",
            "| 8 | 1 | 2.00 |",
            "| 4GB/2 | 16 | 3 | 108m | 2876.89 |",
            "(lost: corrupt db)",
        ] {
            assert!(md.contains(needle), "missing {needle:?} in\n{md}");
        }
        let charts = r.charts();
        let crate::report::chart::ChartKind::Line(time) = &charts[0].kind else {
            panic!("a line chart expected")
        };
        let names: Vec<&str> = time.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["8 clients", "16 clients"]);
        assert_eq!(time.series[0].points, vec![(1.0, 2.0)]);
        assert_eq!(time.series[1].points, vec![(1.0, 3.0)]);
    }
}
