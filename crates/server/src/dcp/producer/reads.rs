//! Where a producer connection's streams get their changes: carrying out the streams'
//! actions against the engine (cursors, vbucket state), reading cursors of vbuckets that
//! changed, and running the backfill tasks the scheduler hands out.

use super::stats::to_change;
use super::{
    BackfillDone, Conn, BACKFILL_CHUNK_BYTES, CURSOR_READ_BYTES, OUT_HIGH_BYTES, PASS_SCALE,
    STREAM_READY_BYTES_MAX,
};
use crate::dcp::replication_stats::now_unix_ns;
use crate::dcp::stages::Stage;
use sluice_dcp::backfill::{BackfillTask, StreamId};
use sluice_dcp::change::Change;
use sluice_dcp::stream::{StreamAction, StreamState};
use sluice_dcp::stream_key::StreamKey;
use sluice_engine::{Backfill, QueueOp};
use sluice_types::VbState;
use std::time::Instant;

impl Conn {
    pub(super) fn push_actions(&mut self, key: StreamKey, actions: Vec<StreamAction>) {
        self.actions.extend(actions.into_iter().map(|a| (key, a)));
    }

    pub(super) fn pump(&mut self, out: &mut Vec<u8>) {
        self.run_actions();
        // Takeover streams that sent everything read so far look at their cursor again
        // (a write may not have woken them: the last one may predate the read).
        for key in self.slots.takeovers() {
            match self.producer.stream(key) {
                Some(s) if s.is_takeover() => {
                    if s.takeover_reading() && !s.has_ready() {
                        self.wake.mark_dirty(key.vb);
                    }
                }
                _ => self.slots.end_takeover(key),
            }
        }
        self.read_cursors();
        self.schedule_backfills();
        if out.len() < OUT_HIGH_BYTES {
            self.producer
                .fill(out, PASS_SCALE, OUT_HIGH_BYTES, Instant::now());
        }
    }

    fn run_actions(&mut self) {
        while let Some((key, action)) = self.actions.pop_front() {
            let vb = key.vb;
            match action {
                StreamAction::RegisterCursor { after } => {
                    let registered = if self.slots.has_cursor(key) {
                        // Ephemeral: the backfill registered it with its scan, after exactly
                        // the seqno the backfill ended at.
                        self.wake.watch(vb, true);
                        true
                    } else {
                        match self.bucket.engine.stream_cursor(vb, after) {
                            Ok(Some(c)) => {
                                self.slots.set_cursor(key, c);
                                self.wake.watch(vb, true);
                                true
                            }
                            Ok(None) => false,
                            Err(_) => {
                                self.stream_failed(key);
                                continue;
                            }
                        }
                    };
                    let next = self.producer.stream_mut(key);
                    if let Some(next) = next.map(|mut s| s.on_cursor(registered)) {
                        self.push_actions(key, next);
                    }
                }
                StreamAction::Backfill { after } => {
                    let stream = self.slots.id(key).expect("a stream's key has a slot");
                    self.backfills.request(key, stream, after);
                }
                StreamAction::SetVbucketDead => {
                    // From here on writes to the vbucket get NOT_MY_VBUCKET; what was
                    // written before is still in the cursor's way, and is sent next.
                    if let Err(e) = self.bucket.engine.set_vbucket_state(vb, VbState::Dead) {
                        tracing::warn!(%vb, error = %e, "takeover: cannot set the vbucket dead");
                        self.stream_failed(key);
                        continue;
                    }
                    tracing::info!(%vb, "takeover: vbucket dead here, sending the rest");
                    self.wake.mark_dirty(vb);
                }
                StreamAction::ReleaseCursor => {
                    if let Some(c) = self.slots.take_cursor(key) {
                        self.bucket.engine.release_stream_cursor(vb, c);
                    }
                    // Other streams of the vbucket (stream ids) may still read it.
                    if !self.slots.any_cursor(vb) {
                        self.wake.watch(vb, false);
                    }
                    self.backfills.cancel(key);
                }
            }
            self.producer.schedule(key);
        }
    }

