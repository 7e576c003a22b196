//! One active stream: what it has sent, what it sends next and where it reads from.
//!
//! ```text
//!                 start()
//!   Pending ───────────────► asks RegisterCursor{after}
//!      │ on_cursor(true)            │ on_cursor(false)
//!      ▼                            ▼
//!   InMemory ◄── on_cursor(true) ── Backfilling ◄─┐
//!      │  ▲                          │ on_backfill_end() asks RegisterCursor{after: end};
//!      │  └──────────────────────────┘ on_cursor(false) asks for another Backfill
//!      │ on_cursor_dropped() (client opted in to cursor dropping) ─────┘
//!      │
//!      │ takeover streams only, once everything is sent (on_drained):
//!      ▼
//!   TakeoverWait ── SET_VBUCKET_STATE(pending) sent, waiting for the consumer's answer
//!      │ on_vb_state_ack(): asks SetVbucketDead (no more writes here)
//!      ▼
//!   TakeoverSend ── the rest, up to the last write before the vbucket died
//!      │ on_drained(): SET_VBUCKET_STATE(active) sent
//!      ▼
//!   TakeoverWait ── on_vb_state_ack(): STREAM_END(ok)
//!      ▼
//!    Dead  ◄── end seqno reached (Ok) · close() (Closed) · state change (StateChanged)
//!              · cursor dropped without opt-in (TooSlow) · backfill failed (BackfillFailed)
//! ```
//!
//! The stream takes events and returns [`StreamAction`]s; it never touches the engine. Messages
//! it produces wait in its ready queue until the connection's flow control lets them out.
//!
//! Snapshot markers: each marker's start is the last seqno the stream had sent before it (the
//! requested start for the first one). Every seqno in the snapshot is above it, and a client
//! that received the marker but none of its items resumes with `start == snap_start`, which
//! the rollback check reads as "holds nothing of this snapshot". Clients that keep the marker
//! bounds they were given therefore always satisfy `snap_start <= start <= snap_end`.
//!
//! Handover without gap or duplicate: a backfill covers `(last_read, end]` and the cursor is
//! then registered after `end`; `last_read` only grows, and memory chunks skip anything at or
//! below it.
//!
//! SyncWrites: a stream whose connection enabled sync writes sends PREPARE, COMMIT and ABORT
//! and v2.0 markers. Any other stream sees a commit as the mutation or deletion it made and
//! never sees prepares or aborts: `last_read` moves past them all the same. Its snapshot
//! markers end at the last visible seqno they cover, as Couchbase caps them at the max
//! visible seqno: a memory snapshot at its last visible item, a disk snapshot at the
//! backfill's `max_visible` (known before its items are read); a snapshot with nothing
//! visible sends no marker at all.
//!
//! SEQNO_ADVANCED: a collection-aware consumer without sync writes (as on Couchbase, which
//! adds the message with collections; a client without them, gocbcore's DCP agent among
//! them, treats it as a protocol violation) is told where each snapshot ends even when its
//! last seqnos are changes it does not see (another collection's, a prepare, an abort):
//! - its markers cover the whole range read (memory: up to the checkpoint's snapshot end;
//!   disk: the backfill's end), and once the stream has read to a marker's end without
//!   sending an item at it, a SEQNO_ADVANCED of that end follows. The consumer's position
//!   is then the snapshot's end, a complete snapshot to resume from;
//! - a memory read with nothing of the stream's collections in it sends nothing (as on
//!   Couchbase: a filtered stream is not told about every other collection's write); one
//!   with only invisible changes of its collections sends a marker and a SEQNO_ADVANCED;
//! - a backfill always sends its marker, so a stream whose collections have nothing on
//!   disk still learns how far the disk snapshot went;
//! - a stream that reaches its end seqno on changes it does not show sends a marker and a
//!   SEQNO_ADVANCED up to there before its STREAM_END, so its consumer's last position is
//!   the end seqno. Couchbase ends such a stream without them; a consumer that resumes from
//!   its last position would ask for seqnos it had no need to read again.
//!
//! Filter empty: when the last collection of a collection filter is dropped (or the scope
//! of a scope filter), the drop's SYSTEM_EVENT is sent and the stream ends with
//! `FilterEmpty`, unless it reached its end seqno at the same time (then `Ok`).
//!
//! Stream ids: a stream the consumer named (`enable_stream_id`) carries the id; the
//! connection writes it into every message's frame info (see `stream_key`).

