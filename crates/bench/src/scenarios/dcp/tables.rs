//! The tables of a [`DcpReport`]: the medians against the write rate, then every drain, write
//! and catch-up run. The same rows go to stdout and to report.md.

use crate::harness::proc_stats::CpuSplit;
use crate::load::latency::format_us;
use crate::report::table::{thousands, Table};
use crate::scenarios::dcp::drain::MB;
use crate::scenarios::dcp::report::{DcpReport, SetupReport};

impl SetupReport {
    fn label(&self) -> String {
        let s = &self.shape;
        let resident = self
            .load
            .memory_after_load
            .resident_pct
            .map_or(String::new(), |p| format!(", {p}% resident"));
        format!(
            "{} ({}, {} MiB quota, {} × {} B = {:.0} MB{resident})",
            s.setup.as_str(),
            s.bucket_type.as_str(),
            s.memory_quota_mb,
            thousands(s.items as f64),
            s.key_bytes + s.value_bytes,
            self.data_mb
        )
    }
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "–".to_string(), f)
}

fn mb(v: f64) -> String {
    format!("{v:.1}")
}

fn secs(v: f64) -> String {
    format!("{v:.2} s")
}

fn cpu(c: &CpuSplit) -> String {
    format!(
        "{:.2} / {:.2} / {:.2}",
        c.server_cores, c.bench_cores, c.other_cores
    )
}

impl DcpReport {
    /// Medians: one consumer's drain against the node's write rate.
    pub fn summary_table(&self) -> Table {
        let mut t = Table::new(&[
            "setup",
            "drain items/s",
            "drain MB/s",
            "wire MB/s",
            "write sets/s",
            "write MB/s",
            "drain ÷ write",
            "load sets/s",
        ]);
        for s in self.setups.iter().filter(|s| !s.drains.is_empty()) {
            let m = &s.median;
            t.push(vec![
                s.label(),
                opt(m.drain_items_per_s, thousands),
                opt(m.drain_payload_mb_per_s, mb),
                opt(m.drain_wire_mb_per_s, mb),
                opt(m.write_sets_per_s, thousands),
                opt(m.write_mb_per_s, mb),
                opt(m.drain_vs_write, |r| format!("{r:.2}×")),
                thousands(s.load.prefill_sets_per_s),
            ]);
        }
        t
    }

    /// Every drain run.
    pub fn drain_table(&self) -> Table {
        let mut t = Table::new(&[
            "drain run",
            "items",
            "time",
            "items/s",
            "MB/s",
            "wire MB/s",
            "CPU server / bench / other",
            "ends ≠ closed",
            "docs missed",
        ]);
        for s in &self.setups {
            for (i, d) in s.drains.iter().enumerate() {
                let c = &d.consumer;
                t.push(vec![
                    format!("{} #{}", s.shape.setup.as_str(), i + 1),
                    thousands(c.items() as f64),
                    secs(c.stream_s),
                    thousands(d.items_per_s),
                    mb(d.payload_mb_per_s),
                    mb(d.wire_mb_per_s),
                    cpu(&d.cpu),
                    (c.stream_ends_other + c.rollbacks).to_string(),
                    c.missed_documents.to_string(),
                ]);
            }
        }
        t
    }

    /// Every write-throughput run.
    pub fn write_table(&self) -> Table {
        let mut t = Table::new(&[
            "write run",
            "sets/s",
            "MB/s",
            "p50",
            "p99",
            "errors",
            "CPU server / bench / other",
        ]);
        for s in &self.setups {
            for (i, w) in s.writes.iter().enumerate() {
                t.push(vec![
                    format!("{} #{}", s.shape.setup.as_str(), i + 1),
                    thousands(w.sets_per_s),
                    mb(w.mb_per_s),
                    format_us(w.load.latency.p50_us),
                    format_us(w.load.latency.p99_us),
                    w.load.errors.to_string(),
                    cpu(&w.cpu),
                ]);
            }
        }
        t
    }

    /// Every catch-up run, then the medians.
    pub fn catch_up_table(&self) -> Table {
        let mut t = Table::new(&[
            "catch-up run",
            "consumers",
            "total",
            "per consumer min / median / max",
            "items/s (all)",
            "MB/s (all)",
            "peak RSS MB (before)",
            "CPU server / bench / other",
            "writes/s",
            "write p99 (schedule / service)",
            "docs missed (consumers)",
        ]);
        for s in &self.setups {
            for (i, c) in s.catch_ups.iter().enumerate() {
                let (w, wp99) = match &c.writes {
                    Some(w) => (
                        thousands(w.ops_per_s),
                        format!(
                            "{} / {}",
                            format_us(w.latency.p99_us),
                            format_us(w.service_latency.p99_us)
                        ),
                    ),
                    None => ("–".to_string(), "–".to_string()),
                };
                t.push(vec![
                    format!("{} #{}", s.shape.setup.as_str(), i + 1),
                    c.consumers.len().to_string(),
                    secs(c.total_s),
                    format!(
                        "{:.2} / {:.2} / {:.2} s",
                        c.consumer_min_s, c.consumer_median_s, c.consumer_max_s
                    ),
                    thousands(c.aggregate_items_per_s),
                    mb(c.aggregate_payload_mb_per_s),
                    format!(
                        "{:.0} ({:.0})",
                        c.rss.peak_bytes as f64 / MB,
                        c.rss.start_bytes as f64 / MB
                    ),
                    cpu(&c.cpu),
                    w,
                    wp99,
                    format!("{} ({})", c.missed_documents, c.consumers_missing_documents),
                ]);
            }
            if s.catch_ups.len() > 1 {
                let m = &s.median;
                t.push(vec![
                    format!("{} median", s.shape.setup.as_str()),
                    s.catch_ups[0].consumers.len().to_string(),
                    opt(m.catch_up_total_s, secs),
                    format!(
                        "– / {} / {}",
                        opt(m.catch_up_consumer_median_s, secs),
                        opt(m.catch_up_consumer_max_s, secs)
                    ),
                    opt(m.catch_up_items_per_s, thousands),
                    String::new(),
                    opt(m.catch_up_peak_rss_bytes, |b| format!("{:.0}", b / MB)),
                    String::new(),
                    opt(m.catch_up_writes_per_s, thousands),
                    match (m.catch_up_writes_p99_us, m.catch_up_writes_service_p99_us) {
                        (Some(a), Some(b)) => format!("{} / {}", format_us(a), format_us(b)),
                        _ => "–".to_string(),
                    },
                    String::new(),
                ]);
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use crate::scenarios::dcp::args::DcpArgs;
    use crate::scenarios::dcp::bucket_setup::LoadSummary;
    use crate::scenarios::dcp::report::fixtures::{drain, shape};
    use crate::scenarios::dcp::report::{DcpReport, SetupReport};

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        dcp: DcpArgs,
    }

    #[test]
    fn tables_skip_what_was_not_measured() {
        let r = SetupReport::new(
            shape(),
            LoadSummary::default(),
            vec![drain(100.0)],
            Vec::new(),
            Vec::new(),
        );
        let report = DcpReport {
            settings: <Cli as clap::Parser>::parse_from(["dcp"]).dcp,
            cpus: 2,
            setups: vec![r],
        };
        let text = report.to_text();
        assert!(
            text.contains("Drain runs") && !text.contains("Catch-up\n"),
            "{text}"
        );
        assert!(report.to_markdown().contains("| in-memory #1 |"));
    }
}
