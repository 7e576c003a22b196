//! The DCP readers of a replication column ([`Column`]), running beside the replication
//! while a column's rate ladder runs, each node's active vbuckets read from that node:
//! - **external clients**: one connection per node each, every vbucket from seqno 0 (the
//!   seeds' clients began with a full backfill), then following; consumed without delay;
//! - **XDCR**: 16 connections per node, each with a sixteenth of the vbuckets; every cycle
//!   a connection reads the vbuckets' high seqnos, opens a stream for each vbucket that moved
//!   (from where the last cycle stopped), reads up to that seqno, closes the stream, and
//!   waits the cycle interval (streams open and close continuously). It starts from the
//!   seqnos of the moment it starts (its remote copy is taken to be up to date already).
//!
//! Views are real indexes now ([`super::indexes`]), fed by the server's own DCP streams.

use anyhow::Context;
use serde::Serialize;
use sluice_client::dcp::{
    DcpError, DcpEvent, DcpOptions, DcpPosition, DcpStream, StartFrom, StreamEndReason,
    StreamPositions,
};
use sluice_client::{Client, ConnectOptions};
use sluice_types::{Seqno, VbId};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::scenarios::replication::column::Column;

/// Connections per node of the XDCR emulation (3.0.2's XDCR held 16 per bucket).
pub const XDCR_CONNECTIONS: usize = 16;

/// How often the cycling readers come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cadence {
    pub xdcr: Duration,
}

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
    /// Streams opened (cycling readers; a following client opens each vbucket once).
    pub streams_opened: u64,
    /// Cycles completed (cycling readers).
    pub cycles: u64,
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
        self.cycles += o.cycles;
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

/// Splits `vbuckets` into `n` shares, vbucket i to share i mod n; empty shares are left
/// out.
pub fn split(vbuckets: &[VbId], n: usize) -> Vec<Vec<VbId>> {
    assert!(n > 0, "at least one share");
    let mut out = vec![Vec::new(); n];
    for (i, vb) in vbuckets.iter().enumerate() {
        out[i % n].push(*vb);
    }
    out.retain(|s| !s.is_empty());
    out
}

/// The readers of one column, running until [`Background::stop`].
pub struct Background {
    stop: watch::Sender<bool>,
    tasks: JoinSet<ReaderCount>,
}

impl Background {
    /// Starts the column's DCP readers on `nodes`: its XDCR and external clients (nothing
    /// for replication only or views, whose indexes the server feeds).
    pub fn start(
        column: Column,
        nodes: &[NodeShare],
        connect: &ConnectOptions,
        cadence: Cadence,
    ) -> Background {
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
            if column.xdcr {
                for (i, share) in split(&node.vbuckets, XDCR_CONNECTIONS)
                    .into_iter()
                    .enumerate()
                {
                    let o = opts(format!("bench-xdcr-{i}-node-{n}"));
                    let reader = Cycler::new("XDCR", node.addr.clone(), share, o);
                    tasks.spawn(reader.run(connect.clone(), cadence.xdcr, stopped.clone()));
                }
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

/// A reader that opens, reads to the current seqno, and closes streams in cycles.
struct Cycler {
    kind: &'static str,
    addr: String,
    vbs: BTreeSet<VbId>,
    opts: DcpOptions,
    count: ReaderCount,
}

impl Cycler {
    fn new(kind: &'static str, addr: String, vbs: Vec<VbId>, opts: DcpOptions) -> Cycler {
        Cycler {
            kind,
            addr,
            vbs: vbs.into_iter().collect(),
            opts,
            count: ReaderCount {
                kind: kind.into(),
                connections: 1,
                ..ReaderCount::default()
            },
        }
    }

    async fn run(
        mut self,
        connect: ConnectOptions,
        every: Duration,
        mut stop: watch::Receiver<bool>,
    ) -> ReaderCount {
        let outcome = tokio::select! {
            r = self.cycles(connect, every) => r,
            _ = stop.changed() => Ok(()),
        };
        if let Err(e) = outcome {
            self.count
                .failed(format!("{} {}: {e:#}", self.kind, self.addr));
        }
        self.count
    }

    async fn cycles(&mut self, connect: ConnectOptions, every: Duration) -> anyhow::Result<()> {
        let mut seqnos = Client::connect(&self.addr, connect)
            .await
            .with_context(|| format!("connecting to {}", self.addr))?;
        let mut positions: BTreeMap<VbId, DcpPosition> = StreamPositions::from_now(&mut seqnos)
            .await?
            .iter()
            .filter(|p| self.vbs.contains(&p.vb))
            .map(|p| (p.vb, *p))
            .collect();
        let mut stream: Option<DcpStream> = None;
        loop {
            tokio::time::sleep(every).await;
            let targets: BTreeMap<VbId, Seqno> = seqnos
                .get_all_vb_seqnos()
                .await?
                .into_iter()
                .filter(|(vb, high)| positions.get(vb).is_some_and(|p| p.seqno < *high))
                .collect();
            if targets.is_empty() {
                continue;
            }
            let due = targets.keys().map(|vb| positions[vb]);
            match stream.as_mut() {
                Some(s) => {
                    for p in due {
                        anyhow::ensure!(s.restart(p), "a closed stream could not be reopened");
                    }
                }
                None => {
                    let from = StartFrom::Positions(StreamPositions::from_positions(due));
                    stream = Some(DcpStream::connect(&self.addr, self.opts.clone(), from).await?);
                }
            }
            let s = stream.as_mut().expect("connected above");
            self.count.streams_opened += targets.len() as u64;
            read_to(s, &targets, &mut self.count).await?;
            for vb in targets.keys() {
                if let Some(p) = s.positions().get(*vb) {
                    positions.insert(*vb, *p);
                }
            }
            self.count.cycles += 1;
        }
    }
}

/// Reads until every vbucket of `targets` has delivered its target seqno and its stream has
/// been closed.
async fn read_to(
    s: &mut DcpStream,
    targets: &BTreeMap<VbId, Seqno>,
    count: &mut ReaderCount,
) -> anyhow::Result<()> {
    let mut closing = BTreeSet::new();
    loop {
        match s.next().await {
            Ok(ev) => {
                count.count(&ev);
                if let Some(i) = ev.item() {
                    if targets.get(&i.vb).is_some_and(|t| i.seqno >= *t) && closing.insert(i.vb) {
                        s.close_stream(i.vb);
                    }
                }
            }
            Err(DcpError::AllStreamsEnded) => return Ok(()),
            Err(e @ DcpError::StreamRequest { .. }) => count.failed(e),
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_take_every_vbucket_once() {
        let vbs: Vec<VbId> = (0..40).map(VbId).collect();
        let shares = split(&vbs, 16);
        assert_eq!(shares.len(), 16);
        assert_eq!(shares[0], vec![VbId(0), VbId(16), VbId(32)]);
        let mut all: Vec<VbId> = shares.concat();
        all.sort();
        assert_eq!(all, vbs);
        assert_eq!(split(&vbs[..3], 16).len(), 3, "no empty shares");
        assert!(split(&[], 4).is_empty());
    }

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