use crate::change::{Change, ChangeKind};
use crate::filter::{KeyMode, StreamFilter};
use crate::stream_key::StreamKey;
use bytes::Bytes;
use sluice_proto::dcp::message::{
    DcpCompletion, DcpDocument, DcpPrepare, MarkerSeqnos, SnapshotMarker,
};
use sluice_proto::dcp::{DcpMessage, SnapshotFlags, StreamEndReason};
use sluice_types::collection::collection_of;
use sluice_types::system_event::SystemEvent;
use sluice_types::{CheckpointId, CollectionId, Datatype, IncludeValue, Seqno, VbId, VbState};
use std::collections::VecDeque;

/// What a backfill covers, as its disk snapshot marker announces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackfillRange {
    /// The snapshot's last seqno.
    pub end: Seqno,
    /// Its newest visible change (a mutation, deletion or commit); the stream's position
    /// or below if it has none.
    pub max_visible: Seqno,
    /// The newest prepare completed at `end`.
    pub high_completed: Seqno,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamState {
    Pending,
    Backfilling,
    InMemory,
    /// Takeover: the producer's vbucket is dead; sending what remains.
    TakeoverSend,
    /// Takeover: waiting for the consumer to answer SET_VBUCKET_STATE.
    TakeoverWait,
    Dead,
}

impl StreamState {
    pub fn name(self) -> &'static str {
        match self {
            StreamState::Pending => "pending",
            StreamState::Backfilling => "backfilling",
            StreamState::InMemory => "in-memory",
            StreamState::TakeoverSend => "takeover-send",
            StreamState::TakeoverWait => "takeover-wait",
            StreamState::Dead => "dead",
        }
    }
}

/// What the connection asked for, per stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamOptions {
    pub value: IncludeValue,
    pub include_delete_times: bool,
    pub expiry_opcode: bool,
    pub cursor_dropping: bool,
    pub send_end_on_close: bool,
    /// `enable_sync_writes`: prepares, commits and aborts as such (see the module doc).
    pub sync_writes: bool,
    /// How the consumer reads collections: keys, records (see `filter`).
    pub collections: KeyMode,
}

/// What the connection must do for the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamAction {
    /// Register a checkpoint cursor that next reads the first change after `after`, and
    /// answer with [`ActiveStream::on_cursor`].
    RegisterCursor { after: Seqno },
    /// Start a backfill of everything after `after`; feed its results back.
    Backfill { after: Seqno },
    /// The stream no longer needs its cursor (if it has one).
    ReleaseCursor,
    /// Takeover: set the producer's vbucket dead (writes stop here), then keep reading.
    SetVbucketDead,
}

/// Where a takeover stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Takeover {
    /// Catching up like any stream.
    Catching,
    WaitPending,
    /// The vbucket is dead here; sending the rest.
    Draining,
    WaitActive,
}

/// Stream statistics (the seeds' "items remaining" comes from `last_read` and the high seqno).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamCounters {
    pub items_sent: u64,
    pub bytes_sent: u64,
    pub backfills: u64,
    pub cursor_drops: u64,
}

#[derive(Debug)]
pub struct ActiveStream {
    pub vb: VbId,
    /// The consumer's id for the stream (`enable_stream_id`), written into every message.
    pub sid: Option<u16>,
    pub opaque: u32,
    opts: StreamOptions,
    end_seqno: Seqno,
    state: StreamState,
    /// Highest seqno queued for sending (items, or the end of a snapshot announced).
    last_read: Seqno,
    /// End of the snapshot being sent, and the checkpoint it came from (memory).
    snapshot_end: Seqno,
    snapshot_checkpoint: Option<CheckpointId>,
    /// End of the backfill in progress.
    backfill_end: Option<Seqno>,
    ready: VecDeque<DcpMessage>,
    ready_bytes: usize,
    takeover: Option<Takeover>,
    /// Highest seqno queued that a non-sync consumer sees.
    last_visible: Seqno,
    /// The collections a collection-aware consumer asked for (`None`: all).
    filter: Option<StreamFilter>,
    /// The drop of the filter's last collection (or its scope) was queued: the stream ends
    /// with `FilterEmpty` once the changes read with it are queued.
    filter_emptied: bool,
    /// Highest seqno the consumer has been sent: an item's, or a SEQNO_ADVANCED's.
    last_sent: Seqno,
    pub counters: StreamCounters,
}

