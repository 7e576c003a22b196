//! `sluice bench dcp` results: every run, the medians per setup, the drain ÷ write ratio;
//! printed as tables and written as results.json and report.md.

use serde::Serialize;
use std::path::Path;

use crate::report::median;
use crate::report::table::{thousands, Table};
use crate::scenarios::dcp::args::DcpArgs;
use crate::scenarios::dcp::bucket_setup::{LoadSummary, SetupShape};
use crate::scenarios::dcp::catch_up::CatchUpRun;
use crate::scenarios::dcp::drain::{DrainRun, MB};
use crate::scenarios::dcp::write_rate::WriteRun;

#[derive(Debug, Serialize)]
pub struct DcpReport {
    pub settings: DcpArgs,
    pub cpus: usize,
    pub setups: Vec<SetupReport>,
}

#[derive(Debug, Serialize)]
pub struct SetupReport {
    pub shape: SetupShape,
    /// Key + value bytes of all documents, decimal MB.
    pub data_mb: f64,
    pub load: LoadSummary,
    pub drains: Vec<DrainRun>,
    pub writes: Vec<WriteRun>,
    pub catch_ups: Vec<CatchUpRun>,
    pub median: SetupMedians,
}

/// Each figure's median over the runs, taken separately; `None` when not measured.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct SetupMedians {
    pub drain_items_per_s: Option<f64>,
    pub drain_payload_mb_per_s: Option<f64>,
    pub drain_wire_mb_per_s: Option<f64>,
    pub drain_s: Option<f64>,
    pub write_sets_per_s: Option<f64>,
    pub write_mb_per_s: Option<f64>,
    pub write_p99_us: Option<f64>,
    /// Drain items/s ÷ write sets/s: how many times faster one consumer reads than the
    /// node takes writes.
    pub drain_vs_write: Option<f64>,
    pub catch_up_total_s: Option<f64>,
    pub catch_up_consumer_median_s: Option<f64>,
    pub catch_up_consumer_max_s: Option<f64>,
    pub catch_up_items_per_s: Option<f64>,
    pub catch_up_peak_rss_bytes: Option<f64>,
    pub catch_up_writes_per_s: Option<f64>,
    /// From each write's scheduled send time (open loop).
    pub catch_up_writes_p99_us: Option<f64>,
    /// From each write's actual send: the server's share.
    pub catch_up_writes_service_p99_us: Option<f64>,
}

/// The median of `f` over `runs`, or `None` without runs.
fn med<T>(runs: &[T], f: impl Fn(&T) -> f64) -> Option<f64> {
    (!runs.is_empty()).then(|| median(&runs.iter().map(f).collect::<Vec<_>>()))
}

impl SetupReport {
    pub fn new(
        shape: SetupShape,
        load: LoadSummary,
        drains: Vec<DrainRun>,
        writes: Vec<WriteRun>,
        catch_ups: Vec<CatchUpRun>,
    ) -> SetupReport {
        let with_writes: Vec<&CatchUpRun> =
            catch_ups.iter().filter(|c| c.writes.is_some()).collect();
        let w = |c: &&CatchUpRun| c.writes.clone().unwrap_or_default();
        let mut m = SetupMedians {
            drain_items_per_s: med(&drains, |d| d.items_per_s),
            drain_payload_mb_per_s: med(&drains, |d| d.payload_mb_per_s),
            drain_wire_mb_per_s: med(&drains, |d| d.wire_mb_per_s),
            drain_s: med(&drains, |d| d.consumer.stream_s),
            write_sets_per_s: med(&writes, |r| r.sets_per_s),
            write_mb_per_s: med(&writes, |r| r.mb_per_s),
            write_p99_us: med(&writes, |r| r.load.latency.p99_us),
            drain_vs_write: None,
            catch_up_total_s: med(&catch_ups, |c| c.total_s),
            catch_up_consumer_median_s: med(&catch_ups, |c| c.consumer_median_s),
            catch_up_consumer_max_s: med(&catch_ups, |c| c.consumer_max_s),
            catch_up_items_per_s: med(&catch_ups, |c| c.aggregate_items_per_s),
            catch_up_peak_rss_bytes: med(&catch_ups, |c| c.rss.peak_bytes as f64),
            catch_up_writes_per_s: med(&with_writes, |c| w(c).ops_per_s),
            catch_up_writes_p99_us: med(&with_writes, |c| w(c).latency.p99_us),
            catch_up_writes_service_p99_us: med(&with_writes, |c| w(c).service_latency.p99_us),
        };
        m.drain_vs_write = match (m.drain_items_per_s, m.write_sets_per_s) {
            (Some(d), Some(w)) if w > 0.0 => Some(d / w),
            _ => None,
        };
        SetupReport {
            data_mb: (shape.items * shape.doc_bytes()) as f64 / MB,
            shape,
            load,
            drains,
            writes,
            catch_ups,
            median: m,
        }
    }
}

