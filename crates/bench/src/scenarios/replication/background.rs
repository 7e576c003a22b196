//! The external DCP clients of a replication column ([`Column`]), running beside the
//! replication while a column's rate ladder runs: one connection per node each, that node's
//! active vbuckets, every vbucket from seqno 0 (the seeds' clients began with a full
//! backfill), then following; consumed without delay.
//!
//! Views are real indexes ([`super::indexes`]) and XDCR a real replication to a second
//! cluster ([`super::xdcr`]), both fed by the server's own DCP streams.

use serde::Serialize;
use sluice_client::dcp::{
    DcpError, DcpEvent, DcpOptions, DcpPosition, DcpStream, StartFrom, StreamEndReason,
    StreamPositions,
};
use sluice_client::ConnectOptions;
use sluice_types::VbId;
use std::collections::BTreeMap;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::scenarios::replication::column::Column;

/// One node's share: its KV address and the vbuckets active on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeShare {
    pub addr: String,
    pub vbuckets: Vec<VbId>,
}

/// What one kind of reader did while it ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReaderCount {
    pub kind: String,
    pub connections: u64,
    /// Mutations, deletions and expirations received.
    pub items: u64,
    /// Their keys and values, in bytes.
    pub bytes: u64,
    /// Streams opened (each vbucket once).
    pub streams_opened: u64,
    /// Streams the producer ended for a reason other than reaching the end or a close (e.g.
    /// `too_slow` under memory pressure); the client asks for each again.
    pub ended_by_producer: u64,
    pub errors: u64,
    pub first_error: Option<String>,
}

impl ReaderCount {
    fn merge(&mut self, o: ReaderCount) {
        self.connections += o.connections;
        self.items += o.items;
        self.bytes += o.bytes;
        self.streams_opened += o.streams_opened;
        self.ended_by_producer += o.ended_by_producer;
        self.errors += o.errors;
        if self.first_error.is_none() {
            self.first_error = o.first_error;
        }
    }

    fn count(&mut self, ev: &DcpEvent) {
        match ev {
            DcpEvent::StreamEnd { reason, .. }
                if !matches!(reason, StreamEndReason::Ok | StreamEndReason::Closed) =>
            {
                self.ended_by_producer += 1;
            }
            _ => {
                if let Some(i) = ev.item() {
                    self.items += 1;
                    self.bytes += (i.key.len() + i.value.len()) as u64;
                }
            }
        }
    }

    fn failed(&mut self, e: impl std::fmt::Display) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(e.to_string());
        }
    }
}

/// The readers of one column, running until [`Background::stop`].
pub struct Background {
    stop: watch::Sender<bool>,
    tasks: JoinSet<ReaderCount>,
}

impl Background {
    /// Starts the column's external clients on `nodes` (nothing for a column without).
    pub fn start(column: Column, nodes: &[NodeShare], connect: &ConnectOptions) -> Background {
        let (stop, stopped) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let opts = |name: String| {
            let mut o = DcpOptions::new(connect.clone());
            o.name = name;
            o
        };
        for (n, node) in nodes.iter().enumerate() {
            for c in 0..column.clients {
                let o = opts(format!("bench-client-{c}-node-{n}"));
                let (addr, vbs, s) = (node.addr.clone(), node.vbuckets.clone(), stopped.clone());
                tasks.spawn(follow(addr, vbs, o, s));
            }
        }
        Background { stop, tasks }
    }

    /// Stops every reader and sums what each kind did.
    pub async fn stop(mut self) -> Vec<ReaderCount> {
        let _ = self.stop.send(true);
        let mut by_kind: BTreeMap<String, ReaderCount> = BTreeMap::new();
        while let Some(done) = self.tasks.join_next().await {
            let count = done.unwrap_or_else(|e| ReaderCount {
                kind: "reader".into(),
                errors: 1,
                first_error: Some(format!("a reader task failed: {e}")),
                ..ReaderCount::default()
            });
            by_kind
                .entry(count.kind.clone())
                .or_insert_with(|| ReaderCount {
                    kind: count.kind.clone(),
                    ..ReaderCount::default()
                })
                .merge(count);
        }
        by_kind.into_values().collect()
    }
}

/// An external client: every vbucket of `vbs` from 0, then following, until stopped.
async fn follow(
    addr: String,
    vbs: Vec<VbId>,
    opts: DcpOptions,
    mut stop: watch::Receiver<bool>,
) -> ReaderCount {
    let mut count = ReaderCount {
        kind: "DCP clients".into(),
        connections: 1,
        streams_opened: vbs.len() as u64,
        ..ReaderCount::default()
    };
    let from = StartFrom::Positions(StreamPositions::from_positions(
        vbs.iter().map(|vb| DcpPosition::zero(*vb)),
    ));
    let mut stream = tokio::select! {
        s = DcpStream::connect(&addr, opts, from) => match s {
            Ok(s) => s,
            Err(e) => {
                count.failed(format!("{addr}: {e}"));
                return count;
            }
        },
        _ = stop.changed() => return count,
    };
    loop {
        tokio::select! {
            ev = stream.next() => match ev {
                Ok(ev) => count.count(&ev),
                Err(e @ DcpError::StreamRequest { .. }) => count.failed(e),
                Err(e) => {
                    count.failed(format!("{addr}: {e}"));
                    return count;
                }
            },
            _ = stop.changed() => return count,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_merge_and_keep_the_first_error() {
        let mut a = ReaderCount {
            kind: "views".into(),
            items: 2,
            ..ReaderCount::default()
        };
        let mut b = a.clone();
        b.failed("boom");
        b.failed("later");
        a.merge(b);
        assert_eq!((a.items, a.errors), (4, 2));
        assert_eq!(a.first_error.as_deref(), Some("boom"));
        let end = |reason| DcpEvent::StreamEnd {
            vb: VbId(3),
            reason,
        };
        a.count(&end(StreamEndReason::TooSlow));
        a.count(&end(StreamEndReason::Closed));
        a.count(&end(StreamEndReason::Ok));
        assert_eq!((a.ended_by_producer, a.items), (1, 4));
    }
}
