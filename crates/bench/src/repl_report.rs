//! `bench replication`'s results: medians over runs per (target, rate), the highest rate that
//! meets each line, results.json and report.md with the seeds' three tables (items remaining,
//! replication bytes per second, replication latency) plus the load actually sustained.

use serde::Serialize;
use std::path::Path;

use crate::latency::format_us;
use crate::repl_args::ReplArgs;
use crate::repl_step::StepResult;
use crate::report::median;
use crate::table::{thousands, Table};

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
    pub bytes_mb_per_s_avg: f64,
    pub bytes_mb_per_s_max: f64,
    pub bytes_mb_per_s_min: f64,
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
            bytes_mb_per_s_avg: m(&|s| s.lag.bytes_mb_per_s_avg),
            bytes_mb_per_s_max: m(&|s| s.lag.bytes_mb_per_s_max),
            bytes_mb_per_s_min: m(&|s| s.lag.bytes_mb_per_s_min),
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
}

impl ReplReport {
    pub fn new(args: ReplArgs, targets: Vec<String>, steps: Vec<StepResult>) -> ReplReport {
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
            format!(
                "{} /s, p99 {}{held}",
                thousands(r.achieved_per_s),
                format_us(r.set_p99_us)
            )
        })
    }

    pub fn markdown(&self) -> String {
        let a = &self.args;
        let mut md = String::new();
        md.push_str("# Replication (seeds 000 and 001)\n\n");
        md.push_str(&format!("Command: `{}`\n\n", self.command));
        let setup = if a.connect.is_empty() {
            format!(
                "a local cluster of {} nodes, {} replica(s), {} vbuckets, {} MiB quota per node",
                a.nodes, a.replicas, a.vbuckets, a.memory_quota_mb
            )
        } else {
            format!("the cluster at {}", a.connect.join(","))
        };
        md.push_str(&format!(
            "Setup: {setup}. {} items of {} B prefilled, then open-loop sets over the same keys \
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
                 send time.",
                self.load_table(),
            ),
        ];
        for (title, note, table) in sections {
            md.push_str(&format!(
                "## {title}\n\n{note}\n\n{}\n",
                table.to_markdown()
            ));
        }
        md
    }

    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        std::fs::write(dir.join("results.json"), serde_json::to_vec_pretty(self)?)?;
        std::fs::write(dir.join("report.md"), self.markdown())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repl_measure::LagSummary;
    use crate::repl_step::ReplLatency;
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
    fn highest_rate_stops_at_the_first_miss() {
        let steps = vec![
            step("s", 0, 1000.0, 1.0, 1.0),
            step("s", 0, 2000.0, 4.0, 10.0),
            step("s", 0, 3000.0, 6.0, 10.0), // p99 over 5 ms
            step("s", 0, 4000.0, 1.0, 10.0), // meets again: not counted
        ];
        let r = ReplReport::new(args("1000,2000,3000,4000"), vec!["s".into()], steps);
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
        let r = ReplReport::new(args("1000,2000"), vec!["a".into(), "b".into()], steps);
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
    }
}