impl ActiveStream {
    /// A stream accepted for `(start, end]`.
    pub fn new(vb: VbId, opaque: u32, start: Seqno, end: Seqno, opts: StreamOptions) -> Self {
        ActiveStream {
            vb,
            sid: None,
            opaque,
            opts,
            end_seqno: end,
            state: StreamState::Pending,
            last_read: start,
            snapshot_end: start,
            snapshot_checkpoint: None,
            backfill_end: None,
            ready: VecDeque::new(),
            ready_bytes: 0,
            takeover: None,
            last_visible: start,
            filter: None,
            filter_emptied: false,
            last_sent: start,
            counters: StreamCounters::default(),
        }
    }

    /// A stream the consumer named `sid` (0 is no id, as on the wire).
    pub fn with_stream_id(mut self, sid: u16) -> Self {
        self.sid = StreamKey::new(self.vb, sid).sid;
        self
    }

    /// The stream's name on its connection.
    pub fn key(&self) -> StreamKey {
        StreamKey {
            vb: self.vb,
            sid: self.sid,
        }
    }

    /// Whether this stream tells its consumer about seqnos it does not show (see the
    /// module doc: collection-aware consumers without sync writes).
    fn advances(&self) -> bool {
        self.opts.collections == KeyMode::Aware && !self.opts.sync_writes
    }

    /// A stream of the collections `filter` names only.
    pub fn with_filter(mut self, filter: StreamFilter) -> Self {
        self.filter = Some(filter);
        self
    }

    /// A takeover stream: after catching up it hands the vbucket over to the consumer.
    pub fn with_takeover(mut self) -> Self {
        self.takeover = Some(Takeover::Catching);
        self.end_seqno = Seqno::MAX;
        self
    }

    pub fn is_takeover(&self) -> bool {
        self.takeover.is_some()
    }

    /// Reading memory in a phase where running dry means the next takeover step.
    pub fn takeover_reading(&self) -> bool {
        matches!(
            self.state,
            StreamState::InMemory | StreamState::TakeoverSend
        ) && matches!(
            self.takeover,
            Some(Takeover::Catching) | Some(Takeover::Draining)
        )
    }

    /// Takeover: the cursor has nothing more and everything read has been sent.
    pub fn on_drained(&mut self) -> Vec<StreamAction> {
        if !self.takeover_reading() || !self.ready.is_empty() {
            return Vec::new();
        }
        let (phase, state) = match self.takeover {
            Some(Takeover::Catching) => (Takeover::WaitPending, VbState::Pending),
            _ => (Takeover::WaitActive, VbState::Active),
        };
        self.takeover = Some(phase);
        self.state = StreamState::TakeoverWait;
        self.push(DcpMessage::SetVbucketState(state));
        Vec::new()
    }

    /// The consumer answered SET_VBUCKET_STATE.
    pub fn on_vb_state_ack(&mut self) -> Vec<StreamAction> {
        match self.takeover {
            Some(Takeover::WaitPending) => {
                self.takeover = Some(Takeover::Draining);
                self.state = StreamState::TakeoverSend;
                vec![StreamAction::SetVbucketDead]
            }
            Some(Takeover::WaitActive) => self.end(StreamEndReason::Ok),
            _ => Vec::new(),
        }
    }

    pub fn state(&self) -> StreamState {
        self.state
    }

    pub fn last_read(&self) -> Seqno {
        self.last_read
    }

    pub fn end_seqno(&self) -> Seqno {
        self.end_seqno
    }

    pub fn ready_bytes(&self) -> usize {
        self.ready_bytes
    }

    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Dead and nothing left to send: the connection can forget it.
    pub fn is_finished(&self) -> bool {
        self.state == StreamState::Dead && self.ready.is_empty()
    }

    /// Whether the stream wants more changes read for it now.
    pub fn wants_more(&self, ready_bytes_max: usize) -> bool {
        matches!(
            self.state,
            StreamState::InMemory | StreamState::Backfilling | StreamState::TakeoverSend
        ) && self.ready_bytes < ready_bytes_max
    }

