//! `bench query` results: every run's figures (results.json), their medians over runs, the
//! ratios Sluice ÷ PostgreSQL, the freshness lags and what the setup took (report.md).

use serde::Serialize;
use std::path::Path;

use crate::load::latency::{format_us, LatencySummary};
use crate::report::median;
use crate::report::scenario_out::{write_report, OutputError};
use crate::report::table::{thousands, Table};
use crate::scenarios::query::args::QueryArgs;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum System {
    Sluice,
    Postgres,
}

impl System {
    pub fn label(self) -> &'static str {
        match self {
            System::Sluice => "Sluice",
            System::Postgres => "PostgreSQL",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// `email = ?`, 1 row.
    Point,
    /// `k >= ? ORDER BY k LIMIT 100`.
    Range,
    /// `k BETWEEN ? AND ? + 99 ORDER BY k LIMIT 100`: the same page, bounded.
    Bounded,
    /// The point lookup while the writer updates documents (Sluice: request_plus).
    PointUnderWrites,
}

impl Phase {
    pub const ALL: [Phase; 4] = [
        Phase::Point,
        Phase::Range,
        Phase::Bounded,
        Phase::PointUnderWrites,
    ];

    pub fn label(self, system: System) -> &'static str {
        match (self, system) {
            (Phase::Point, _) => "point lookup (email)",
            (Phase::Range, _) => "range k >= ? LIMIT 100",
            (Phase::Bounded, _) => "range k BETWEEN ? AND ?+99",
            (Phase::PointUnderWrites, System::Sluice) => "point, request_plus, under writes",
            (Phase::PointUnderWrites, System::Postgres) => "point, under writes",
        }
    }
}

/// One phase of one system in one run.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseRun {
    pub system: System,
    pub phase: Phase,
    pub run: u32,
    pub qps: f64,
    pub latency: LatencySummary,
    pub errors: u64,
    pub first_error: Option<String>,
    /// The background writer's achieved rate (the write phase only).
    pub writes_per_s: Option<f64>,
    pub write_errors: u64,
}

/// One freshness rate in one run (Sluice).
#[derive(Debug, Clone, Serialize)]
pub struct FreshRun {
    pub run: u32,
    pub target_writes_per_s: u64,
    pub achieved_writes_per_s: f64,
    pub samples: u64,
    /// Ack → visible, µs.
    pub lag: LatencySummary,
    pub timeouts: u64,
    pub errors: u64,
    pub first_error: Option<String>,
}

/// What loading and indexing took, once per system.
#[derive(Debug, Clone, Serialize)]
pub struct Setup {
    pub system: System,
    pub load_s: f64,
    pub docs_per_s: f64,
    /// Each index's build, in seconds, in creation order.
    pub indexes: Vec<(String, f64)>,
    /// PostgreSQL's VACUUM ANALYZE after the indexes.
    pub analyze_s: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueryReport {
    pub scenario: &'static str,
    pub args: QueryArgs,
    pub setup: Vec<Setup>,
    pub phases: Vec<PhaseRun>,
    pub freshness: Vec<FreshRun>,
}

/// The medians of one (system, phase) over its runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhaseMedian {
    pub qps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub errors: u64,
    pub writes_per_s: Option<f64>,
}

impl QueryReport {
    pub fn median_of(&self, system: System, phase: Phase) -> Option<PhaseMedian> {
        let runs: Vec<&PhaseRun> = self
            .phases
            .iter()
            .filter(|r| r.system == system && r.phase == phase)
            .collect();
        if runs.is_empty() {
            return None;
        }
        let m =
            |f: &dyn Fn(&PhaseRun) -> f64| median(&runs.iter().map(|r| f(r)).collect::<Vec<_>>());
        let writes: Vec<f64> = runs.iter().filter_map(|r| r.writes_per_s).collect();
        Some(PhaseMedian {
            qps: m(&|r| r.qps),
            p50_us: m(&|r| r.latency.p50_us),
            p99_us: m(&|r| r.latency.p99_us),
            errors: runs.iter().map(|r| r.errors).sum(),
            writes_per_s: (!writes.is_empty()).then(|| median(&writes)),
        })
    }

