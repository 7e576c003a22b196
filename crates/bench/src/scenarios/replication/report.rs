//! `bench replication`'s results: medians over runs per (target, rate), the highest rate that
//! meets each line, results.json and report.md with the seeds' three tables (items remaining,
//! replication bytes per second, replication latency) plus the load actually sustained.

use serde::Serialize;
use std::path::Path;

use crate::load::latency::format_us;
use crate::report::chart::{file_name, Chart, LineChart, Marks, Series};
use crate::report::median;
use crate::report::scenario_out::{write_report, OutputError};
use crate::report::table::{thousands, Table};
use crate::scenarios::replication::args::ReplArgs;
use crate::scenarios::replication::durable::{self, DurableLatency};
use crate::scenarios::replication::stages::StageTiming;
use crate::scenarios::replication::step::StepResult;

mod readers;
pub use readers::ColumnReaders;

/// Issue 4's line: replication latency p99 ≤ 5 ms and items remaining ≤ 1 % of the rate.
pub const ISSUE_P99_US: f64 = 5_000.0;
pub const ISSUE_ITEMS_SHARE: f64 = 0.01;
/// Our own line in the replication scenario: the same p99, items remaining ≤ 15 %.
pub const OURS_ITEMS_SHARE: f64 = 0.15;
/// The seeds' "good enough": p95 ≤ 0.5 s and p99 ≤ 1 s.
pub const SEED_P95_US: f64 = 500_000.0;
pub const SEED_P99_US: f64 = 1_000_000.0;

/// One (target, rate): medians over the runs that reached it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MedianRow {
    pub target: String,
    pub rate: f64,
    pub runs: usize,
    pub sustained_runs: usize,
    pub achieved_per_s: f64,
    pub set_p99_us: f64,
    pub repl_p50_us: f64,
    pub repl_p80_us: f64,
    pub repl_p95_us: f64,
    pub repl_p99_us: f64,
    pub repl_max_us: f64,
    pub repl_timeouts: u64,
    pub items_remaining_avg: f64,
    pub items_remaining_max: f64,
    pub producer_remaining_avg: Option<f64>,
    /// Sluice: the lowest active resident ratio over the nodes at the steps' ends, in %.
    pub resident_pct: Option<f64>,
    pub bytes_mb_per_s_avg: f64,
    pub bytes_mb_per_s_max: f64,
    pub bytes_mb_per_s_min: f64,
    /// `--breakdown`: each stage's medians over the runs (empty without it).
    pub stages: Vec<StageTiming>,
    /// The durable probes' medians over the runs, per level (empty without probes).
    pub durable: Vec<DurableLatency>,
}

impl MedianRow {
    fn of(target: &str, rate: f64, steps: &[&StepResult]) -> MedianRow {
        let m = |f: &dyn Fn(&StepResult) -> f64| {
            median(&steps.iter().map(|s| f(s)).collect::<Vec<_>>())
        };
        let producer: Vec<f64> = steps
            .iter()
            .filter_map(|s| s.lag.producer_remaining_avg)
            .collect();
        MedianRow {
            target: target.to_string(),
            rate,
            runs: steps.len(),
            sustained_runs: steps.iter().filter(|s| s.sustained).count(),
            achieved_per_s: m(&|s| s.achieved_per_s),
            set_p99_us: m(&|s| s.set_latency.p99_us),
            repl_p50_us: m(&|s| s.repl_latency.p50_us),
            repl_p80_us: m(&|s| s.repl_latency.p80_us),
            repl_p95_us: m(&|s| s.repl_latency.p95_us),
            repl_p99_us: m(&|s| s.repl_latency.p99_us),
            repl_max_us: m(&|s| s.repl_latency.max_us),
            repl_timeouts: steps.iter().map(|s| s.repl_latency.timeouts).sum(),
            items_remaining_avg: m(&|s| s.lag.items_remaining_avg),
            items_remaining_max: m(&|s| s.lag.items_remaining_max),
            producer_remaining_avg: (!producer.is_empty()).then(|| median(&producer)),
            resident_pct: {
                let r: Vec<f64> = steps
                    .iter()
                    .filter_map(|s| s.resident_pct.map(|p| p as f64))
                    .collect();
                (!r.is_empty()).then(|| median(&r))
            },
            bytes_mb_per_s_avg: m(&|s| s.lag.bytes_mb_per_s_avg),
            bytes_mb_per_s_max: m(&|s| s.lag.bytes_mb_per_s_max),
            bytes_mb_per_s_min: m(&|s| s.lag.bytes_mb_per_s_min),
            stages: median_stages(steps),
            durable: durable::median_over_runs(
                &steps
                    .iter()
                    .map(|s| s.durable.as_slice())
                    .collect::<Vec<_>>(),
            ),
        }
    }

