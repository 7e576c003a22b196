//! What `bench durability` reports: per (target, write) the medians over runs of p50, p99,
//! p99.9, max and writes/s; each Sluice level's ratio to its Redis counterpart (a plain set
//! to SET, a durable one to SET + WAIT 1 0); results.json with every run, report.md and a
//! chart of p50 and p99 per row.

use serde::Serialize;
use std::path::Path;

use crate::load::latency::{format_us, LatencySummary};
use crate::report::chart::{BarChart, Chart};
use crate::report::median;
use crate::report::scenario_out::{write_report, OutputError};
use crate::report::table::{thousands, Table};
use crate::scenarios::durability::args::DurabilityArgs;
use crate::scenarios::durability::closed_loop::RowMeasure;
use crate::scenarios::durability::row::{Target, Write};

/// One row of one run.
#[derive(Debug, Clone, Serialize)]
pub struct RowRun {
    pub target: Target,
    pub write: Write,
    pub run: u32,
    /// Successful writes after the warm-up, over all connections.
    pub writes: u64,
    /// Failed writes, warm-up included.
    pub errors: u64,
    pub first_error: Option<String>,
    pub measured_s: f64,
    pub writes_per_s: f64,
    pub latency: LatencySummary,
}

impl RowRun {
    pub fn new(target: Target, write: Write, run: u32, m: &RowMeasure) -> RowRun {
        RowRun {
            target,
            write,
            run,
            writes: m.writes,
            errors: m.errors,
            first_error: m.first_error.clone(),
            measured_s: m.measured.as_secs_f64(),
            writes_per_s: m.writes_per_s(),
            latency: m.latency.summary(),
        }
    }
}

/// One (target, write): medians over its runs.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MedianRow {
    pub target: Target,
    pub write: Write,
    pub runs: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub writes_per_s: f64,
    /// Summed over the runs.
    pub errors: u64,
    pub first_error: Option<String>,
}

impl MedianRow {
    fn of(target: Target, write: Write, runs: &[&RowRun]) -> MedianRow {
        let m = |f: fn(&RowRun) -> f64| median(&runs.iter().map(|r| f(r)).collect::<Vec<_>>());
        MedianRow {
            target,
            write,
            runs: runs.len(),
            p50_us: m(|r| r.latency.p50_us),
            p99_us: m(|r| r.latency.p99_us),
            p999_us: m(|r| r.latency.p999_us),
            max_us: m(|r| r.latency.max_us),
            writes_per_s: m(|r| r.writes_per_s),
            errors: runs.iter().map(|r| r.errors).sum(),
            first_error: runs.iter().find_map(|r| r.first_error.clone()),
        }
    }
}

/// A Sluice row against its Redis counterpart on one Redis target: Sluice ÷ Redis.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Ratio {
    pub sluice: Write,
    pub redis_target: Target,
    pub redis_write: Write,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
}

/// `a / b`, or `None` when `b` has no figure.
fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0 && a.is_finite()).then(|| a / b)
}

fn format_ratio(r: Option<f64>) -> String {
    r.map_or("—".to_string(), |r| format!("{r:.2}×"))
}

#[derive(Debug, Serialize)]
pub struct DurabilityReport {
    pub scenario: &'static str,
    pub command: String,
    pub args: DurabilityArgs,
    pub medians: Vec<MedianRow>,
    pub ratios: Vec<Ratio>,
    pub runs: Vec<RowRun>,
}