    /// Per phase and system: median qps, p50, p99, errors (all runs), writes/s.
    pub fn query_table(&self) -> Table {
        let mut t = Table::new(&[
            "phase",
            "system",
            "queries/s",
            "p50",
            "p99",
            "errors",
            "writes/s",
        ]);
        for phase in Phase::ALL {
            for system in [System::Sluice, System::Postgres] {
                let Some(m) = self.median_of(system, phase) else {
                    continue;
                };
                t.push(vec![
                    phase.label(system).to_string(),
                    system.label().to_string(),
                    thousands(m.qps),
                    latency(m.p50_us),
                    latency(m.p99_us),
                    m.errors.to_string(),
                    m.writes_per_s.map_or("—".into(), thousands),
                ]);
            }
        }
        t
    }

    /// Sluice ÷ PostgreSQL per phase: queries/s (above 1: Sluice serves more) and p99
    /// (above 1: Sluice is slower). `None` without PostgreSQL.
    pub fn ratio_table(&self) -> Option<Table> {
        let mut t = Table::new(&["phase", "queries/s ratio", "p50 ratio", "p99 ratio"]);
        for phase in Phase::ALL {
            let (Some(s), Some(p)) = (
                self.median_of(System::Sluice, phase),
                self.median_of(System::Postgres, phase),
            ) else {
                continue;
            };
            t.push(vec![
                phase.label(System::Sluice).to_string(),
                ratio(s.qps, p.qps),
                latency_ratio(s.p50_us, p.p50_us),
                latency_ratio(s.p99_us, p.p99_us),
            ]);
        }
        (!t.rows.is_empty()).then_some(t)
    }

    /// Per target rate: median achieved rate, samples (all runs), median p50 and p99 lag.
    pub fn freshness_table(&self) -> Table {
        let mut t = Table::new(&[
            "target writes/s",
            "achieved writes/s",
            "samples",
            "lag p50",
            "lag p99",
            "lag max",
            "timeouts",
            "errors",
        ]);
        // Each rate once, in the order the runs measured them.
        let mut rates: Vec<u64> = Vec::new();
        for f in &self.freshness {
            if !rates.contains(&f.target_writes_per_s) {
                rates.push(f.target_writes_per_s);
            }
        }
        for rate in rates {
            let runs: Vec<&FreshRun> = self
                .freshness
                .iter()
                .filter(|f| f.target_writes_per_s == rate)
                .collect();
            let m = |f: &dyn Fn(&FreshRun) -> f64| {
                median(&runs.iter().map(|r| f(r)).collect::<Vec<_>>())
            };
            t.push(vec![
                thousands(rate as f64),
                thousands(m(&|r| r.achieved_writes_per_s)),
                runs.iter().map(|r| r.samples).sum::<u64>().to_string(),
                format_us(m(&|r| r.lag.p50_us)),
                format_us(m(&|r| r.lag.p99_us)),
                format_us(m(&|r| r.lag.max_us)),
                runs.iter().map(|r| r.timeouts).sum::<u64>().to_string(),
                runs.iter().map(|r| r.errors).sum::<u64>().to_string(),
            ]);
        }
        t
    }

    pub fn setup_table(&self) -> Table {
        let mut t = Table::new(&[
            "system",
            "load",
            "docs/s",
            "ix_email",
            "ix_k",
            "VACUUM ANALYZE",
        ]);
        for s in &self.setup {
            let index = |name: &str| {
                s.indexes
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or("—".into(), |(_, secs)| seconds(*secs))
            };
            t.push(vec![
                s.system.label().to_string(),
                seconds(s.load_s),
                thousands(s.docs_per_s),
                index("ix_email"),
                index("ix_k"),
                s.analyze_s.map_or("—".into(), seconds),
            ]);
        }
        t
    }

    /// The first error of every phase that had one.
    fn error_lines(&self) -> Vec<String> {
        let phases = self.phases.iter().filter_map(|r| {
            r.first_error.as_ref().map(|e| {
                format!(
                    "- {} {}, run {}: {e}",
                    r.system.label(),
                    r.phase.label(r.system),
                    r.run + 1
                )
            })
        });
        let fresh = self.freshness.iter().filter_map(|f| {
            f.first_error.as_ref().map(|e| {
                format!(
                    "- freshness at {} writes/s, run {}: {e}",
                    f.target_writes_per_s,
                    f.run + 1
                )
            })
        });
        phases.chain(fresh).collect()
    }