    /// Most runs held the rate, and no sample timed out.
    pub fn sustained(&self) -> bool {
        self.sustained_runs * 2 > self.runs && self.repl_timeouts == 0
    }

    pub fn meets_issue_line(&self) -> bool {
        self.sustained()
            && self.repl_p99_us <= ISSUE_P99_US
            && self.items_remaining_avg <= ISSUE_ITEMS_SHARE * self.rate
    }

    pub fn meets_our_line(&self) -> bool {
        self.sustained()
            && self.repl_p99_us <= ISSUE_P99_US
            && self.items_remaining_avg <= OURS_ITEMS_SHARE * self.rate
    }

    pub fn meets_seed_line(&self) -> bool {
        self.sustained() && self.repl_p95_us <= SEED_P95_US && self.repl_p99_us <= SEED_P99_US
    }
}

/// Each stage's medians over the steps that timed it, in the order the first one lists them.
fn median_stages(steps: &[&StepResult]) -> Vec<StageTiming> {
    let timed: Vec<&Vec<StageTiming>> = steps.iter().filter_map(|s| s.stages.as_ref()).collect();
    let Some(first) = timed.first() else {
        return Vec::new();
    };
    first
        .iter()
        .map(|st| {
            let of: Vec<&StageTiming> = timed
                .iter()
                .filter_map(|t| t.iter().find(|x| x.stage == st.stage))
                .collect();
            let m =
                |f: fn(&StageTiming) -> f64| median(&of.iter().map(|x| f(x)).collect::<Vec<_>>());
            StageTiming {
                stage: st.stage.clone(),
                count: m(|x| x.count as f64) as u64,
                p50_us: m(|x| x.p50_us),
                p99_us: m(|x| x.p99_us),
            }
        })
        .collect()
}

/// Per target, the highest rate of the ladder such that it and every lower rate meet a line.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Highest {
    pub target: String,
    pub issue_line: Option<f64>,
    pub our_line: Option<f64>,
    pub seed_line: Option<f64>,
    pub sustained: Option<f64>,
}

fn highest(rows: &[&MedianRow], meets: impl Fn(&MedianRow) -> bool) -> Option<f64> {
    rows.iter().take_while(|r| meets(r)).map(|r| r.rate).last()
}

#[derive(Debug, Serialize)]
pub struct ReplReport {
    pub scenario: &'static str,
    pub command: String,
    pub args: ReplArgs,
    pub targets: Vec<String>,
    pub medians: Vec<MedianRow>,
    pub highest: Vec<Highest>,
    pub steps: Vec<StepResult>,
    pub readers: Vec<ColumnReaders>,
}

impl ReplReport {
    pub fn new(
        args: ReplArgs,
        targets: Vec<String>,
        steps: Vec<StepResult>,
        readers: Vec<ColumnReaders>,
    ) -> ReplReport {
        let mut medians = Vec::new();
        for t in &targets {
            for &rate in &args.rates {
                let of: Vec<&StepResult> = steps
                    .iter()
                    .filter(|s| &s.target == t && s.rate == rate)
                    .collect();
                if !of.is_empty() {
                    medians.push(MedianRow::of(t, rate, &of));
                }
            }
        }
        let highest = targets
            .iter()
            .map(|t| {
                let rows: Vec<&MedianRow> = medians.iter().filter(|r| &r.target == t).collect();
                Highest {
                    target: t.clone(),
                    issue_line: highest(&rows, MedianRow::meets_issue_line),
                    our_line: highest(&rows, MedianRow::meets_our_line),
                    seed_line: highest(&rows, MedianRow::meets_seed_line),
                    sustained: highest(&rows, MedianRow::sustained),
                }
            })
            .collect();
        ReplReport {
            scenario: "replication",
            command: std::env::args().collect::<Vec<_>>().join(" "),
            args,
            targets,
            medians,
            highest,
            steps,
            readers,
        }
    }