impl DurabilityReport {
    /// `rows` lists every (target, write) in the order to report them.
    pub fn new(args: DurabilityArgs, rows: &[(Target, Write)], runs: Vec<RowRun>) -> Self {
        let medians: Vec<MedianRow> = rows
            .iter()
            .filter_map(|&(t, w)| {
                let of: Vec<&RowRun> = runs
                    .iter()
                    .filter(|r| r.target == t && r.write == w)
                    .collect();
                (!of.is_empty()).then(|| MedianRow::of(t, w, &of))
            })
            .collect();
        let mut ratios = Vec::new();
        let redis_targets: Vec<Target> = medians
            .iter()
            .map(|m| m.target)
            .filter(|t| *t != Target::Sluice)
            .fold(Vec::new(), |mut v, t| {
                if !v.contains(&t) {
                    v.push(t);
                }
                v
            });
        for s in medians.iter().filter(|m| m.target == Target::Sluice) {
            let Some(counterpart) = s.write.redis_counterpart() else {
                continue;
            };
            for &rt in &redis_targets {
                if let Some(r) = medians
                    .iter()
                    .find(|m| m.target == rt && m.write == counterpart)
                {
                    ratios.push(Ratio {
                        sluice: s.write,
                        redis_target: rt,
                        redis_write: counterpart,
                        p50: ratio(s.p50_us, r.p50_us),
                        p99: ratio(s.p99_us, r.p99_us),
                    });
                }
            }
        }
        DurabilityReport {
            scenario: "durability",
            command: std::env::args().collect::<Vec<_>>().join(" "),
            args,
            medians,
            ratios,
            runs,
        }
    }

    /// p50, p99, p99.9, max and writes/s per row.
    pub fn latency_table(&self) -> Table {
        let mut t = Table::new(&[
            "target", "write", "p50", "p99", "p99.9", "max", "writes/s", "errors",
        ]);
        for m in &self.medians {
            t.push(vec![
                m.target.label().to_string(),
                m.write.label().to_string(),
                format_us(m.p50_us),
                format_us(m.p99_us),
                format_us(m.p999_us),
                format_us(m.max_us),
                thousands(m.writes_per_s),
                m.errors.to_string(),
            ]);
        }
        t
    }

    /// Each Sluice level against its Redis counterpart, per Redis target; `None` without a
    /// Redis row.
    pub fn ratio_table(&self) -> Option<Table> {
        let mut redis: Vec<Target> = Vec::new();
        for r in &self.ratios {
            if !redis.contains(&r.redis_target) {
                redis.push(r.redis_target);
            }
        }
        if redis.is_empty() {
            return None;
        }
        let headers: Vec<String> = redis
            .iter()
            .map(|t| format!("vs {}: p50 / p99", t.label()))
            .collect();
        let mut header = vec!["sluice write", "redis write"];
        header.extend(headers.iter().map(String::as_str));
        let mut t = Table::new(&header);
        let mut sluice_rows: Vec<Write> = Vec::new();
        for r in &self.ratios {
            if !sluice_rows.contains(&r.sluice) {
                sluice_rows.push(r.sluice);
            }
        }
        for w in sluice_rows {
            let Some(counterpart) = w.redis_counterpart() else {
                continue;
            };
            let mut row = vec![w.label().to_string(), counterpart.label().to_string()];
            for rt in &redis {
                row.push(
                    self.ratios
                        .iter()
                        .find(|r| r.sluice == w && r.redis_target == *rt)
                        .map_or("—".to_string(), |r| {
                            format!("{} / {}", format_ratio(r.p50), format_ratio(r.p99))
                        }),
                );
            }
            t.push(row);
        }
        Some(t)
    }

    /// p50 and p99 per row, in ms.
    pub fn charts(&self) -> Vec<Chart> {
        vec![Chart::bars(
            "durability-latency.png",
            BarChart {
                title: "Write latency per row (median of runs)".into(),
                y_label: "latency (ms)".into(),
                categories: self
                    .medians
                    .iter()
                    .map(|m| format!("{} {}", m.target.label(), m.write.label()))
                    .collect(),
                series: vec![
                    (
                        "p50".into(),
                        self.medians.iter().map(|m| m.p50_us / 1e3).collect(),
                    ),
                    (
                        "p99".into(),
                        self.medians.iter().map(|m| m.p99_us / 1e3).collect(),
                    ),
                ],
            },
        )]
    }