    pub fn markdown(&self) -> String {
        let a = &self.args;
        let mut md = format!(
            "# sluice bench query\n\n\
             {docs} documents of ~1 KiB JSON (seed {seed}) in Sluice (one `sluice server`, \
             couchbase bucket, {vb} vbuckets, indexes `ix_email` on `email` and `ix_k` on `k`, \
             index memory quota {iq} MB) \
             and PostgreSQL 15 (`docs(id text primary key, doc jsonb)`, B-tree expression \
             indexes, `synchronous_commit = off`, `shared_buffers = {sb} MB`), both on this \
             machine over loopback. {clients} closed-loop clients per phase, {dur} s measured \
             after {warm} s of warm-up; {runs} run(s), the systems alternating, each figure the \
             median over runs. Both systems are loaded once, before the first run. {how}\n\n\
             ## Queries\n\n{queries}\n",
            how = if a.adhoc {
                "Sluice's clients send each statement's text every time (`--adhoc`); \
                 PostgreSQL's use prepared statements."
            } else {
                "Both systems' clients prepare their statements: PostgreSQL's with its \
                 protocol's prepare, Sluice's as an SDK with `adhoc = false` does (`PREPARE` \
                 with `auto_execute` once, then the name)."
            },
            docs = thousands(a.docs as f64),
            seed = a.seed,
            vb = a.vbuckets,
            sb = a.pg_shared_buffers_mb,
            iq = a.index_memory_quota_mb,
            clients = a.clients,
            dur = a.duration_s,
            warm = a.warmup_s,
            runs = a.runs,
            queries = self.query_table().to_markdown(),
        );
        md.push_str(&format!(
            "The write phase runs a writer at {} writes/s (updates of random existing documents: \
             KV sets on Sluice, UPDATEs on PostgreSQL) while the clients look up; Sluice's \
             lookups there are `scan_consistency = request_plus`, PostgreSQL's are plain (always \
             consistent). `writes/s` is what the writer reached. `range k BETWEEN` is the \
             range page with its upper end given too (`k BETWEEN lo AND lo + 99`: the same \
             100 rows), which bounds the index scan whatever a planner does with \
             `ORDER BY … LIMIT`.\n\n",
            thousands(a.write_rate as f64)
        ));
        if let Some(r) = self.ratio_table() {
            md.push_str(
                "## Sluice ÷ PostgreSQL\n\nMedians divided: a queries/s ratio above 1 \
                         means Sluice serves more; a latency ratio above 1 means Sluice is \
                         slower.\n\n",
            );
            md.push_str(&r.to_markdown());
            md.push('\n');
        }
        if !self.freshness.is_empty() {
            md.push_str(&format!(
                "## Index freshness (Sluice)\n\nA writer rewrites {} documents with a new \
                 `email` each time at the target rate; a prober writes a document with a new \
                 `email`, and from the set's ack repeats a not_bounded point query until it \
                 returns it (the lag includes up to one query's latency).\n\n{}\n",
                thousands(a.churn_docs as f64),
                self.freshness_table().to_markdown()
            ));
        }
        md.push_str(&format!(
            "## Setup\n\nLoading (Sluice: pipelined KV sets; PostgreSQL: COPY) and building \
             each index (Sluice: `CREATE INDEX` until online; PostgreSQL: `CREATE INDEX` with \
             `maintenance_work_mem = 512MB`).\n\n{}\n",
            self.setup_table().to_markdown()
        ));
        let errors = self.error_lines();
        if !errors.is_empty() {
            md.push_str("## Errors\n\n");
            md.push_str(&errors.join("\n"));
            md.push('\n');
        }
        md
    }

    pub fn write(&self, out: &Path) -> Result<(), OutputError> {
        write_report(out, self, &self.markdown(), &[])
    }
}

/// `a ÷ b` with two decimals; "—" when `b` is 0.
pub fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}", a / b)
    } else {
        "—".into()
    }
}

/// A latency ratio; "—" when either side answered no query (a latency of 0).
pub fn latency_ratio(a: f64, b: f64) -> String {
    if a > 0.0 {
        ratio(a, b)
    } else {
        "—".into()
    }
}

/// A median latency; "—" when no query succeeded.
fn latency(us: f64) -> String {
    if us > 0.0 {
        format_us(us)
    } else {
        "—".into()
    }
}