    fn row(&self, target: &str, rate: f64) -> Option<&MedianRow> {
        self.medians
            .iter()
            .find(|r| r.target == target && r.rate == rate)
    }

    /// One table: a row per rate, a column per target, each cell from `cell`.
    fn by_rate(&self, cell: impl Fn(&MedianRow) -> String) -> Table {
        let mut header = vec!["set rate /s"];
        header.extend(self.targets.iter().map(String::as_str));
        let mut t = Table::new(&header);
        for &rate in &self.args.rates {
            let cells: Vec<String> = self
                .targets
                .iter()
                .map(|tg| self.row(tg, rate).map_or("—".to_string(), &cell))
                .collect();
            if cells.iter().all(|c| c == "—") {
                continue;
            }
            let mut row = vec![thousands(rate)];
            row.extend(cells);
            t.push(row);
        }
        t
    }

    pub fn summary_table(&self) -> Table {
        let mut t = Table::new(&[
            "target",
            "p99 ≤ 5 ms, items ≤ 1 % of rate",
            "p99 ≤ 5 ms, items ≤ 15 %",
            "seeds: p95 ≤ 0.5 s, p99 ≤ 1 s",
            "highest rate held",
        ]);
        let rate = |r: Option<f64>| r.map_or("none".to_string(), thousands);
        for h in &self.highest {
            t.push(vec![
                h.target.clone(),
                rate(h.issue_line),
                rate(h.our_line),
                rate(h.seed_line),
                rate(h.sustained),
            ]);
        }
        t
    }

    pub fn latency_table(&self) -> Table {
        self.by_rate(|r| {
            format!(
                "{} / {} / {}",
                format_us(r.repl_p80_us),
                format_us(r.repl_p95_us),
                format_us(r.repl_p99_us)
            )
        })
    }

    /// `--breakdown`: a row per (target, rate) that timed its stages, each stage's p50 / p99
    /// since the write, and the sampled end-to-end p50 / p99 beside them.
    pub fn stages_table(&self) -> Option<Table> {
        let timed: Vec<&MedianRow> = self
            .medians
            .iter()
            .filter(|r| !r.stages.is_empty())
            .collect();
        let first = *timed.first()?;
        let names: Vec<String> = first
            .stages
            .iter()
            .map(|s| format!("{} p50 / p99", s.stage))
            .collect();
        let mut header = vec!["target", "set rate /s"];
        header.extend(names.iter().map(String::as_str));
        header.push("sampled: set → readable p50 / p99");
        let mut t = Table::new(&header);
        for r in timed {
            let mut row = vec![r.target.clone(), thousands(r.rate)];
            for name in &first.stages {
                row.push(
                    r.stages
                        .iter()
                        .find(|s| s.stage == name.stage)
                        .map_or("—".to_string(), |s| {
                            format!("{} / {}", format_us(s.p50_us), format_us(s.p99_us))
                        }),
                );
            }
            row.push(format!(
                "{} / {}",
                format_us(r.repl_p50_us),
                format_us(r.repl_p99_us)
            ));
            t.push(row);
        }
        Some(t)
    }

    /// The durable probes: each level's p50 / p99 per rate and target.
    pub fn durable_table(&self) -> Option<Table> {
        self.medians
            .iter()
            .any(|r| !r.durable.is_empty())
            .then(|| self.by_rate(|r| durable::cell(&r.durable)))
    }

    pub fn items_table(&self) -> Table {
        self.by_rate(|r| {
            let producer = r
                .producer_remaining_avg
                .map_or(String::new(), |p| format!(" (sent-side {p:.1})"));
            format!(
                "{:.1} / {:.0}{producer}",
                r.items_remaining_avg, r.items_remaining_max
            )
        })
    }