    pub fn markdown(&self) -> String {
        let a = &self.args;
        let mut md = String::from("# Durable writes (issue 23)\n\n");
        md.push_str(&format!("Command: `{}`\n\n", self.command));
        md.push_str(&format!(
            "Setup: a local Sluice cluster of {} nodes, {} replica(s), {} vbuckets, {} MiB \
             quota per node (couchbase bucket){}. {} keys of {} B written once first. Each row: \
             {} connections, each a closed loop of sequential writes over its own keys (one \
             write outstanding), {} s of which the first {} s are not measured{}. Latency runs \
             from a write's send to its answer; writes/s counts the measured writes of all \
             connections. Durable sets carry a {} ms durability timeout. {} run(s), targets \
             alternating run by run; each figure is the median over runs.\n\n",
            a.nodes,
            a.replicas,
            a.vbuckets,
            a.memory_quota_mb,
            if a.vs.is_some() {
                ", beside Redis primary + 1 replica"
            } else {
                ""
            },
            thousands(a.keys as f64),
            a.value_bytes,
            a.connections,
            a.row_s,
            a.warmup_s,
            a.max_writes
                .map_or(String::new(), |n| format!(", at most {n} writes per loop")),
            thousands(f64::from(a.timeout_ms)),
            a.runs,
        ));
        md.push_str("## Latency per write\n\n");
        md.push_str(&self.latency_table().to_markdown());
        if let Some(t) = self.ratio_table() {
            md.push_str("\n## Against Redis\n\n");
            md.push_str(
                "Sluice's median ÷ Redis's (above 1: Sluice is slower). A Sluice set without \
                 durability is set beside a plain SET; a durable one beside SET + WAIT 1 0, \
                 both sent together on the write's connection and done when WAIT answers that \
                 the replica has acknowledged the SET. That acknowledgement says the replica \
                 received it, not that anything is on disk: its guarantee is nearest \
                 `majority`'s.\n\n",
            );
            md.push_str(&t.to_markdown());
        }
        let failed: Vec<&MedianRow> = self
            .medians
            .iter()
            .filter(|m| m.first_error.is_some())
            .collect();
        if !failed.is_empty() {
            md.push_str("\n## Errors\n\n");
            for m in failed {
                md.push_str(&format!(
                    "- {} {}: {} failed write(s), the first: `{}`\n",
                    m.target.label(),
                    m.write.label(),
                    m.errors,
                    m.first_error.as_deref().unwrap_or_default()
                ));
            }
        }
        md
    }

