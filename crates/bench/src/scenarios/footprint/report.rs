//! What `bench footprint` reports: per row (path × bucket × quota) update ops/s, GET ops/s and
//! bytes of memory per item, two ways (the server's own accounting, and the process's RSS
//! growth while the items were stored); memcached's socket rows beside ours as ratios; seed
//! 003's published figures below. Throughputs are medians over runs.

use serde::Serialize;
use std::path::Path;

use crate::report::chart::{BarChart, Chart};
use crate::report::median;
use crate::report::scenario_out::{write_report, OutputError};
use crate::report::table::{thousands, Table};
use crate::scenarios::footprint::args::{FootprintArgs, Mode};
use crate::scenarios::kv::args::BucketTypeArg;

/// Seed 003 (Xenon), as published: (what, quota, update ops/s).
const SEED_003: [(&str, &str, &str); 7] = [
    ("in memory, in process", "2 GB", "1,000,000"),
    ("in memory, in process", "64 MB", "500,000"),
    ("in memory, local sockets", "-", "30,000"),
    ("durable, in process", "512 MB", "190,000"),
    ("durable, in process", "64 MB", "50,000"),
    ("durable, local sockets", "-", "30,000"),
    ("durable, replicated, 5 nodes", "2 GB", "2,000"),
];

/// Each phase's figure per run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Phases {
    pub update_ops_per_s: Vec<f64>,
    pub get_ops_per_s: Vec<f64>,
    /// Closed-loop latency p99 per run (socket rows only).
    pub update_p99_us: Vec<f64>,
    pub get_p99_us: Vec<f64>,
    pub errors: u64,
    /// Temporary failures (ETMPFAIL / temporary OOM), each followed by a 1 ms back-off.
    pub refused: u64,
    pub get_misses: u64,
}

impl Phases {
    pub fn add_refused(&mut self, refused: u64) {
        self.refused += refused;
    }

    pub fn add_update(&mut self, ops_per_s: f64, errors: u64, misses: u64) {
        self.update_ops_per_s.push(ops_per_s);
        self.errors += errors;
        self.get_misses += misses;
    }

    pub fn add_get(&mut self, ops_per_s: f64, errors: u64, misses: u64) {
        self.get_ops_per_s.push(ops_per_s);
        self.errors += errors;
        self.get_misses += misses;
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct FootprintRow {
    pub target: &'static str,
    pub mode: Mode,
    /// None for memcached.
    pub bucket_type: Option<BucketTypeArg>,
    pub quota_mb: u64,
    pub items: u64,
    pub update_ops_per_s: f64,
    pub get_ops_per_s: f64,
    pub runs: Phases,
    /// The server's own count after storing the items: Sluice's `mem_used`, memcached's
    /// item `bytes`.
    pub engine_bytes_per_item: Option<f64>,
    /// The process's RSS growth while the items were stored, per item.
    pub rss_bytes_per_item: f64,
    /// Share of the items with their value in memory (couchbase socket rows).
    pub resident_pct: Option<u64>,
}

impl FootprintRow {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        target: &'static str,
        mode: Mode,
        bucket_type: Option<BucketTypeArg>,
        quota_mb: u64,
        items: u64,
        runs: Phases,
        engine_bytes: Option<u64>,
        rss_growth: u64,
        resident_pct: Option<u64>,
    ) -> FootprintRow {
        let per_item = |b: u64| b as f64 / items.max(1) as f64;
        FootprintRow {
            target,
            mode,
            bucket_type,
            quota_mb,
            items,
            update_ops_per_s: median(&runs.update_ops_per_s),
            get_ops_per_s: median(&runs.get_ops_per_s),
            runs,
            engine_bytes_per_item: engine_bytes.map(per_item),
            rss_bytes_per_item: per_item(rss_growth),
            resident_pct,
        }
    }

    fn path(&self) -> &'static str {
        match self.mode {
            Mode::InProcess => "in process",
            Mode::Sockets => "local sockets",
        }
    }

