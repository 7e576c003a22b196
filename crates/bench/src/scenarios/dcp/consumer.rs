//! One DCP consumer streaming a bucket from seqno 0 on its own connection, until every
//! vbucket has reached its target (its high seqno when the run started).
//!
//! The streams are requested with no end seqno and closed by the consumer once a vbucket is
//! caught up: the client's end seqno is one value for every vbucket, and a vbucket whose high
//! seqno is below it would stay open waiting for writes. So a drain ends with one
//! `StreamEnd { closed }` per vbucket, and its time runs from the stream requests to the last
//! of them.
//!
//! Caught up means: holding a complete snapshot that reaches the target. Without writes that
//! is the item at the target seqno (the backfill's snapshot ends there). Under a concurrent
//! write load the snapshot holding the target may end above it (and deduplication may have
//! removed the target item itself), so the vbucket closes at the end of that snapshot: at its
//! last item, or when the next snapshot's marker shows it is complete.

use serde::Serialize;
use sluice_client::dcp::{
    DcpError, DcpEvent, DcpOptions, DcpPosition, DcpStream, StartFrom, StreamEndReason,
    StreamPositions,
};
use sluice_client::ConnectOptions;
use sluice_types::VbId;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::BenchError;
use crate::scenarios::dcp::key_set::KeySet;
use crate::scenarios::dcp::stream_targets::StreamTargets;
use crate::scenarios::dcp::wire::wire_len;

/// Items counted locally before they are added to the shared progress counter.
const PROGRESS_BATCH: u64 = 256;

#[derive(Debug, Clone)]
pub struct ConsumerSpec {
    pub addr: SocketAddr,
    pub options: ConnectOptions,
    pub window_bytes: u32,
    pub targets: Arc<StreamTargets>,
    /// The loaded key space (`0..documents`): each must arrive before the consumer is done.
    pub documents: u64,
    /// Nothing received for this long fails the consumer.
    pub stall: Duration,
}

/// What one consumer received, and when.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ConsumerResult {
    pub mutations: u64,
    /// Deletions and expirations.
    pub deletions: u64,
    /// Key + value bytes of the items.
    pub payload_bytes: u64,
    /// Every message as framed on the wire (see `wire`).
    pub wire_bytes: u64,
    pub snapshot_markers: u64,
    pub stream_ends: u64,
    /// Stream ends other than `closed`/`ok`: the producer dropped a stream (the client asks
    /// again from its position). Zero in a healthy run.
    pub stream_ends_other: u64,
    /// Rollbacks answered to a stream request from 0. Zero in a healthy run.
    pub rollbacks: u64,
    /// Documents of the key space not received before their vbucket was caught up. Zero in
    /// a healthy run: a complete snapshot holds every document.
    pub missed_documents: u64,
    /// Vbuckets streamed.
    pub vbuckets: u64,
    /// Bootstrap, DCP_OPEN and controls; the stream requests go out at its end.
    pub connect_s: f64,
    /// From the stream requests to the last StreamEnd: the drain time.
    pub stream_s: f64,
    /// From the stream requests to the moment the last vbucket was caught up (its close
    /// and StreamEnd follow).
    pub caught_up_s: f64,
    /// From the caller's start instant to the last StreamEnd.
    pub done_s: f64,
}

impl ConsumerResult {
    pub fn items(&self) -> u64 {
        self.mutations + self.deletions
    }
}