    /// Takes the next message to send.
    pub fn pop_ready(&mut self) -> Option<DcpMessage> {
        let m = self.ready.pop_front()?;
        let len = m.wire_len_for_stream(self.sid);
        self.ready_bytes -= len;
        self.counters.bytes_sent += len as u64;
        if matches!(
            m,
            DcpMessage::Mutation(_)
                | DcpMessage::Deletion(_)
                | DcpMessage::Expiration(_)
                | DcpMessage::Prepare(_)
                | DcpMessage::Commit(_)
                | DcpMessage::Abort(_)
                | DcpMessage::SystemEvent(_)
        ) {
            self.counters.items_sent += 1;
        }
        Some(m)
    }

    /// A marker for `(start, end]`: v2.0 for sync-write streams, with the max visible seqno
    /// and, on a disk snapshot, the high completed seqno (0 on memory ones, whose commits
    /// are all sent, as Couchbase leaves it there).
    fn push_marker(
        &mut self,
        start: Seqno,
        end: Seqno,
        flags: SnapshotFlags,
        seqnos: MarkerSeqnos,
    ) {
        let sync = self.opts.sync_writes.then_some(seqnos);
        self.push(DcpMessage::SnapshotMarker(SnapshotMarker {
            start,
            end,
            flags,
            sync,
        }));
    }

    fn push(&mut self, m: DcpMessage) {
        self.ready_bytes += m.wire_len_for_stream(self.sid);
        self.ready.push_back(m);
    }

    /// The stream has read to the end of the snapshot it announced without sending an item
    /// at that end: a SEQNO_ADVANCED moves the consumer there (streams that advance only).
    fn advance_to_snapshot_end(&mut self) {
        if self.advances()
            && self.last_read >= self.snapshot_end
            && self.last_sent < self.snapshot_end
        {
            self.last_sent = self.snapshot_end;
            self.push(DcpMessage::SeqnoAdvanced(self.snapshot_end));
        }
    }

    fn end(&mut self, reason: StreamEndReason) -> Vec<StreamAction> {
        if self.state == StreamState::Dead {
            return Vec::new();
        }
        self.state = StreamState::Dead;
        self.push(DcpMessage::StreamEnd(reason));
        vec![StreamAction::ReleaseCursor]
    }

    /// After the stream request was answered with SUCCESS.
    pub fn start(&mut self) -> Vec<StreamAction> {
        assert_eq!(self.state, StreamState::Pending, "started once");
        if self.last_read >= self.end_seqno {
            return self.end(StreamEndReason::Ok);
        }
        vec![StreamAction::RegisterCursor {
            after: self.last_read,
        }]
    }

    /// The answer to [`StreamAction::RegisterCursor`].
    pub fn on_cursor(&mut self, registered: bool) -> Vec<StreamAction> {
        if self.state == StreamState::Dead {
            return if registered {
                vec![StreamAction::ReleaseCursor]
            } else {
                Vec::new()
            };
        }
        if registered {
            self.state = if self.takeover == Some(Takeover::Draining) {
                StreamState::TakeoverSend
            } else {
                StreamState::InMemory
            };
            self.backfill_end = None;
            Vec::new()
        } else {
            self.state = StreamState::Backfilling;
            self.counters.backfills += 1;
            vec![StreamAction::Backfill {
                after: self.last_read,
            }]
        }
    }

    /// A backfill of `(last_read, range.end]` began: announce it as one disk snapshot,
    /// ending at `range.max_visible` for a consumer that sees no prepares or aborts (none at
    /// all when nothing in it is visible), and carrying the high completed seqno to one
    /// that does.
    pub fn on_backfill_begin(&mut self, range: BackfillRange) {
        if self.state != StreamState::Backfilling {
            return;
        }
        let BackfillRange {
            end,
            max_visible,
            high_completed,
        } = range;
        assert!(end >= self.last_read, "a backfill never goes backwards");
        assert!(
            max_visible <= end,
            "the max visible seqno {max_visible} is past {end}"
        );
        assert!(
            high_completed <= end,
            "the high completed seqno {high_completed} is past {end}"
        );
        self.backfill_end = Some(end);
        let snap_end = if self.opts.sync_writes || self.advances() {
            end
        } else {
            max_visible
        };
        if snap_end > self.last_read {
            let seqnos = MarkerSeqnos {
                max_visible_seqno: max_visible.max(self.last_visible),
                high_completed_seqno: high_completed,
            };
            self.push_marker(self.last_read, snap_end, SnapshotFlags::DISK, seqnos);
            self.snapshot_end = snap_end;
            self.snapshot_checkpoint = None;
        }
    }

