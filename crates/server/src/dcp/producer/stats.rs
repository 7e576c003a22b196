//! What a producer connection shows: its statistics (STAT `dcp`, `/metrics`), and the engine's
//! queued items as the changes its streams send.

use super::Conn;
use super::ValueForm;
use crate::dcp::registry::{ConnStats, StreamStats};
use sluice_dcp::change::{Change, ChangeKind};
use sluice_dcp::control::Priority;
use sluice_engine::{QueueOp, QueuedItem};
use sluice_types::{Datatype, VbId};
use std::collections::HashMap;

impl Conn {
    pub(super) fn release_all(&mut self) {
        for (key, c) in self.slots.drain_cursors() {
            self.bucket.engine.release_stream_cursor(key.vb, c);
        }
        self.in_flight.abort_all();
    }

    pub(super) fn publish_stats(&self) {
        let highs: HashMap<VbId, u64> = self
            .bucket
            .engine
            .vb_seqnos(None)
            .into_iter()
            .map(|(vb, s)| (vb, s.0))
            .collect();
        let p = &self.producer;
        let mut stats = ConnStats {
            name: p.name.clone(),
            tls: self.session.tls,
            priority: match p.priority {
                Priority::High => "high",
                Priority::Medium => "medium",
                Priority::Low => "low",
            },
            flow_window: p.flow.window().unwrap_or(0) as u64,
            unacked_bytes: p.flow.unacked() as u64,
            backfill_bytes_buffered: p.ready_bytes() as u64,
            backfills_running: self.backfills.open() as u64,
            paused_reason: if !p.flow.can_send() {
                "flow_control_window_full"
            } else if p.ready_bytes() >= self.backfills.limits().buffer_bytes {
                "backfill_buffer_full"
            } else {
                ""
            },
            ..Default::default()
        };
        stats.bytes_sent = p.bytes_sent;
        stats.items_sent = p.items_sent;
        for s in p.streams() {
            let high = highs.get(&s.vb).copied().unwrap_or(0);
            stats.streams.push(StreamStats {
                vb: s.vb.0,
                sid: s.sid,
                state: s.state().name(),
                opaque: s.opaque,
                last_sent_seqno: s.last_read().0,
                end_seqno: s.end_seqno().0,
                items_remaining: high.saturating_sub(s.last_read().0),
                items_sent: s.counters.items_sent,
                bytes_sent: s.counters.bytes_sent,
                ready_bytes: s.ready_bytes() as u64,
                backfills: s.counters.backfills,
                cursor_drops: s.counters.cursor_drops,
            });
        }
        *self.shared.stats.lock() = stats;
    }
}

/// A queued item as this consumer receives it: inflated unless it negotiated Snappy, and
/// without its xattr section unless it asked for xattrs (the datatype says what is sent).
pub(super) fn to_change(item: &QueuedItem, form: ValueForm) -> Change {
    let mut meta = item.meta;
    let mut value = item.value.clone();
    let strip = meta.datatype.is_xattr() && !form.xattrs;
    if meta.datatype.is_snappy() && (!form.snappy || strip) && !value.is_empty() {
        match sluice_engine::inflate(&value) {
            Ok(v) => {
                value = bytes::Bytes::from(v);
                meta.datatype = meta.datatype.without(Datatype::SNAPPY);
            }
            Err(e) => tracing::warn!(error = %e, "stored value does not inflate; sent as is"),
        }
    }
    if strip && !meta.datatype.is_snappy() {
        match sluice_subdoc::xattr::body_offset(&value) {
            Ok(at) => {
                value = value.slice(at..);
                meta.datatype = meta.datatype.without(Datatype::XATTR);
            }
            Err(e) => tracing::warn!(error = %e, "stored xattr section is malformed; sent as is"),
        }
    }
    Change {
        key: item.key.clone(),
        value,
        meta,
        kind: match item.op {
            QueueOp::Mutation => ChangeKind::Mutation,
            QueueOp::Deletion => ChangeKind::Deletion,
            QueueOp::Expiration => ChangeKind::Expiration,
            QueueOp::Prepare(level) => ChangeKind::Prepare(level),
            QueueOp::Commit { prepared } => ChangeKind::Commit { prepared },
            QueueOp::Abort { prepared } => ChangeKind::Abort { prepared },
        },
    }
}