    pub fn bytes_table(&self) -> Table {
        self.by_rate(|r| {
            format!(
                "{:.2} / {:.2} / {:.2}",
                r.bytes_mb_per_s_avg, r.bytes_mb_per_s_max, r.bytes_mb_per_s_min
            )
        })
    }

    pub fn load_table(&self) -> Table {
        self.by_rate(|r| {
            let held = if r.sustained() { "" } else { " (not held)" };
            let resident = r
                .resident_pct
                .map_or(String::new(), |p| format!(", {p:.0} % resident"));
            format!(
                "{} /s, p99 {}{held}{resident}",
                thousands(r.achieved_per_s),
                format_us(r.set_p99_us)
            )
        })
    }

    /// Per target, a line over the rates of `f` of its median rows.
    fn by_rate_lines(&self, f: fn(&MedianRow) -> f64) -> Vec<Series> {
        self.targets
            .iter()
            .map(|t| Series {
                name: t.clone(),
                points: self
                    .medians
                    .iter()
                    .filter(|r| &r.target == t)
                    .map(|r| (r.rate, f(r)))
                    .collect(),
            })
            .collect()
    }

    /// Replication latency p99 and items remaining against the set rate, then, like the
    /// seeds' 11k / 13k pictures, each step of the first run over time.
    pub fn charts(&self) -> Vec<Chart> {
        let by_rate = |file: &str, title: &str, y: &str, f: fn(&MedianRow) -> f64| {
            Chart::line(
                file,
                LineChart {
                    title: title.into(),
                    x_label: "set rate (sets/s)".into(),
                    y_label: y.into(),
                    series: self.by_rate_lines(f),
                    marks: Marks::Lines,
                },
            )
        };
        let mut charts = vec![
            by_rate(
                "repl-latency-p99.png",
                "Replication latency p99 by set rate (median of runs)",
                "replication latency p99 (ms)",
                |r| r.repl_p99_us / 1e3,
            ),
            by_rate(
                "repl-items-remaining.png",
                "Replication items remaining by set rate (median of runs)",
                "items remaining, average",
                |r| r.items_remaining_avg,
            ),
        ];
        let first_run = self.steps.iter().map(|s| s.run).min();
        for s in self.steps.iter().filter(|s| Some(s.run) == first_run) {
            let rate = format!("{}/s", thousands(s.rate));
            let over_time = |what: &str, y: &str, points: &[(f64, f64)], marks| {
                Chart::line(
                    file_name(&["repl", &s.target, &s.rate.to_string(), what]),
                    LineChart {
                        title: format!("{}, {rate}: {what} over time", s.target),
                        x_label: "time after the warm-up (s)".into(),
                        y_label: y.into(),
                        series: vec![Series {
                            name: String::new(),
                            points: points.to_vec(),
                        }],
                        marks,
                    },
                )
            };
            charts.push(over_time(
                "latency",
                "replication latency (ms)",
                &s.timeline.latency_ms,
                Marks::Dots,
            ));
            charts.push(over_time(
                "items remaining",
                "items remaining",
                &s.timeline.items_remaining,
                Marks::Lines,
            ));
        }
        charts
    }