    /// Items of the backfill in progress, in seqno order.
    pub fn on_backfill_items(&mut self, items: &[Change]) -> Vec<StreamAction> {
        if self.state != StreamState::Backfilling {
            return Vec::new();
        }
        let end = self.backfill_end.expect("begun");
        for c in items {
            assert!(
                c.meta.seqno > self.last_read && c.meta.seqno <= end,
                "backfill item {} outside ({}, {end}]",
                c.meta.seqno,
                self.last_read
            );
            let shown = self.shows(c);
            self.queue_change(c, shown);
        }
        self.end_if_filter_emptied()
    }

    /// The backfill finished: move on to memory, or end if the end seqno was reached.
    pub fn on_backfill_end(&mut self) -> Vec<StreamAction> {
        if self.state != StreamState::Backfilling {
            return Vec::new();
        }
        let end = self.backfill_end.take().expect("begun");
        // Deduplicated keys may leave the tail of the range empty: the snapshot still
        // covered it.
        self.last_read = self.last_read.max(end);
        self.advance_to_snapshot_end();
        if self.last_read >= self.end_seqno {
            return self.end(StreamEndReason::Ok);
        }
        vec![StreamAction::RegisterCursor {
            after: self.last_read,
        }]
    }

    pub fn on_backfill_failed(&mut self) -> Vec<StreamAction> {
        self.end(StreamEndReason::BackfillFailed)
    }

    /// Items read from the cursor: one checkpoint's snapshot range and its items.
    pub fn on_memory_chunk(
        &mut self,
        checkpoint_id: CheckpointId,
        snap_end: Seqno,
        items: &[Change],
    ) -> Vec<StreamAction> {
        if !matches!(
            self.state,
            StreamState::InMemory | StreamState::TakeoverSend
        ) {
            return Vec::new();
        }
        let fresh: Vec<&Change> = items
            .iter()
            .filter(|c| c.meta.seqno > self.last_read)
            .collect();
        let Some(last) = fresh.last() else {
            return Vec::new();
        };
        let passes: Vec<bool> = fresh.iter().map(|c| self.passes(c)).collect();
        let shown: Vec<bool> = fresh
            .iter()
            .zip(&passes)
            .map(|(c, passes)| *passes && self.visible(c))
            .collect();
        let last_visible = fresh
            .iter()
            .zip(&shown)
            .rev()
            .find(|(c, shown)| **shown && c.kind.visible())
            .map(|(c, _)| c.meta.seqno);
        let shows_any = shown.iter().any(|s| *s);
        let snap_end = match last_visible {
            // A stream that advances: nothing of its collections moves the position only
            // (and may complete the snapshot it announced); anything of them, shown or not,
            // is announced in full.
            _ if self.advances() => {
                if !passes.iter().any(|p| *p) {
                    let before = self.last_read;
                    self.last_read = last.meta.seqno;
                    self.advance_to_snapshot_end();
                    if self.last_read >= self.end_seqno && self.last_sent < self.last_read {
                        // The stream ends here: its consumer learns that its position is
                        // the end (Couchbase ends without telling; see the module doc).
                        self.push_marker(
                            before,
                            self.last_read,
                            SnapshotFlags::MEMORY,
                            MarkerSeqnos::default(),
                        );
                        self.snapshot_end = self.last_read;
                        self.snapshot_checkpoint = Some(checkpoint_id);
                        self.advance_to_snapshot_end();
                    }
                    return self.end_if_reached();
                }
                snap_end.max(last.meta.seqno)
            }
            // Nothing this consumer sees: no marker, only the position moves.
            _ if !shows_any => {
                self.last_read = last.meta.seqno;
                return self.end_if_reached();
            }
            None if !self.opts.sync_writes => {
                self.last_read = last.meta.seqno;
                return self.end_if_reached();
            }
            // The snapshot ends at the last thing it shows (invisible ones follow it).
            Some(v) if !self.opts.sync_writes && v < last.meta.seqno => v,
            _ => snap_end.max(last.meta.seqno),
        };
        let continues = self.snapshot_checkpoint == Some(checkpoint_id)
            && self.last_read < self.snapshot_end
            && snap_end <= self.snapshot_end;
        if !continues {
            let mut flags = SnapshotFlags::MEMORY;
            if self.snapshot_checkpoint != Some(checkpoint_id) {
                flags = flags.with(SnapshotFlags::CHECKPOINT);
            }
            let seqnos = MarkerSeqnos {
                max_visible_seqno: last_visible.unwrap_or(self.last_visible),
                high_completed_seqno: Seqno::ZERO,
            };
            self.push_marker(self.last_read, snap_end, flags, seqnos);
            self.snapshot_end = snap_end;
            self.snapshot_checkpoint = Some(checkpoint_id);
        }
        for (c, shown) in fresh.into_iter().zip(shown) {
            self.queue_change(c, shown);
        }
        self.advance_to_snapshot_end();
        let mut actions = self.end_if_reached();
        actions.extend(self.end_if_filter_emptied());
        actions
    }

