//! The tables of what ran beside the replication: a column's external DCP clients, a views
//! column's real indexes (their builds, query loop and backlog), and an XDCR column's
//! replication to its second cluster (the initial copy, then each step).

use serde::Serialize;

use super::ReplReport;
use crate::load::latency::format_us;
use crate::report::table::{thousands, Table};
use crate::scenarios::replication::background::ReaderCount;
use crate::scenarios::replication::indexes::IndexActivity;
use crate::scenarios::replication::xdcr::XdcrSetup;

/// What a column's DCP readers (XDCR, clients) and indexes (views) did over one run's
/// ladder.
#[derive(Debug, Clone, Serialize)]
pub struct ColumnReaders {
    pub target: String,
    pub run: u32,
    pub readers: Vec<ReaderCount>,
    /// A views column's indexes and query loop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub indexes: Option<IndexActivity>,
    /// An XDCR column's target cluster and initial copy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdcr: Option<XdcrSetup>,
}

impl ReplReport {
    /// What the columns' DCP readers did, summed over each run's ladder (median over runs
    /// would hide a run whose readers failed, so every run is a row).
    pub fn readers_table(&self) -> Table {
        let mut t = Table::new(&[
            "column",
            "run",
            "readers",
            "connections",
            "streams opened",
            "items read",
            "MB read",
            "ended by producer",
            "errors",
        ]);
        for c in &self.readers {
            for r in &c.readers {
                let errors = errors_cell(r.errors, r.first_error.as_deref());
                t.push(vec![
                    c.target.clone(),
                    (c.run + 1).to_string(),
                    r.kind.clone(),
                    r.connections.to_string(),
                    thousands(r.streams_opened as f64),
                    thousands(r.items as f64),
                    format!("{:.1}", r.bytes as f64 / 1e6),
                    thousands(r.ended_by_producer as f64),
                    errors,
                ]);
            }
        }
        t
    }

    /// What the views columns' indexes and query loops did, a row per column and run.
    pub fn indexes_table(&self) -> Option<Table> {
        let mut t = Table::new(&[
            "column",
            "run",
            "indexes",
            "on",
            "build s (each)",
            "entries built / at end",
            "queries",
            "rows",
            "query p50 / p99",
            "errors",
        ]);
        let list = |v: &[u64]| {
            v.iter()
                .map(|x| thousands(*x as f64))
                .collect::<Vec<_>>()
                .join(", ")
        };
        for c in &self.readers {
            let Some(ix) = &c.indexes else { continue };
            let errors = errors_cell(ix.errors, ix.first_error.as_deref());
            let builds = ix
                .build_s
                .iter()
                .map(|s| format!("{s:.1}"))
                .collect::<Vec<_>>()
                .join(", ");
            t.push(vec![
                c.target.clone(),
                (c.run + 1).to_string(),
                ix.indexes.to_string(),
                ix.node.clone(),
                builds,
                format!("{} / {}", list(&ix.entries_built), list(&ix.entries_end)),
                thousands(ix.queries as f64),
                thousands(ix.rows as f64),
                format!(
                    "{} / {}",
                    format_us(ix.query_p50_us),
                    format_us(ix.query_p99_us)
                ),
                errors,
            ]);
        }
        (!t.rows.is_empty()).then_some(t)
    }

    /// The views columns' indexes' items remaining per step (summed over the column's
    /// indexes), every run a row.
    pub fn index_backlog_table(&self) -> Option<Table> {
        let mut t = Table::new(&[
            "column",
            "run",
            "set rate /s",
            "index items remaining avg / max / at the end",
        ]);
        for s in &self.steps {
            let Some(b) = &s.index_backlog else { continue };
            t.push(vec![
                s.target.clone(),
                (s.run + 1).to_string(),
                thousands(s.rate),
                format!(
                    "{} / {} / {}",
                    thousands(b.avg),
                    thousands(b.max as f64),
                    thousands(b.end as f64)
                ),
            ]);
        }
        (!t.rows.is_empty()).then_some(t)
    }

    /// Each XDCR column's target and initial copy, every run a row.
    pub fn xdcr_setup_table(&self) -> Option<Table> {
        let mut t = Table::new(&[
            "column",
            "run",
            "target nodes / replicas",
            "documents copied",
            "copy s",
            "docs/s",
        ]);
        for c in &self.readers {
            let Some(x) = &c.xdcr else { continue };
            t.push(vec![
                c.target.clone(),
                (c.run + 1).to_string(),
                format!("{} / {}", x.target_nodes, x.target_replicas),
                thousands(x.initial_docs as f64),
                format!("{:.1}", x.initial_s),
                thousands(x.initial_docs as f64 / x.initial_s.max(1e-3)),
            ]);
        }
        (!t.rows.is_empty()).then_some(t)
    }

    /// The XDCR figures of every step of an XDCR column, every run a row, beside the
    /// source's own replication latency.
    pub fn xdcr_table(&self) -> Option<Table> {
        let mut t = Table::new(&[
            "column",
            "run",
            "set rate /s",
            "XDCR docs/s",
            "MB/s",
            "XDCR lag p50 / p99 / max",
            "left at end",
            "drain s",
            "source replication p99",
        ]);
        for s in &self.steps {
            let Some(x) = &s.xdcr else { continue };
            t.push(vec![
                s.target.clone(),
                (s.run + 1).to_string(),
                thousands(s.rate),
                thousands(x.docs_per_s),
                format!("{:.1}", x.mb_per_s),
                format!(
                    "{} / {} / {}",
                    format_us(x.lag_p50_us),
                    format_us(x.lag_p99_us),
                    format_us(x.lag_max_us)
                ),
                thousands(x.changes_left_end as f64),
                format!("{:.1}", x.drain_s),
                format_us(s.repl_latency.p99_us),
            ]);
        }
        (!t.rows.is_empty()).then_some(t)
    }
}

/// An error count, with the first error's text when there was one.
fn errors_cell(count: u64, first: Option<&str>) -> String {
    match first {
        Some(e) => format!("{count} (first: {e})"),
        None => count.to_string(),
    }
}