    pub fn markdown(&self) -> String {
        let a = &self.args;
        let mut md = String::new();
        md.push_str("# Replication (seeds 000 and 001)\n\n");
        md.push_str(&format!("Command: `{}`\n\n", self.command));
        let setup =
            if a.connect.is_empty() {
                format!(
                "a local cluster of {} nodes, {} replica(s), {} vbuckets, {} MiB quota per node, \
                 a {} bucket",
                a.nodes, a.replicas, a.vbuckets, a.memory_quota_mb, a.bucket_type.as_str()
            )
            } else {
                format!("the cluster at {}", a.connect.join(","))
            };
        md.push_str(&format!(
            "Setup: {setup}. {} JSON documents of {} B (number fields f0 … and padding) \
             prefilled, then open-loop sets of such documents over the same keys \
             at each rate for {} s ({} s warm-up not measured), {} writers. Replication \
             latency: {} Poisson-timed samples/s, each a set on the active followed by reads \
             of the replica until it serves the value. Items remaining: sampled every 100 ms \
             (Sluice: Σ active high seqno × replicas − Σ replica high seqno; Redis: \
             primary offset − replica offset, in SETs). {} run(s); each figure is the median \
             over runs.\n\n",
            a.items, a.value_bytes, a.step_s, a.warmup_s, a.writers, a.sample_hz, a.runs
        ));
        let sections: [(&str, &str, Table); 5] = [
            (
                "Highest set rate meeting each line",
                "Rates of the ladder only; a rate counts if it and every lower rate meet the line.",
                self.summary_table(),
            ),
            (
                "Replication latency, p80 / p95 / p99",
                "From the set's send to the value being readable on the replica.",
                self.latency_table(),
            ),
            (
                "Replication items remaining, avg / max",
                "Changes the replica has yet to apply; Sluice also gives its producers' own \
                 not-yet-sent count.",
                self.items_table(),
            ),
            (
                "Replication bytes/s, MB/s avg / max / min",
                "Over 1 s windows. Sluice: DCP bytes its replication producers sent; Redis: \
                 growth of master_repl_offset.",
                self.bytes_table(),
            ),
            (
                "Load held",
                "Sets answered per second after the warm-up, and their p99 from the scheduled \
                 send time; for Sluice, the lowest active resident ratio over the nodes at \
                 the step's end.",
                self.load_table(),
            ),
        ];
        for (title, note, table) in sections {
            md.push_str(&format!(
                "## {title}\n\n{note}\n\n{}\n",
                table.to_markdown()
            ));
        }
        if let Some(table) = self.durable_table() {
            md.push_str(&format!(
                "## Durable writes beside the load, p50 / p99\n\nA probe per level sends one \
                 durable set at a time ({} a second, Poisson-timed) to keys of its own while \
                 the step's load runs, timed from its send to its answer. Sluice: `majority`, \
                 and `persistToMajority` on a couchbase bucket; Redis: SET then `WAIT 1`.\n\n{}\n",
                self.args.durable_hz,
                table.to_markdown()
            ));
        }
        if let Some(table) = self.stages_table() {
            md.push_str(&format!(
                "## Where the time goes (--breakdown)\n\nEach stage's time since the write \
                 (its CAS on the active), from the nodes' own histograms merged over the nodes, \
                 over the measured part of each step, every replicated change counted: \
                 `cursor_read` the active's producer read it from the checkpoint, `sent` its \
                 bytes went to the socket, `received` the replica's consumer took it, \
                 `applied` the replica holds it. The sampled column is the bench's own \
                 probe (a set, then replica reads until it shows), which adds the client's \
                 round trips.\n\n{}\n",
                table.to_markdown()
            ));
        }
        if !self.readers.is_empty() {
            md.push_str(&format!(
                "## What the columns' DCP readers did\n\nViews (`views:N`): N real indexes \
                 (`CREATE INDEX bench_ix_i ON default(fi)`, one per number field of the \
                 documents) defined through the query service of the map's first node before \
                 the column's ladder, each built over the prefilled documents (`CREATE INDEX` \
                 answers once the index is online) and fed by the server's DCP streams of \
                 every vbucket from every node; dropped after the column. Beside the load a \
                 query loop sends one point query every {} ms (`SELECT META().id FROM default \
                 WHERE fi = $v`, not_bounded, the indexes in turn, a random value). XDCR: a \
                 second local cluster ({} node(s), {} replica(s)) the bucket is replicated to \
                 by XDCR over the column's ladder, after an initial copy of the prefilled \
                 documents. DCP clients: one connection per node each, every vbucket from \
                 seqno 0, then following.\n\n",
                self.args.views_query_every_ms, self.args.xdcr_nodes, self.args.xdcr_replicas,
            ));
            if let Some(t) = self.indexes_table() {
                md.push_str(&format!(
                    "Indexes: build time of each, entries (approximate) once built and at the \
                     column's end, and the query loop over the column's whole ladder.\n\n{}\n",
                    t.to_markdown()
                ));
            }
            if let Some(t) = self.index_backlog_table() {
                md.push_str(&format!(
                    "The indexes' items remaining (STAT `index`: seqnos of the active vbuckets \
                     not applied yet, summed over the column's indexes), read every {} ms over \
                     the measured part of each step.\n\n{}\n",
                    crate::scenarios::replication::indexes::BACKLOG_EVERY.as_millis(),
                    t.to_markdown()
                ));
            }
            if let Some(t) = self.xdcr_setup_table() {
                md.push_str(&format!(
                    "XDCR, the initial copy: the prefilled documents written to the target \
                     before the ladder.\n\n{}\n",
                    t.to_markdown()
                ));
            }
            if let Some(t) = self.xdcr_table() {
                md.push_str(&format!(
                    "XDCR over the measured part of each step (the source nodes' STAT `xdcr`, \
                     summed, the reading at the warm-up's end subtracted): documents the \
                     target stored and their key + value bytes per second, the lag from each \
                     write at the source to the target's answer over every document (the \
                     pipeline's histogram, not a sample), changes left at the step's end and \
                     how long the replication took to drain after it.\n\n{}\n",
                    t.to_markdown()
                ));
            }
            let dcp = self.readers_table();
            if !dcp.rows.is_empty() {
                md.push_str(&format!(
                    "DCP readers: counts over the column's whole ladder; `ended by producer`: \
                     streams the producer ended (e.g. too slow under memory pressure), each \
                     asked for again.\n\n{}\n",
                    dcp.to_markdown()
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
    use crate::scenarios::replication::background::ReaderCount;
    use crate::scenarios::replication::indexes::IndexActivity;
    use crate::scenarios::replication::measure::LagSummary;
    use crate::scenarios::replication::step::{ReplLatency, Timeline};
    use clap::Parser;

    fn step(target: &str, run: u32, rate: f64, p99_ms: f64, items: f64) -> StepResult {
        StepResult {
            target: target.into(),
            run,
            rate,
            achieved_per_s: rate,
            set_errors: 0,
            sets_behind: 0,
            sustained: true,
            set_latency: Default::default(),
            repl_latency: ReplLatency {
                samples: 100,
                p99_us: p99_ms * 1000.0,
                p95_us: p99_ms * 500.0,
                ..Default::default()
            },
            lag: LagSummary {
                items_remaining_avg: items,
                ..Default::default()
            },
            stream_bytes_per_set: None,
            resident_pct: Some(100),
            stages: None,
            durable: Vec::new(),
            index_backlog: None,
            xdcr: None,
            timeline: Timeline {
                latency_ms: vec![(0.5, p99_ms)],
                items_remaining: vec![(0.1, items)],
            },
        }
    }

    fn args(rates: &str) -> ReplArgs {
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            a: ReplArgs,
        }
        Cli::parse_from(["b", "--rates", rates]).a
    }

    #[test]
    fn the_breakdown_shows_each_stages_medians_beside_the_sampled_latency() {
        let timed = |run, sent_p99| {
            let mut s = step("sluice", run, 1000.0, 1.0, 1.0);
            s.stages = Some(vec![
                StageTiming {
                    stage: "sent".into(),
                    count: 8000,
                    p50_us: 100.0,
                    p99_us: sent_p99,
                },
                StageTiming {
                    stage: "applied".into(),
                    count: 8000,
                    p50_us: 200.0,
                    p99_us: 900.0,
                },
            ]);
            s
        };
        let steps = vec![timed(0, 300.0), timed(1, 700.0), timed(2, 500.0)];
        let r = ReplReport::new(args("1000"), vec!["sluice".into()], steps, vec![]);
        let row = r.row("sluice", 1000.0).unwrap();
        assert_eq!(row.stages[0].p99_us, 500.0, "the median of the runs");
        let table = r.stages_table().unwrap().to_markdown();
        assert!(table.contains("sent p50 / p99"), "{table}");
        assert!(table.contains("applied p50 / p99"), "{table}");
        assert_eq!(table.lines().count(), 3, "{table}");
        assert!(r.markdown().contains("## Where the time goes"));
        // Without --breakdown there is no such section.
        let plain = ReplReport::new(
            args("1000"),
            vec!["s".into()],
            vec![step("s", 0, 1000.0, 1.0, 1.0)],
            vec![],
        );
        assert!(plain.stages_table().is_none());
    }

    #[test]
    fn highest_rate_stops_at_the_first_miss() {
        let steps = vec![
            step("s", 0, 1000.0, 1.0, 1.0),
            step("s", 0, 2000.0, 4.0, 10.0),
            step("s", 0, 3000.0, 6.0, 10.0), // p99 over 5 ms
            step("s", 0, 4000.0, 1.0, 10.0), // meets again: not counted
        ];
        let r = ReplReport::new(args("1000,2000,3000,4000"), vec!["s".into()], steps, vec![]);
        let h = &r.highest[0];
        assert_eq!(h.issue_line, Some(2000.0));
        assert_eq!(h.our_line, Some(2000.0));
        assert_eq!(h.seed_line, Some(4000.0));
        assert_eq!(h.sustained, Some(4000.0));
    }

    #[test]
    fn items_remaining_share_separates_the_lines() {
        // 50 items at 1000/s: 5 % of the rate, over 1 %, under 15 %.
        let r = ReplReport::new(
            args("1000"),
            vec!["s".into()],
            vec![step("s", 0, 1000.0, 1.0, 50.0)],
            vec![],
        );
        assert_eq!(r.highest[0].issue_line, None);
        assert_eq!(r.highest[0].our_line, Some(1000.0));
    }

    #[test]
    fn medians_over_runs_and_missing_rates_show_as_dashes() {
        let steps = vec![
            step("a", 0, 1000.0, 1.0, 1.0),
            step("a", 1, 1000.0, 3.0, 1.0),
            step("a", 2, 1000.0, 2.0, 1.0),
            step("b", 0, 1000.0, 1.0, 1.0),
            step("a", 0, 2000.0, 1.0, 1.0),
        ];
        let r = ReplReport::new(
            args("1000,2000"),
            vec!["a".into(), "b".into()],
            steps,
            vec![],
        );
        let a1000 = r.row("a", 1000.0).unwrap();
        assert_eq!((a1000.runs, a1000.repl_p99_us), (3, 2000.0));
        let md = r.markdown();
        assert!(
            md.contains("## Replication latency, p80 / p95 / p99"),
            "{md}"
        );
        let lat = r.latency_table().to_markdown();
        assert_eq!(lat.lines().count(), 4, "{lat}"); // header, rule, 2 rates
        assert!(
            lat.lines().last().unwrap().contains('—'),
            "b never ran 2000/s: {lat}"
        );
        // Two rate charts with a line per target, then two timelines per first-run step.
        let charts = r.charts();
        assert_eq!(charts.len(), 2 + 2 * 3);
        let crate::report::chart::ChartKind::Line(p99) = &charts[0].kind else {
            panic!("a line chart expected")
        };
        assert_eq!(p99.series[0].points, vec![(1000.0, 2.0), (2000.0, 1.0)]);
        assert_eq!(p99.series[1].points, vec![(1000.0, 1.0)]);
        let files: Vec<&str> = charts.iter().map(|c| c.file.as_str()).collect();
        assert!(files.contains(&"repl-a-2000-latency.png"), "{files:?}");
        assert!(
            files.contains(&"repl-b-1000-items-remaining.png"),
            "{files:?}"
        );
    }

    #[test]
    fn the_readers_table_has_a_row_per_reader_kind_and_run() {
        let readers = vec![ColumnReaders {
            target: "sluice + 2 DCP clients".into(),
            run: 0,
            indexes: None,
            xdcr: None,
            readers: vec![ReaderCount {
                kind: "DCP clients".into(),
                connections: 2,
                items: 1500,
                bytes: 2_000_000,
                streams_opened: 40,
                ended_by_producer: 3,
                errors: 1,
                first_error: Some("refused".into()),
            }],
        }];
        let r = ReplReport::new(args("1000"), vec!["s".into()], vec![], readers);
        let t = r.readers_table().to_markdown();
        assert!(
            t.contains(
                "| sluice + 2 DCP clients | 1 | DCP clients | 2 | 40 | 1,500 | 2.0 | 3 | 1 (first: refused) |"
            ),
            "{t}"
        );
        assert!(r.indexes_table().is_none() && r.index_backlog_table().is_none());
        assert!(r.xdcr_table().is_none() && r.xdcr_setup_table().is_none());
        let md = r.markdown();
        assert!(md.contains("## What the columns' DCP readers did"), "{md}");
        assert!(md.contains("DCP readers: counts over"), "{md}");
        assert!(!md.contains("Indexes: build time"), "{md}");
    }

    #[test]
    fn an_xdcr_column_reports_its_initial_copy_and_each_step() {
        use crate::scenarios::replication::xdcr::{XdcrSetup, XdcrWindow};
        let readers = vec![ColumnReaders {
            target: "sluice + XDCR".into(),
            run: 0,
            readers: vec![],
            indexes: None,
            xdcr: Some(XdcrSetup {
                target_nodes: 1,
                target_replicas: 0,
                replication: "u/default/default".into(),
                initial_docs: 1_000_000,
                initial_s: 40.0,
            }),
        }];
        let mut s = step("sluice + XDCR", 0, 10_000.0, 3.0, 2.0);
        s.xdcr = Some(XdcrWindow {
            docs: 180_000,
            docs_per_s: 10_000.0,
            mb_per_s: 10.6,
            lag_p50_us: 600.0,
            lag_p99_us: 2_400.0,
            lag_max_us: 9_000.0,
            changes_left_end: 12,
            drain_s: 0.1,
        });
        let r = ReplReport::new(
            args("10000"),
            vec!["sluice + XDCR".into()],
            vec![s],
            readers,
        );
        let setup = r.xdcr_setup_table().unwrap().to_markdown();
        assert!(
            setup.contains("| sluice + XDCR | 1 | 1 / 0 | 1,000,000 | 40.0 | 25,000 |"),
            "{setup}"
        );
        let t = r.xdcr_table().unwrap().to_markdown();
        assert!(
            t.contains(
                "| sluice + XDCR | 1 | 10,000 | 10,000 | 10.6 | 600 µs / 2.40 ms / 9.00 ms | 12 | 0.1 | 3.00 ms |"
            ),
            "{t}"
        );
        let md = r.markdown();
        assert!(md.contains("XDCR, the initial copy"), "{md}");
        assert!(!md.contains("DCP readers: counts over"), "{md}");
    }

    #[test]
    fn a_views_column_reports_its_real_indexes_and_query_loop() {
        let readers = vec![ColumnReaders {
            target: "sluice + 5 indexes".into(),
            run: 1,
            readers: vec![],
            xdcr: None,
            indexes: Some(IndexActivity {
                indexes: 2,
                node: "127.0.0.1:13101".into(),
                build_s: vec![3.31, 4.0],
                entries_built: vec![20_000, 20_000],
                entries_end: vec![20_000, 20_010],
                queries: 1200,
                rows: 240,
                query_p50_us: 800.0,
                query_p99_us: 4000.0,
                errors: 0,
                first_error: None,
            }),
        }];
        let mut s = step("sluice + 5 indexes", 1, 5000.0, 2.0, 3.0);
        s.index_backlog = Some(crate::scenarios::replication::indexes::IndexBacklog {
            readings: 16,
            avg: 1234.4,
            max: 5000,
            end: 17,
        });
        let r = ReplReport::new(
            args("5000"),
            vec!["sluice + 5 indexes".into()],
            vec![s],
            readers,
        );
        let t = r.indexes_table().unwrap().to_markdown();
        assert!(
            t.contains("| sluice + 5 indexes | 2 | 2 | 127.0.0.1:13101 | 3.3, 4.0 | 20,000, 20,000 / 20,000, 20,010 | 1,200 | 240 | 800 µs / 4.00 ms | 0 |"),
            "{t}"
        );
        let b = r.index_backlog_table().unwrap().to_markdown();
        assert!(
            b.contains("| sluice + 5 indexes | 2 | 5,000 | 1,234 / 5,000 / 17 |"),
            "{b}"
        );
        let md = r.markdown();
        assert!(md.contains("N real indexes"), "{md}");
        assert!(md.contains("one point query every 100 ms"), "{md}");
        assert!(md.contains("Indexes: build time"), "{md}");
        assert!(
            !md.contains("DCP readers: counts over"),
            "no DCP reader ran: {md}"
        );
        let json = serde_json::to_value(&r.readers[0]).unwrap();
        assert_eq!(json["indexes"]["build_s"][1], 4.0);
    }
}