    fn bucket(&self) -> String {
        match self.bucket_type {
            Some(BucketTypeArg::Ephemeral) => "ephemeral (in memory)".into(),
            Some(BucketTypeArg::Couchbase) => "couchbase (durable)".into(),
            None => "memcached".into(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct FootprintReport {
    pub scenario: &'static str,
    pub settings: FootprintArgs,
    pub rows: Vec<FootprintRow>,
}

impl FootprintReport {
    pub fn new(settings: FootprintArgs, rows: Vec<FootprintRow>) -> FootprintReport {
        FootprintReport {
            scenario: "footprint",
            settings,
            rows,
        }
    }

    pub fn table(&self) -> Table {
        let mut t = Table::new(&[
            "path",
            "bucket",
            "quota",
            "update ops/s",
            "GET ops/s",
            "GET / update",
            "bytes/item (server)",
            "bytes/item (RSS)",
            "resident",
            "refused (tmp OOM)",
            "errors",
        ]);
        for r in &self.rows {
            t.push(vec![
                r.path().into(),
                r.bucket(),
                format!("{} MiB", r.quota_mb),
                thousands(r.update_ops_per_s),
                thousands(r.get_ops_per_s),
                if r.update_ops_per_s > 0.0 {
                    format!("{:.2}×", r.get_ops_per_s / r.update_ops_per_s)
                } else {
                    "-".into()
                },
                r.engine_bytes_per_item
                    .map_or("-".into(), |b| format!("{b:.0}")),
                format!("{:.0}", r.rss_bytes_per_item),
                r.resident_pct.map_or("-".into(), |p| format!("{p} %")),
                thousands(r.runs.refused as f64),
                r.runs.errors.to_string(),
            ]);
        }
        t
    }

    /// Sluice's ephemeral socket rows against memcached with the same memory limit.
    pub fn ratio_table(&self) -> Table {
        let mut t = Table::new(&[
            "quota",
            "update ops/s: Sluice / memcached",
            "GET ops/s: Sluice / memcached",
            "bytes/item (RSS): Sluice / memcached",
        ]);
        let ratio = |a: f64, b: f64| {
            if b > 0.0 {
                format!("{:.2}×", a / b)
            } else {
                "-".into()
            }
        };
        for mc in self.rows.iter().filter(|r| r.target == "memcached") {
            let ours = self.rows.iter().find(|r| {
                r.mode == Mode::Sockets
                    && r.bucket_type == Some(BucketTypeArg::Ephemeral)
                    && r.quota_mb == mc.quota_mb
            });
            if let Some(s) = ours {
                t.push(vec![
                    format!("{} MiB", mc.quota_mb),
                    ratio(s.update_ops_per_s, mc.update_ops_per_s),
                    ratio(s.get_ops_per_s, mc.get_ops_per_s),
                    ratio(s.rss_bytes_per_item, mc.rss_bytes_per_item),
                ]);
            }
        }
        t
    }

    pub fn seed_table() -> Table {
        let mut t = Table::new(&["seed 003 (Xenon)", "heap limit", "update ops/s"]);
        for (what, quota, ops) in SEED_003 {
            t.push(vec![what.into(), quota.into(), ops.into()]);
        }
        t
    }

    pub fn to_markdown(&self) -> String {
        let s = &self.settings;
        let mut md = String::from("# sluice bench footprint (seed 003)\n\n");
        md.push_str(&format!(
            "{} items of {} B values (32 B keys) per row, each row a fresh bucket. Update \
             phase: 100 % sets of stored keys; GET phase: 100 % gets; each {} s measured after \
             a {} s warm-up of the same load, {} run(s), medians. In process: {} threads \
             calling the engine. Local sockets: {} connections, one request in flight each, \
             SCRAM-SHA512 and vbucket routing (memcached: no auth).\n\n",
            s.items,
            s.value_bytes,
            s.duration_s,
            s.warmup_s,
            s.runs,
            s.threads(),
            s.connections
        ));
        md.push_str(&self.table().to_markdown());
        md.push_str(
            "\nbytes/item (server): the server's own accounting after storing the items \
             (Sluice `mem_used`, memcached `bytes`) over the item count. bytes/item (RSS): the \
             process's resident memory growth while storing them, over the item count; for \
             in-process rows that is this bench's process. refused: requests answered with a \
             temporary failure (out of memory for now: a durable bucket's unpersisted changes \
             cannot be evicted), summed over the runs; they are not in the ops/s, and the \
             client (connection or thread) then backs off for 1 ms, as the SDKs do.\n",
        );
        let ratios = self.ratio_table();
        if !ratios.rows.is_empty() {
            md.push_str("\n## Against memcached, same memory limit\n\n");
            md.push_str(&ratios.to_markdown());
        }
        md.push_str("\n## Seed 003, as published (footprint: ~400 bytes per service instance)\n\n");
        md.push_str(&Self::seed_table().to_markdown());
        md
    }

    /// Update and GET rates per row, one chart per path (in-process rates are an order of
    /// magnitude above socket rates), and bytes per item over all rows.
    pub fn charts(&self) -> Vec<Chart> {
        let label = |r: &FootprintRow| {
            let bucket = match r.bucket_type {
                Some(BucketTypeArg::Ephemeral) => "ephemeral",
                Some(BucketTypeArg::Couchbase) => "couchbase",
                None => "memcached",
            };
            format!("{bucket} {} MiB", r.quota_mb)
        };
        let mut charts = Vec::new();
        for (mode, file) in [
            (Mode::InProcess, "footprint-ops-in-process.png"),
            (Mode::Sockets, "footprint-ops-sockets.png"),
        ] {
            let rows: Vec<&FootprintRow> = self.rows.iter().filter(|r| r.mode == mode).collect();
            if rows.is_empty() {
                continue;
            }
            charts.push(Chart::bars(
                file,
                BarChart {
                    title: format!("Operations per second, {} (median of runs)", rows[0].path()),
                    y_label: "ops/s".into(),
                    categories: rows.iter().map(|r| label(r)).collect(),
                    series: vec![
                        (
                            "update".into(),
                            rows.iter().map(|r| r.update_ops_per_s).collect(),
                        ),
                        ("GET".into(), rows.iter().map(|r| r.get_ops_per_s).collect()),
                    ],
                },
            ));
        }
        charts.push(Chart::bars(
            "footprint-bytes-per-item.png",
            BarChart {
                title: "Memory per item".into(),
                y_label: "bytes per item".into(),
                categories: self
                    .rows
                    .iter()
                    .map(|r| {
                        let path = if r.mode == Mode::InProcess {
                            "in-proc"
                        } else {
                            "socket"
                        };
                        format!("{path} {}", label(r))
                    })
                    .collect(),
                series: vec![
                    (
                        "server's own count".into(),
                        self.rows
                            .iter()
                            .map(|r| r.engine_bytes_per_item.unwrap_or(f64::NAN))
                            .collect(),
                    ),
                    (
                        "RSS growth".into(),
                        self.rows.iter().map(|r| r.rss_bytes_per_item).collect(),
                    ),
                ],
            },
        ));
        charts
    }

    pub fn write(&self, dir: &Path) -> Result<(), OutputError> {
        write_report(dir, self, &self.to_markdown(), &self.charts())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(target: &'static str, bt: Option<BucketTypeArg>, update: f64, rss: u64) -> FootprintRow {
        let mut p = Phases::default();
        for k in [0.9, 1.0, 1.1] {
            p.add_update(update * k, 0, 0);
            p.add_get(2.0 * update * k, 0, 0);
        }
        FootprintRow::new(
            target,
            Mode::Sockets,
            bt,
            64,
            1000,
            p,
            Some(600_000),
            rss,
            None,
        )
    }

    #[test]
    fn rows_take_medians_and_per_item_bytes() {
        let r = row("sluice", Some(BucketTypeArg::Ephemeral), 100.0, 800_000);
        assert_eq!((r.update_ops_per_s, r.get_ops_per_s), (100.0, 200.0));
        assert_eq!(r.engine_bytes_per_item, Some(600.0));
        assert_eq!(r.rss_bytes_per_item, 800.0);
    }

    #[test]
    fn memcached_rows_become_ratios_against_the_ephemeral_socket_row() {
        let args = {
            use clap::Parser;
            #[derive(Parser)]
            struct Cli {
                #[command(flatten)]
                a: FootprintArgs,
            }
            Cli::parse_from(["x"]).a
        };
        let report = FootprintReport::new(
            args,
            vec![
                row("sluice", Some(BucketTypeArg::Couchbase), 50.0, 900_000),
                row("sluice", Some(BucketTypeArg::Ephemeral), 90.0, 800_000),
                row("memcached", None, 100.0, 400_000),
            ],
        );
        let t = report.ratio_table();
        assert_eq!(t.rows, vec![vec!["64 MiB", "0.90×", "0.90×", "2.00×"]]);
        let md = report.to_markdown();
        for needle in [
            "| path | bucket | quota | update ops/s | GET ops/s |",
            "| local sockets | memcached | 64 MiB | 100 | 200 | 2.00× | 600 | 400 | - | 0 | 0 |",
            "## Against memcached, same memory limit",
            "| durable, replicated, 5 nodes | 2 GB | 2,000 |",
        ] {
            assert!(md.contains(needle), "missing {needle:?} in\n{md}");
        }
        // Socket rows only here: no in-process chart, the socket chart has every row.
        let charts = report.charts();
        let files: Vec<&str> = charts.iter().map(|c| c.file.as_str()).collect();
        assert_eq!(
            files,
            ["footprint-ops-sockets.png", "footprint-bytes-per-item.png"]
        );
        let crate::report::chart::ChartKind::Bars(ops) = &charts[0].kind else {
            panic!("bars expected")
        };
        assert_eq!(
            ops.categories,
            ["couchbase 64 MiB", "ephemeral 64 MiB", "memcached 64 MiB"]
        );
        assert_eq!(ops.series[0].1, vec![50.0, 90.0, 100.0]);
        assert_eq!(ops.series[1].1, vec![100.0, 180.0, 200.0]);
    }
}