/// Seconds, with hundredths below 10 s (a small data set's index builds).
fn seconds(s: f64) -> String {
    if s < 10.0 {
        format!("{s:.2} s")
    } else {
        format!("{s:.1} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: QueryArgs,
    }

    fn args() -> QueryArgs {
        Cli::try_parse_from(["bench"]).unwrap().args
    }

    fn run(system: System, phase: Phase, run: u32, qps: f64, p99_us: f64) -> PhaseRun {
        PhaseRun {
            system,
            phase,
            run,
            qps,
            latency: LatencySummary {
                count: 10,
                p50_us: p99_us / 2.0,
                p99_us,
                ..LatencySummary::default()
            },
            errors: 0,
            first_error: None,
            writes_per_s: None,
            write_errors: 0,
        }
    }

    fn report() -> QueryReport {
        QueryReport {
            scenario: "query",
            args: args(),
            setup: vec![Setup {
                system: System::Postgres,
                load_s: 12.34,
                docs_per_s: 81_037.0,
                indexes: vec![("ix_email".into(), 3.0), ("ix_k".into(), 2.5)],
                analyze_s: Some(1.0),
            }],
            phases: vec![
                run(System::Sluice, Phase::Point, 0, 4000.0, 900.0),
                run(System::Sluice, Phase::Point, 1, 6000.0, 1100.0),
                run(System::Sluice, Phase::Point, 2, 5000.0, 1000.0),
                run(System::Postgres, Phase::Point, 0, 20_000.0, 500.0),
            ],
            freshness: vec![FreshRun {
                run: 0,
                target_writes_per_s: 10_000,
                achieved_writes_per_s: 9_876.0,
                samples: 250,
                lag: LatencySummary {
                    p50_us: 2_500.0,
                    p99_us: 12_000.0,
                    max_us: 20_000.0,
                    ..LatencySummary::default()
                },
                timeouts: 0,
                errors: 0,
                first_error: None,
            }],
        }
    }

    #[test]
    fn the_query_table_holds_the_medians() {
        let text = report().query_table().to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("phase"), "{text}");
        assert!(
            lines[1].contains("Sluice") && lines[1].contains("5,000"),
            "{text}"
        );
        assert!(lines[1].contains("1.00 ms"), "{text}");
        assert!(
            lines[2].contains("PostgreSQL") && lines[2].contains("20,000"),
            "{text}"
        );
        assert!(lines[2].contains("500 µs"), "{text}");
    }

    #[test]
    fn ratios_are_sluice_over_postgres() {
        let t = report().ratio_table().unwrap();
        assert_eq!(t.rows.len(), 1);
        assert_eq!(t.rows[0][1], "0.25");
        assert_eq!(t.rows[0][3], "2.00");
        let mut alone = report();
        alone.phases.retain(|r| r.system == System::Sluice);
        assert!(alone.ratio_table().is_none());
        assert_eq!(ratio(1.0, 0.0), "—");
    }

    #[test]
    fn each_rate_is_one_row_and_phases_without_answers_show_no_latency() {
        let mut r = report();
        let first = r.freshness[0].clone();
        let fifty = FreshRun {
            target_writes_per_s: 50_000,
            ..first.clone()
        };
        r.freshness = vec![
            first.clone(),
            fifty.clone(),
            FreshRun { run: 1, ..first },
            fifty,
        ];
        let t = r.freshness_table();
        assert_eq!(t.rows.len(), 2, "{}", t.to_text());
        assert_eq!(
            (t.rows[0][0].as_str(), t.rows[0][2].as_str()),
            ("10,000", "500")
        );
        assert_eq!(t.rows[1][0], "50,000");
        r.phases
            .push(run(System::Sluice, Phase::Range, 0, 0.0, 0.0));
        r.phases
            .push(run(System::Postgres, Phase::Range, 0, 5000.0, 900.0));
        let q = r.query_table();
        let range = q
            .rows
            .iter()
            .find(|row| row[0].starts_with("range") && row[1] == "Sluice");
        assert_eq!(range.unwrap()[3], "—");
        let ratios = r.ratio_table().unwrap();
        assert_eq!(ratios.rows[1][1..], ["0.00", "—", "—"]);
    }

    #[test]
    fn freshness_and_setup_tables_format() {
        let r = report();
        let md = r.freshness_table().to_markdown();
        assert!(
            md.contains("| 10,000 | 9,876 | 250 | 2.50 ms | 12.00 ms | 20.00 ms | 0 | 0 |"),
            "{md}"
        );
        let setup = r.setup_table().to_markdown();
        assert!(
            setup.contains("| PostgreSQL | 12.3 s | 81,037 | 3.00 s | 2.50 s | 1.00 s |"),
            "{setup}"
        );
        let full = r.markdown();
        for section in [
            "## Queries",
            "## Sluice ÷ PostgreSQL",
            "## Index freshness",
            "## Setup",
        ] {
            assert!(full.contains(section), "{section} missing:\n{full}");
        }
        assert!(!full.contains("## Errors"));
    }
}