    fn end_if_reached(&mut self) -> Vec<StreamAction> {
        if self.last_read >= self.end_seqno && self.last_read >= self.snapshot_end {
            return self.end(StreamEndReason::Ok);
        }
        Vec::new()
    }

    /// Ends a stream whose filter lost its last collection (after `end_if_reached`: a
    /// stream that reached its end seqno with the drop ends `Ok`, as on Couchbase).
    fn end_if_filter_emptied(&mut self) -> Vec<StreamAction> {
        if self.filter_emptied {
            return self.end(StreamEndReason::FilterEmpty);
        }
        Vec::new()
    }

    /// The engine dropped this stream's cursor to free checkpoint memory.
    pub fn on_cursor_dropped(&mut self) -> Vec<StreamAction> {
        if !matches!(
            self.state,
            StreamState::InMemory | StreamState::TakeoverSend
        ) {
            return Vec::new();
        }
        self.counters.cursor_drops += 1;
        // A takeover must finish: it backfills whether or not the client opted in.
        if !self.opts.cursor_dropping && self.takeover.is_none() {
            return self.end(StreamEndReason::TooSlow);
        }
        self.state = StreamState::Backfilling;
        self.counters.backfills += 1;
        // The snapshot being sent is cut short: the backfill's marker starts a new one.
        self.snapshot_end = self.last_read;
        self.snapshot_checkpoint = None;
        vec![StreamAction::Backfill {
            after: self.last_read,
        }]
    }

    /// CLOSE_STREAM from the client: what is queued is dropped.
    pub fn close(&mut self) -> Vec<StreamAction> {
        self.clear_ready();
        if self.opts.send_end_on_close {
            self.end(StreamEndReason::Closed)
        } else {
            let was_dead = self.state == StreamState::Dead;
            self.state = StreamState::Dead;
            if was_dead {
                Vec::new()
            } else {
                vec![StreamAction::ReleaseCursor]
            }
        }
    }

    /// The vbucket left the state this stream needs.
    pub fn on_state_changed(&mut self) -> Vec<StreamAction> {
        self.clear_ready();
        self.end(StreamEndReason::StateChanged)
    }

    fn clear_ready(&mut self) {
        self.ready.clear();
        self.ready_bytes = 0;
    }

    /// Whether this stream sends `c`: a change it can see ([`Self::visible`]) of a
    /// collection it sends ([`Self::passes`]).
    fn shows(&mut self, c: &Change) -> bool {
        self.visible(c) && self.passes(c)
    }

    /// Not a prepare or abort, unless the consumer enabled sync writes.
    fn visible(&self, c: &Change) -> bool {
        c.kind.visible() || self.opts.sync_writes
    }