    pub fn write(&self, dir: &Path) -> Result<(), OutputError> {
        write_report(dir, self, &self.markdown(), &self.charts())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::redis_peer::RedisPersistence;
    use crate::load::latency::Latency;
    use crate::scenarios::durability::row::Level;
    use std::time::Duration;

    const AOF: Target = Target::Redis(RedisPersistence::Aof);

    /// A run whose writes all took `us` µs, but one at `tail_us`.
    fn run(target: Target, write: Write, run: u32, us: u64, tail_us: u64) -> RowRun {
        let mut latency = Latency::new();
        for _ in 0..999 {
            latency.record(Duration::from_micros(us));
        }
        latency.record(Duration::from_micros(tail_us));
        let m = RowMeasure {
            latency,
            writes: 1000,
            errors: 0,
            first_error: None,
            measured: Duration::from_secs(2),
        };
        RowRun::new(target, write, run, &m)
    }

    fn args() -> DurabilityArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            a: DurabilityArgs,
        }
        Cli::try_parse_from(["bench", "--vs", "redis"]).unwrap().a
    }

    fn report() -> DurabilityReport {
        let majority = Write::Sluice(Level::Majority);
        let none = Write::Sluice(Level::None);
        let runs = vec![
            run(Target::Sluice, majority, 0, 400, 9_000),
            run(Target::Sluice, majority, 1, 600, 9_000),
            run(Target::Sluice, majority, 2, 500, 9_000),
            run(Target::Sluice, none, 0, 100, 1_000),
            run(AOF, Write::RedisSetWait, 0, 250, 3_000),
            run(AOF, Write::RedisSet, 0, 50, 500),
        ];
        let rows = [
            (Target::Sluice, none),
            (Target::Sluice, majority),
            (Target::Sluice, Write::Sluice(Level::PersistToMajority)),
            (AOF, Write::RedisSet),
            (AOF, Write::RedisSetWait),
        ];
        DurabilityReport::new(args(), &rows, runs)
    }

    #[test]
    fn medians_are_per_row_and_rows_without_runs_are_left_out() {
        let r = report();
        assert_eq!(r.medians.len(), 4, "persistToMajority had no run");
        let m = &r.medians[1];
        assert_eq!((m.write, m.runs), (Write::Sluice(Level::Majority), 3));
        assert!((m.p50_us - 500.0).abs() < 1.0, "{m:?}");
        assert!((m.max_us - 9_000.0).abs() < 10.0, "{m:?}");
        assert!((m.writes_per_s - 500.0).abs() < 1e-9, "{m:?}");
    }

    #[test]
    fn durable_rows_are_compared_with_set_and_wait() {
        let r = report();
        let majority = r
            .ratios
            .iter()
            .find(|x| x.sluice == Write::Sluice(Level::Majority))
            .unwrap();
        assert_eq!(majority.redis_write, Write::RedisSetWait);
        assert!((majority.p50.unwrap() - 2.0).abs() < 0.01, "{majority:?}");
        let none = r
            .ratios
            .iter()
            .find(|x| x.sluice == Write::Sluice(Level::None))
            .unwrap();
        assert_eq!(none.redis_write, Write::RedisSet);
        assert!((none.p50.unwrap() - 2.0).abs() < 0.01, "{none:?}");
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(format_ratio(None), "—");
        assert_eq!(format_ratio(Some(1.234)), "1.23×");
    }

    #[test]
    fn tables_and_markdown_show_every_row() {
        let r = report();
        let text = r.latency_table().to_text();
        assert!(text.starts_with("target"), "{text}");
        assert!(
            text.contains("majority") && text.contains("500 µs"),
            "{text}"
        );
        assert!(text.contains("SET + WAIT 1 0"), "{text}");
        let ratios = r.ratio_table().unwrap().to_markdown();
        assert!(
            ratios.contains("| majority | SET + WAIT 1 0 | 2.00× / "),
            "{ratios}"
        );
        let md = r.markdown();
        for part in [
            "# Durable writes (issue 23)",
            "## Latency per write",
            "| target | write | p50 | p99 | p99.9 | max | writes/s | errors |",
            "## Against Redis",
            "3 run(s)",
        ] {
            assert!(md.contains(part), "{part} missing from:\n{md}");
        }
        assert!(!md.contains("## Errors"), "{md}");
    }

    #[test]
    fn without_redis_there_is_no_ratio_and_errors_are_listed() {
        let mut failed = run(Target::Sluice, Write::Sluice(Level::Majority), 0, 400, 900);
        failed.errors = 2;
        failed.first_error = Some("SYNC_WRITE_AMBIGUOUS".into());
        let rows = [(Target::Sluice, Write::Sluice(Level::Majority))];
        let r = DurabilityReport::new(args(), &rows, vec![failed]);
        assert!(r.ratios.is_empty() && r.ratio_table().is_none());
        let md = r.markdown();
        assert!(!md.contains("## Against Redis"), "{md}");
        assert!(
            md.contains("2 failed write(s), the first: `SYNC_WRITE_AMBIGUOUS`"),
            "{md}"
        );
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains("\"p999_us\""), "{json}");
        assert!(!json.contains("password\":\"password"), "{json}");
    }
}