    fn stream_failed(&mut self, key: StreamKey) {
        let stream = self.producer.stream_mut(key);
        if let Some(actions) = stream.map(|mut s| s.on_state_changed()) {
            self.push_actions(key, actions);
            self.producer.schedule(key);
        }
    }

    fn read_cursors(&mut self) {
        let buffer_bytes = self.backfills.limits().buffer_bytes;
        let mut queued = self.producer.ready_bytes();
        for vb in self.wake.take_dirty() {
            // Every stream of the vbucket (several with stream ids) reads its own cursor.
            for key in self.producer.keys_of(vb) {
                if queued >= buffer_bytes {
                    // Nothing more is read until the client drains: look again later.
                    self.wake.mark_dirty(vb);
                    break;
                }
                queued += self.read_cursor(key);
            }
        }
        if !self.actions.is_empty() {
            self.run_actions();
        }
    }

    /// Reads stream `key`'s cursor if it wants more; returns the bytes it queued.
    fn read_cursor(&mut self, key: StreamKey) -> usize {
        let vb = key.vb;
        let Some(&cursor) = self.slots.cursor(key) else {
            return 0;
        };
        let Some(mut stream) = self.producer.stream_mut(key) else {
            return 0;
        };
        if !matches!(
            stream.state(),
            StreamState::InMemory | StreamState::TakeoverSend
        ) {
            return 0;
        }
        if !stream.wants_more(STREAM_READY_BYTES_MAX) {
            self.wake.mark_dirty(vb);
            return 0;
        }
        let mut queued = 0;
        match self
            .bucket
            .engine
            .read_stream_cursor(vb, cursor, CURSOR_READ_BYTES)
        {
            Ok(Some(chunks)) => {
                let before = stream.ready_bytes();
                let mut any = false;
                let mut actions = Vec::new();
                if self.timed {
                    let documents = chunks.iter().flat_map(|c| c.items.iter()).filter(|i| {
                        matches!(
                            i.op,
                            QueueOp::Mutation
                                | QueueOp::Deletion
                                | QueueOp::Expiration
                                | QueueOp::Prepare(_)
                        )
                    });
                    self.node.replication.stages.record_all(
                        Stage::CursorRead,
                        documents.map(|i| i.meta.cas.0),
                        now_unix_ns(),
                    );
                }
                for chunk in &chunks {
                    let items: Vec<Change> = chunk
                        .items
                        .iter()
                        .map(|i| to_change(i, self.form))
                        .collect();
                    any |= !items.is_empty();
                    actions.extend(stream.on_memory_chunk(
                        chunk.checkpoint_id,
                        chunk.snap_end,
                        &items,
                    ));
                }
                queued = stream.ready_bytes().saturating_sub(before);
                if any {
                    // There may be more than one read's worth.
                    self.wake.mark_dirty(vb);
                } else if stream.takeover_reading() && !stream.has_ready() {
                    // A takeover stream that has sent everything moves to its next step.
                    actions.extend(stream.on_drained());
                }
                drop(stream);
                self.push_actions(key, actions);
                self.producer.schedule(key);
            }
            Ok(None) => {
                let actions = stream.on_cursor_dropped();
                drop(stream);
                self.slots.take_cursor(key);
                if !self.slots.any_cursor(vb) {
                    self.wake.watch(vb, false);
                }
                self.push_actions(key, actions);
                self.producer.schedule(key);
            }
            Err(_) => {
                drop(stream);
                self.stream_failed(key);
            }
        }
        queued
    }