    /// Whether `c` is a change of a collection this stream sends (or a record of one). A
    /// scope filter takes in the collections made in its scope as their records pass.
    fn passes(&mut self, c: &Change) -> bool {
        let cid = collection_of(&c.key);
        match self.opts.collections {
            KeyMode::Raw => true,
            KeyMode::Legacy => cid == CollectionId::DEFAULT,
            KeyMode::Aware if cid == CollectionId::SYSTEM => {
                match (SystemEvent::decode(&c.key, &c.value), &mut self.filter) {
                    (None, _) => false,
                    (Some(_), None) => true,
                    (
                        Some(SystemEvent::Collection {
                            scope, collection, ..
                        }),
                        Some(f),
                    ) => f.admits_collection_record(scope, CollectionId(collection)),
                    (Some(SystemEvent::Scope { scope, .. }), Some(f)) => {
                        f.admits_scope_record(scope)
                    }
                }
            }
            KeyMode::Aware => self
                .filter
                .as_ref()
                .is_none_or(|f| f.admits_collection(cid)),
        }
    }

    fn queue_change(&mut self, c: &Change, shown: bool) {
        debug_assert!(c.meta.seqno > self.last_read);
        self.last_read = c.meta.seqno;
        if !shown {
            return;
        }
        debug_assert!(
            c.meta.seqno <= self.snapshot_end,
            "{} sent outside its snapshot (ending {})",
            c.meta.seqno,
            self.snapshot_end
        );
        if c.kind.visible() {
            self.last_visible = c.meta.seqno;
        }
        self.last_sent = c.meta.seqno;
        if self.opts.collections == KeyMode::Aware {
            if let Some(record) = SystemEvent::decode(&c.key, &c.value) {
                if let Some(f) = &mut self.filter {
                    self.filter_emptied |= f.on_record(&record);
                }
                let e = crate::system_event::to_dcp(c.meta.seqno, &record);
                self.push(DcpMessage::SystemEvent(e));
                return;
            }
        }
        let key = self.opts.collections.wire_key(&c.key);
        let mut doc = DcpDocument {
            key: key.clone(),
            value: c.value.clone(),
            datatype: c.meta.datatype,
            cas: c.meta.cas,
            seqno: c.meta.seqno,
            rev_seqno: c.meta.rev_seqno,
            flags: 0,
            expiry: 0,
            delete_time: None,
        };
        // A commit reaches a non-sync consumer as what it made.
        let kind = match c.kind {
            ChangeKind::Commit { .. } if !self.opts.sync_writes => {
                if c.meta.deleted {
                    ChangeKind::Deletion
                } else {
                    ChangeKind::Mutation
                }
            }
            k => k,
        };
        let msg = match kind {
            ChangeKind::Prepare(level) => {
                doc.flags = c.meta.flags;
                doc.expiry = c.meta.expiry.0;
                if self.opts.value == IncludeValue::No {
                    doc.value = Bytes::new();
                    doc.datatype = Datatype::RAW;
                }
                DcpMessage::Prepare(DcpPrepare {
                    doc,
                    deleted: c.meta.deleted,
                    level,
                })
            }
            ChangeKind::Commit { prepared } => DcpMessage::Commit(DcpCompletion {
                key: key.clone(),
                prepared_seqno: prepared,
                seqno: c.meta.seqno,
            }),
            ChangeKind::Abort { prepared } => DcpMessage::Abort(DcpCompletion {
                key,
                prepared_seqno: prepared,
                seqno: c.meta.seqno,
            }),
            ChangeKind::Mutation => {
                doc.flags = c.meta.flags;
                doc.expiry = c.meta.expiry.0;
                if self.opts.value == IncludeValue::No {
                    doc.value = Bytes::new();
                    doc.datatype = Datatype::RAW;
                }
                DcpMessage::Mutation(doc)
            }
            ChangeKind::Deletion | ChangeKind::Expiration => {
                // A tombstone's value is the system xattrs it kept, if any (and only for a
                // consumer that asked for xattrs: the others' copy has them stripped).
                if !doc.datatype.is_xattr() {
                    doc.value = Bytes::new();
                    doc.datatype = Datatype::RAW;
                }
                if kind == ChangeKind::Expiration && self.opts.expiry_opcode {
                    doc.delete_time = Some(c.meta.delete_time);
                    DcpMessage::Expiration(doc)
                } else {
                    doc.delete_time = self.opts.include_delete_times.then_some(c.meta.delete_time);
                    DcpMessage::Deletion(doc)
                }
            }
        };
        self.push(msg);
    }
}