/// Streams every vbucket with a target from 0 up to its target. `start` is the instant
/// `done_s` counts from; `completed` counts items for the progress bar.
pub async fn consume(
    spec: &ConsumerSpec,
    start: Instant,
    completed: &AtomicU64,
) -> Result<ConsumerResult, BenchError> {
    let mut r = ConsumerResult::default();
    let positions = StreamPositions::from_positions(spec.targets.vbuckets().map(DcpPosition::zero));
    r.vbuckets = positions.len() as u64;
    if positions.is_empty() {
        return Ok(r);
    }
    let mut opts = DcpOptions::new(spec.options.clone());
    opts.window_bytes = spec.window_bytes;
    let connecting = Instant::now();
    let addr = spec.addr.to_string();
    let mut stream = DcpStream::connect(&addr, opts, StartFrom::Positions(positions)).await?;
    let requested = Instant::now();
    r.connect_s = (requested - connecting).as_secs_f64();
    let mut reached = vec![false; usize::from(u16::MAX) + 1];
    // End of the last snapshot marker per vbucket.
    let mut marker_end = vec![0u64; usize::from(u16::MAX) + 1];
    let mut open = r.vbuckets;
    let mut last_caught_up: Option<Instant> = None;
    let mut received = KeySet::new(spec.documents);
    let mut unreported = 0u64;
    loop {
        let event = match tokio::time::timeout(spec.stall, stream.next()).await {
            Err(_) => {
                return Err(BenchError::DcpStalled {
                    waited: spec.stall,
                    live: stream.live_streams(),
                })
            }
            Ok(Err(DcpError::AllStreamsEnded)) => break,
            Ok(Err(e)) => return Err(e.into()),
            Ok(Ok(event)) => event,
        };
        r.wire_bytes += wire_len(&event) as u64;
        match &event {
            DcpEvent::Mutation(_) | DcpEvent::Deletion(_) | DcpEvent::Expiration(_) => {
                let item = event.item().expect("a document event");
                if matches!(event, DcpEvent::Mutation(_)) {
                    r.mutations += 1;
                } else {
                    r.deletions += 1;
                }
                r.payload_bytes += (item.key.len() + item.value.len()) as u64;
                if !reached[usize::from(item.vb.0)] {
                    // Only what arrived before its vbucket was caught up counts.
                    received.insert(&item.key);
                }
                unreported += 1;
                if unreported == PROGRESS_BATCH {
                    completed.fetch_add(unreported, Ordering::Relaxed);
                    unreported = 0;
                }
                let snapshot_done = stream
                    .positions()
                    .get(item.vb)
                    .is_some_and(|p| item.seqno >= p.snap_end);
                if snapshot_done && item.seqno.0 >= spec.targets.of(item.vb) {
                    caught_up(&mut stream, &mut reached, item.vb, &mut open)?;
                }
            }
            DcpEvent::SnapshotMarker { vb, end, .. } => {
                r.snapshot_markers += 1;
                // The previous snapshot is complete only if its end was reached: a stream
                // whose cursor the server dropped starts a disk snapshot at its last seqno,
                // cutting the memory snapshot short (not a consistent point).
                let held = stream.positions().get(*vb).map_or(0, |p| p.seqno.0);
                let prev_end = marker_end[usize::from(vb.0)];
                if held > 0 && held >= prev_end && held >= spec.targets.of(*vb) {
                    caught_up(&mut stream, &mut reached, *vb, &mut open)?;
                }
                marker_end[usize::from(vb.0)] = end.0;
            }
            DcpEvent::StreamEnd { reason, .. } => {
                r.stream_ends += 1;
                if !matches!(reason, StreamEndReason::Closed | StreamEndReason::Ok) {
                    r.stream_ends_other += 1;
                }
            }
            DcpEvent::Rollback { .. } => r.rollbacks += 1,
            DcpEvent::StreamOpened { .. } => {}
            // Only takeover streams carry these; the bench asks for none.
            DcpEvent::VbucketState { .. } => {}
            // Only consumers that enable sync writes get these; the bench does not.
            DcpEvent::Prepare { .. } | DcpEvent::Commit { .. } | DcpEvent::Abort { .. } => {}
        }
        if open == 0 && last_caught_up.is_none() {
            last_caught_up = Some(Instant::now());
        }
    }
    completed.fetch_add(unreported, Ordering::Relaxed);
    r.stream_s = requested.elapsed().as_secs_f64();
    r.caught_up_s = last_caught_up.map_or(r.stream_s, |t| (t - requested).as_secs_f64());
    r.done_s = start.elapsed().as_secs_f64();
    r.missed_documents = received.missing();
    Ok(r)
}

/// Closes `vb`'s stream once (its StreamEnd then follows); counts it off `open`.
fn caught_up(
    stream: &mut DcpStream,
    reached: &mut [bool],
    vb: VbId,
    open: &mut u64,
) -> Result<(), BenchError> {
    let seen = &mut reached[usize::from(vb.0)];
    if *seen {
        return Ok(());
    }
    *seen = true;
    *open -= 1;
    if stream.close_stream(vb) {
        Ok(())
    } else {
        Err(BenchError::DcpCloseRefused(vb))
    }
}