    /// Runs every task the scheduler allows now on the blocking pool.
    fn schedule_backfills(&mut self) {
        // Starting reads changes no ready queue: what is queued is counted once.
        let queued = self.producer.ready_bytes();
        while let Some(task) = self.backfills.next(queued) {
            let bucket = self.bucket.engine.clone();
            match task {
                BackfillTask::Start { key, stream, after } => {
                    self.in_flight
                        .spawn_blocking(move || BackfillDone::Started {
                            key,
                            stream,
                            result: sluice_engine::run_as_batch(|| bucket.backfill(key.vb, after)),
                        });
                }
                BackfillTask::Read {
                    key,
                    stream,
                    mut backfill,
                } => {
                    self.in_flight.spawn_blocking(move || {
                        // Disk scans yield the CPU to request handling (as persistence does).
                        let items = sluice_engine::run_as_batch(|| {
                            backfill.next_chunk(BACKFILL_CHUNK_BYTES)
                        });
                        BackfillDone::Chunk {
                            key,
                            stream,
                            backfill,
                            items,
                        }
                    });
                }
            }
        }
    }

    /// Whether a task's result belongs to `key`'s live, backfilling stream (the task itself
    /// is accounted done either way).
    fn current(&mut self, key: StreamKey, stream: StreamId) -> bool {
        let wanted = self.backfills.task_done(key, stream);
        let backfilling = self
            .producer
            .stream(key)
            .is_some_and(|s| s.state() == StreamState::Backfilling);
        if wanted && !backfilling {
            // The stream moved on without releasing its backfill: nothing will read it.
            self.backfills.finish(key);
        }
        wanted && backfilling
    }

    pub(super) fn on_backfill_done(&mut self, done: BackfillDone) {
        match done {
            BackfillDone::Started {
                key,
                stream,
                result,
            } => {
                let vb = key.vb;
                if !self.current(key, stream) {
                    if let Ok(Backfill {
                        cursor: Some(c), ..
                    }) = result
                    {
                        self.bucket.engine.release_stream_cursor(vb, c);
                    }
                    return;
                }
                let mut s = self.producer.stream_mut(key).expect("current");
                match result {
                    Ok(mut backfill) => {
                        s.on_backfill_begin(sluice_dcp::stream::BackfillRange {
                            end: backfill.end,
                            max_visible: backfill.max_visible,
                            high_completed: backfill.high_completed,
                        });
                        drop(s);
                        if let Some(c) = backfill.cursor.take() {
                            // Ephemeral: the cursor was registered with the scan; it is read
                            // once the backfill is done.
                            self.slots.set_cursor(key, c);
                        }
                        self.backfills.park(key, stream, backfill);
                    }
                    Err(e) => {
                        tracing::warn!(%vb, error = %e, "backfill could not start");
                        let actions = s.on_backfill_failed();
                        drop(s);
                        self.backfills.finish(key);
                        self.push_actions(key, actions);
                    }
                }
                self.producer.schedule(key);
            }
            BackfillDone::Chunk {
                key,
                stream,
                backfill,
                items,
            } => {
                if !self.current(key, stream) {
                    return;
                }
                let form = self.form;
                let mut s = self.producer.stream_mut(key).expect("current");
                match items {
                    Ok(items) if items.is_empty() => {
                        self.backfills.finish(key);
                        let actions = s.on_backfill_end();
                        drop(s);
                        self.push_actions(key, actions);
                    }
                    Ok(items) => {
                        let changes: Vec<Change> =
                            items.iter().map(|i| to_change(i, form)).collect();
                        // A filter emptied by a drop in the scan ends the stream here; its
                        // ReleaseCursor cancels the backfill parked below.
                        let actions = s.on_backfill_items(&changes);
                        drop(s);
                        self.backfills.park(key, stream, backfill);
                        self.push_actions(key, actions);
                    }
                    Err(e) => {
                        tracing::warn!(vb = %key.vb, error = %e, "backfill read failed");
                        self.backfills.finish(key);
                        let actions = s.on_backfill_failed();
                        drop(s);
                        self.push_actions(key, actions);
                    }
                }
                self.producer.schedule(key);
            }
        }
    }
}