impl DcpReport {
    pub fn heading(&self) -> String {
        let a = &self.settings;
        format!(
            "sluice bench dcp --scenario {}: {} run(s), median; {} vbuckets, window {} KiB; \
             write load: {} connections, closed loop, set only, {} s (+{} s warmup); \
             catch-up: {} consumers{}; {} CPUs",
            serde_json::to_value(a.scenario)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            a.runs,
            a.vbuckets,
            a.window_bytes / 1024,
            a.connections,
            a.write_duration_s,
            a.write_warmup_s,
            a.consumers,
            if a.write_rate_ops_per_s > 0.0 {
                format!(
                    " under {} sets/s (open loop)",
                    thousands(a.write_rate_ops_per_s)
                )
            } else {
                String::new()
            },
            self.cpus
        )
    }

    fn tables(&self) -> Vec<(&'static str, Table)> {
        [
            ("Drain vs write throughput (medians)", self.summary_table()),
            ("Drain runs (one consumer)", self.drain_table()),
            ("Write runs (closed loop, set only)", self.write_table()),
            ("Catch-up", self.catch_up_table()),
        ]
        .into_iter()
        .filter(|(_, t)| !t.rows.is_empty())
        .collect()
    }

    pub fn to_text(&self) -> String {
        let mut out = format!("{}\n", self.heading());
        for (title, t) in self.tables() {
            out.push_str(&format!("\n{title}\n{}", t.to_text()));
        }
        out
    }

    pub fn to_markdown(&self) -> String {
        let mut out = format!("# sluice bench dcp\n\n{}\n", self.heading());
        for (title, t) in self.tables() {
            out.push_str(&format!("\n## {title}\n\n{}", t.to_markdown()));
        }
        out.push_str(
            "\nMB are decimal (10^6 bytes). Drain MB/s counts key + value bytes; wire MB/s \
             counts whole DCP messages (header, extras, key, value). A drain runs from the \
             stream requests to the last StreamEnd; a catch-up from the common start \
             (connects included) to the last consumer's last StreamEnd. CPU is in cores \
             (1.00 = one core busy throughout). Write sets/s counts successful sets of the \
             closed-loop run (`errors` are other answers, e.g. temporary failures); load \
             sets/s is the prefill (64 sets in flight per connection, temporary failures \
             retried after 2 ms). `docs missed`: documents a consumer had not received when \
             it was caught up (it holds complete snapshots up to the targets, so it should \
             have every document); anything but 0 is a gap in a snapshot.\n",
        );
        out
    }

    /// The tables say it all here (one figure per setup): no charts.
    pub fn write(&self, dir: &Path) -> Result<(), crate::report::scenario_out::OutputError> {
        crate::report::scenario_out::create_dir(dir)?;
        crate::report::scenario_out::write_report(dir, self, &self.to_markdown(), &[])
    }
}

/// Small reports for the tests of this module and of `tables`.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;
    use crate::harness::proc_stats::CpuSplit;
    use crate::scenarios::dcp::args::Setup;
    use crate::scenarios::dcp::consumer::ConsumerResult;
    use crate::scenarios::kv::args::BucketTypeArg;

    pub fn shape() -> SetupShape {
        SetupShape {
            setup: Setup::InMemory,
            bucket_type: BucketTypeArg::Ephemeral,
            memory_quota_mb: 1024,
            items: 1000,
            key_bytes: 32,
            value_bytes: 968,
        }
    }

    pub fn drain(items_per_s: f64) -> DrainRun {
        DrainRun {
            settled: Default::default(),
            target_seqnos: 1000,
            consumer: ConsumerResult::default(),
            items_per_s,
            payload_mb_per_s: items_per_s / 1000.0,
            wire_mb_per_s: 0.0,
            cpu: CpuSplit::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{drain, shape};
    use super::*;
    use crate::harness::proc_stats::CpuSplit;

    #[test]
    fn medians_and_the_drain_to_write_ratio() {
        let write = |sets_per_s| WriteRun {
            load: Default::default(),
            sets_per_s,
            mb_per_s: 0.0,
            cpu: CpuSplit::default(),
            memory_after: Default::default(),
        };
        let r = SetupReport::new(
            shape(),
            LoadSummary::default(),
            vec![drain(300.0), drain(100.0), drain(200.0)],
            vec![write(50.0), write(40.0), write(60.0)],
            Vec::new(),
        );
        assert_eq!(r.data_mb, 1.0);
        assert_eq!(r.median.drain_items_per_s, Some(200.0));
        assert_eq!(r.median.write_sets_per_s, Some(50.0));
        assert_eq!(r.median.drain_vs_write, Some(4.0));
        assert_eq!(r.median.catch_up_total_s, None);
    }
}
