//! One producer connection: its settings, its streams, flow control and noops. The server
//! asks it which messages to write next ([`Producer::fill`]) and tells it what the client
//! sent; the streams' reads from the engine are driven by the server from
//! [`crate::stream::StreamAction`]s.
//!
//! Fairness: `fill` takes messages round-robin across streams, one at a time, so one busy
//! vbucket cannot starve the others, and at most `priority.batch()` messages per call, so
//! one connection cannot starve the others sharing its thread.
//!
//! Streams are named by [`StreamKey`]: the vbucket alone, or with `enable_stream_id` the
//! vbucket and the consumer's stream id, and then a vbucket may have several streams.

use crate::control::{ControlError, ControlSetting, Priority};
use crate::filter::KeyMode;
use crate::flow_control::FlowControl;
use crate::noop::NoopTimer;
use crate::sent_stamps::SentStamps;
use crate::stream::{ActiveStream, StreamOptions};
use crate::stream_key::StreamKey;
use sluice_proto::dcp::{DcpMessage, OpenFlags};
use sluice_types::{IncludeValue, VbId};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::Instant;

/// A stream being changed ([`Producer::stream_mut`]): when it goes, the change in what the
/// stream has ready is added to the producer's total.
pub struct StreamMut<'a> {
    stream: &'a mut ActiveStream,
    before: usize,
    total: &'a mut usize,
}

impl std::ops::Deref for StreamMut<'_> {
    type Target = ActiveStream;
    fn deref(&self) -> &ActiveStream {
        self.stream
    }
}

impl std::ops::DerefMut for StreamMut<'_> {
    fn deref_mut(&mut self) -> &mut ActiveStream {
        self.stream
    }
}

impl Drop for StreamMut<'_> {
    fn drop(&mut self) {
        *self.total = *self.total - self.before + self.stream.ready_bytes();
    }
}

#[derive(Debug)]
pub struct Producer {
    pub name: String,
    pub flags: OpenFlags,
    pub flow: FlowControl,
    pub priority: Priority,
    pub noop: NoopTimer,
    cursor_dropping: bool,
    send_end_on_close: bool,
    expiry_opcode: bool,
    sync_writes: bool,
    /// `enable_stream_id`: every stream request names a stream id.
    stream_ids: bool,
    /// How this connection's consumer reads collections (see `filter`).
    pub collections: KeyMode,
    /// `consumer_name`, if the consumer gave one: whose copy its seqno acks are about.
    pub consumer_name: Option<String>,
    streams: BTreeMap<StreamKey, ActiveStream>,
    /// Streams with messages waiting, in the order they will be served.
    rotation: VecDeque<StreamKey>,
    /// The streams in `rotation` (scheduling is per change: no scan of the queue).
    in_rotation: HashSet<StreamKey>,
    /// The sum of every stream's `ready_bytes`, kept as streams change (the server asks
    /// for it on every pass; summing hundreds of streams each time showed in profiles).
    ready_total: usize,
    /// Opaque of the next DCP_NOOP this producer sends.
    next_noop_opaque: u32,
    /// Everything this connection sent (streams come and go; these do not reset).
    pub bytes_sent: u64,
    pub items_sent: u64,
    /// Set on connections whose sends are timed (another member's replication): every
    /// document and prepare [`Producer::fill`] encodes is noted with its CAS.
    pub sent_stamps: Option<SentStamps>,
}

impl Producer {
    pub fn new(name: String, flags: OpenFlags, now: Instant) -> Self {
        Producer {
            name,
            flags,
            flow: FlowControl::disabled(),
            priority: Priority::Medium,
            noop: NoopTimer::new(now),
            cursor_dropping: false,
            send_end_on_close: false,
            expiry_opcode: false,
            sync_writes: false,
            stream_ids: false,
            collections: KeyMode::Raw,
            consumer_name: None,
            streams: BTreeMap::new(),
            rotation: VecDeque::new(),
            in_rotation: HashSet::new(),
            ready_total: 0,
            next_noop_opaque: 0x1000_0000,
            bytes_sent: 0,
            items_sent: 0,
            sent_stamps: None,
        }
    }

    /// Applies a DCP_CONTROL the parser accepted, or refuses one that conflicts with the
    /// connection's other settings: stream ids and sync writes exclude each other (as on
    /// Couchbase, where the two were never made to work together), stream ids cannot be
    /// turned off, and must be on before the first stream (its key would have no id).
    pub fn apply(&mut self, setting: ControlSetting, now: Instant) -> Result<(), ControlError> {
        match setting {
            ControlSetting::EnableStreamId(on) if on == self.stream_ids => {}
            ControlSetting::EnableStreamId(false) => {
                return Err(ControlError::Invalid(
                    "enable_stream_id: once on, stream ids stay on".into(),
                ))
            }
            ControlSetting::EnableStreamId(true) if self.sync_writes => {
                return Err(ControlError::NotSupported(
                    "enable_stream_id together with enable_sync_writes".into(),
                ))
            }
            ControlSetting::EnableStreamId(true) if !self.streams.is_empty() => {
                return Err(ControlError::Invalid(
                    "enable_stream_id: only before the first stream request".into(),
                ))
            }
            ControlSetting::EnableStreamId(true) => self.stream_ids = true,
            ControlSetting::EnableSyncWrites(true) if self.stream_ids => {
                return Err(ControlError::NotSupported(
                    "enable_sync_writes together with enable_stream_id".into(),
                ))
            }
            ControlSetting::ConnectionBufferSize(n) => self.flow.set_window(n),
            ControlSetting::EnableNoop(on) => self.noop.enable(on, now),
            ControlSetting::NoopInterval(d) => self.noop.set_interval(d),
            ControlSetting::Priority(p) => self.priority = p,
            ControlSetting::SupportsCursorDropping(on) => self.cursor_dropping = on,
            ControlSetting::SendStreamEndOnClientClose(on) => self.send_end_on_close = on,
            ControlSetting::EnableExpiryOpcode(on) => self.expiry_opcode = on,
            ControlSetting::EnableSyncWrites(on) => self.sync_writes = on,
            ControlSetting::ConsumerName(name) => self.consumer_name = Some(name),
            ControlSetting::ForceValueCompression(_) | ControlSetting::Accepted => {}
        }
        Ok(())
    }

    /// `enable_stream_id` is on: stream requests and closes must name a stream id.
    pub fn stream_ids(&self) -> bool {
        self.stream_ids
    }

    /// What new streams on this connection are asked to do.
    pub fn stream_options(&self) -> StreamOptions {
        let include_delete_times = self.flags.contains(OpenFlags::INCLUDE_DELETE_TIMES);
        StreamOptions {
            value: if self.flags.contains(OpenFlags::NO_VALUE)
                || self
                    .flags
                    .contains(OpenFlags::NO_VALUE_WITH_UNDERLYING_DATATYPE)
            {
                IncludeValue::No
            } else {
                IncludeValue::Yes
            },
            include_delete_times,
            // The expiry opcode carries a delete time: it needs the v2 format.
            expiry_opcode: self.expiry_opcode && include_delete_times,
            cursor_dropping: self.cursor_dropping,
            send_end_on_close: self.send_end_on_close,
            sync_writes: self.sync_writes,
            collections: self.collections,
        }
    }

    /// A live (not dead) stream `key` exists.
    pub fn has_stream(&self, key: StreamKey) -> bool {
        self.streams
            .get(&key)
            .is_some_and(|s| s.state() != crate::stream::StreamState::Dead)
    }

    /// Adds a stream; a dead one of the same key is replaced (with whatever it had not
    /// sent yet: the client asked for a new stream, so the old one's end is moot).
    pub fn add_stream(&mut self, stream: ActiveStream) {
        let key = stream.key();
        assert_eq!(
            key.sid.is_some(),
            self.stream_ids,
            "a stream has an id exactly when the connection enabled stream ids"
        );
        assert!(!self.has_stream(key), "one live stream per key");
        self.ready_total += stream.ready_bytes();
        if let Some(old) = self.streams.insert(key, stream) {
            self.ready_total -= old.ready_bytes();
        }
    }

    pub fn stream(&self, key: StreamKey) -> Option<&ActiveStream> {
        self.streams.get(&key)
    }

    /// Stream `key`, to change: what it queues or sends is counted in
    /// [`Self::ready_bytes`] when the returned guard goes.
    pub fn stream_mut(&mut self, key: StreamKey) -> Option<StreamMut<'_>> {
        let stream = self.streams.get_mut(&key)?;
        Some(StreamMut {
            before: stream.ready_bytes(),
            stream,
            total: &mut self.ready_total,
        })
    }

    /// The keys of `vb`'s streams (live or finishing), in id order.
    pub fn keys_of(&self, vb: VbId) -> Vec<StreamKey> {
        self.streams
            .range(StreamKey::all_of(vb))
            .map(|(k, _)| *k)
            .collect()
    }

    /// Whether `vb` has any stream at all on this connection (under any id).
    pub fn has_any_stream_of(&self, vb: VbId) -> bool {
        self.streams.range(StreamKey::all_of(vb)).next().is_some()
    }

    pub fn streams(&self) -> impl Iterator<Item = &ActiveStream> {
        self.streams.values()
    }

    pub fn num_streams(&self) -> usize {
        self.streams.len()
    }

    /// Marks stream `key` as having messages to send (call after feeding it).
    pub fn schedule(&mut self, key: StreamKey) {
        if self.in_rotation.insert(key) {
            self.rotation.push_back(key);
        }
    }

    /// Bytes queued in all streams' ready queues.
    pub fn ready_bytes(&self) -> usize {
        debug_assert_eq!(
            self.ready_total,
            self.streams
                .values()
                .map(|s| s.ready_bytes())
                .sum::<usize>()
        );
        self.ready_total
    }

    /// Encodes up to `priority.batch() * scale` messages into `out` while flow control allows
    /// and `out` is under `out_bytes_max`, round-robin across streams. Returns how many were
    /// written. Finished streams are forgotten once their last message is out.
    pub fn fill(
        &mut self,
        out: &mut Vec<u8>,
        scale: usize,
        out_bytes_max: usize,
        now: Instant,
    ) -> usize {
        let budget = self.priority.batch() * scale.max(1);
        let mut written = 0;
        while written < budget && self.flow.can_send() && out.len() < out_bytes_max {
            let Some(key) = self.rotation.pop_front() else {
                break;
            };
            self.in_rotation.remove(&key);
            let Some(stream) = self.streams.get_mut(&key) else {
                continue;
            };
            let before = stream.ready_bytes();
            let Some(msg) = stream.pop_ready() else {
                if stream.is_finished() {
                    self.streams.remove(&key);
                }
                continue;
            };
            self.ready_total -= before - stream.ready_bytes();
            let n = msg.encode_for_stream(key.vb, stream.opaque, key.sid, out);
            if let Some(stamps) = self.sent_stamps.as_mut() {
                let cas = match &msg {
                    DcpMessage::Mutation(d)
                    | DcpMessage::Deletion(d)
                    | DcpMessage::Expiration(d) => Some(d.cas),
                    DcpMessage::Prepare(p) => Some(p.doc.cas),
                    _ => None,
                };
                if let Some(cas) = cas {
                    stamps.note(out.len(), cas.0);
                }
            }
            self.flow.on_sent(n);
            self.bytes_sent += n as u64;
            if matches!(
                msg,
                DcpMessage::Mutation(_) | DcpMessage::Deletion(_) | DcpMessage::Expiration(_)
            ) {
                self.items_sent += 1;
            }
            written += 1;
            if stream.has_ready() {
                self.in_rotation.insert(key);
                self.rotation.push_back(key);
            } else if stream.is_finished() {
                self.streams.remove(&key);
            }
        }
        if written > 0 {
            self.noop.on_sent(now);
        }
        written
    }

    /// A DCP_NOOP to send now; not counted by flow control.
    pub fn encode_noop(&mut self, out: &mut Vec<u8>) {
        let opaque = self.next_noop_opaque;
        self.next_noop_opaque = self.next_noop_opaque.wrapping_add(1);
        DcpMessage::Noop.encode(VbId(0), opaque, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{Change, ChangeKind};
    use bytes::Bytes;
    use sluice_proto::dcp::StreamEndReason;
    use sluice_proto::{decode_frame, Decoded};
    use sluice_types::{CheckpointId, ItemMeta, Seqno};

    fn change(seqno: u64) -> Change {
        Change {
            key: Bytes::from(format!("k{seqno}")),
            value: Bytes::from_static(&[7u8; 100]),
            meta: ItemMeta {
                seqno: Seqno(seqno),
                ..Default::default()
            },
            kind: ChangeKind::Mutation,
        }
    }

    fn decode_all(mut bytes: &[u8]) -> Vec<(VbId, DcpMessage)> {
        let mut out = Vec::new();
        while let Ok(Decoded::Frame(f, used)) = decode_frame(bytes, 1 << 20) {
            out.push((VbId(f.vbucket_or_status), DcpMessage::decode(&f).unwrap()));
            bytes = &bytes[used..];
        }
        out
    }

    #[test]
    fn streams_take_turns_and_the_window_is_respected() {
        let now = Instant::now();
        let mut p = Producer::new("t".into(), OpenFlags::PRODUCER, now);
        p.apply(ControlSetting::ConnectionBufferSize(400), now)
            .unwrap();
        p.apply(ControlSetting::Priority(Priority::High), now)
            .unwrap();
        for vb in [VbId(1), VbId(2)] {
            let mut s = ActiveStream::new(vb, 9, Seqno(0), Seqno::MAX, p.stream_options());
            s.start();
            s.on_cursor(true);
            let items: Vec<Change> = (1..=5).map(change).collect();
            s.on_memory_chunk(CheckpointId(1), Seqno(5), &items);
            p.add_stream(s);
            p.schedule(StreamKey::vb(vb));
        }
        let mut out = Vec::new();
        let n = p.fill(&mut out, 1, usize::MAX, now);
        assert!((2..12).contains(&n), "stopped by the window after {n}");
        assert!(p.flow.unacked() >= 400);
        let msgs = decode_all(&out);
        assert_eq!(msgs[0].0, VbId(1));
        assert_eq!(msgs[1].0, VbId(2), "round robin");
        assert_eq!(p.fill(&mut out, 1, usize::MAX, now), 0, "window full");
        p.flow.on_ack(p.flow.unacked() as u32);
        assert!(p.fill(&mut out, 1, usize::MAX, now) > 0);
    }

    /// `ready_bytes` is kept, not summed: it follows streams fed through `stream_mut`, the
    /// messages `fill` sends, and a stream replaced by a new one of the same key.
    #[test]
    fn ready_bytes_follow_feeding_sending_and_replacing() {
        let now = Instant::now();
        let mut p = Producer::new("t".into(), OpenFlags::PRODUCER, now);
        let sum = |p: &Producer| p.streams().map(|s| s.ready_bytes()).sum::<usize>();
        for vb in [VbId(1), VbId(2)] {
            let mut s = ActiveStream::new(vb, 9, Seqno(0), Seqno::MAX, p.stream_options());
            s.start();
            s.on_cursor(true);
            p.add_stream(s);
            let items: Vec<Change> = (1..=5).map(change).collect();
            let mut s = p.stream_mut(StreamKey::vb(vb)).unwrap();
            s.on_memory_chunk(CheckpointId(1), Seqno(5), &items);
            drop(s);
            p.schedule(StreamKey::vb(vb));
        }
        assert!(p.ready_bytes() > 1000);
        assert_eq!(p.ready_bytes(), sum(&p));
        let mut out = Vec::new();
        assert_eq!(
            p.fill(&mut out, 1, 700, now),
            5,
            "stops at the output bound"
        );
        assert_eq!(p.ready_bytes(), sum(&p));
        // The stream of vb 1 closes and is replaced while it still holds messages.
        let mut s = p.stream_mut(StreamKey::vb(VbId(1))).unwrap();
        s.close();
        drop(s);
        assert_eq!(p.ready_bytes(), sum(&p));
        let mut again = ActiveStream::new(VbId(1), 10, Seqno(0), Seqno::MAX, p.stream_options());
        again.start();
        p.add_stream(again);
        assert_eq!(p.ready_bytes(), sum(&p));
        while p.fill(&mut out, 1, usize::MAX, now) > 0 {}
        assert_eq!(p.ready_bytes(), 0);
    }

    #[test]
    fn stream_ids_name_several_streams_of_one_vbucket_on_the_wire() {
        let now = Instant::now();
        let mut p = Producer::new("t".into(), OpenFlags::PRODUCER, now);
        p.apply(ControlSetting::EnableStreamId(true), now).unwrap();
        assert!(p.stream_ids());
        for sid in [1u16, 2] {
            let mut s = ActiveStream::new(
                VbId(5),
                40 + u32::from(sid),
                Seqno(0),
                Seqno::MAX,
                p.stream_options(),
            )
            .with_stream_id(sid);
            s.start();
            s.on_cursor(true);
            s.on_memory_chunk(CheckpointId(1), Seqno(1), &[change(1)]);
            p.add_stream(s);
            p.schedule(StreamKey::new(VbId(5), sid));
        }
        assert_eq!(
            p.keys_of(VbId(5)),
            vec![StreamKey::new(VbId(5), 1), StreamKey::new(VbId(5), 2)]
        );
        assert!(p.has_any_stream_of(VbId(5)) && !p.has_any_stream_of(VbId(4)));
        let mut out = Vec::new();
        assert_eq!(p.fill(&mut out, 1, usize::MAX, now), 4);
        let mut bytes = &out[..];
        let mut seen = Vec::new();
        while let Ok(Decoded::Frame(f, used)) = decode_frame(bytes, 1 << 20) {
            let sid = sluice_proto::frame_info::parse_frame_infos(f.framing_extras)
                .unwrap()
                .stream_id;
            seen.push((sid, f.opaque));
            bytes = &bytes[used..];
        }
        assert_eq!(
            seen,
            vec![(Some(1), 41), (Some(2), 42), (Some(1), 41), (Some(2), 42)],
            "each message names its stream, round robin between them"
        );
        assert_eq!(p.bytes_sent, out.len() as u64);
    }

    #[test]
    fn stream_ids_exclude_sync_writes_and_stay_on() {
        let now = Instant::now();
        let mut p = Producer::new("t".into(), OpenFlags::PRODUCER, now);
        p.apply(ControlSetting::EnableSyncWrites(true), now)
            .unwrap();
        assert!(matches!(
            p.apply(ControlSetting::EnableStreamId(true), now),
            Err(ControlError::NotSupported(_))
        ));
        let mut q = Producer::new("t".into(), OpenFlags::PRODUCER, now);
        q.apply(ControlSetting::EnableStreamId(false), now).unwrap();
        q.apply(ControlSetting::EnableStreamId(true), now).unwrap();
        q.apply(ControlSetting::EnableStreamId(true), now).unwrap();
        assert!(matches!(
            q.apply(ControlSetting::EnableStreamId(false), now),
            Err(ControlError::Invalid(_))
        ));
        assert!(matches!(
            q.apply(ControlSetting::EnableSyncWrites(true), now),
            Err(ControlError::NotSupported(_))
        ));
        let mut r = Producer::new("t".into(), OpenFlags::PRODUCER, now);
        r.add_stream(ActiveStream::new(
            VbId(1),
            1,
            Seqno(0),
            Seqno::MAX,
            r.stream_options(),
        ));
        assert!(
            matches!(
                r.apply(ControlSetting::EnableStreamId(true), now),
                Err(ControlError::Invalid(_))
            ),
            "a stream without an id exists already"
        );
    }

    #[test]
    fn a_finished_stream_is_forgotten_after_its_end_is_sent() {
        let now = Instant::now();
        let mut p = Producer::new("t".into(), OpenFlags::PRODUCER, now);
        let mut s = ActiveStream::new(VbId(3), 1, Seqno(4), Seqno(4), p.stream_options());
        s.start();
        p.add_stream(s);
        p.schedule(StreamKey::vb(VbId(3)));
        assert!(
            !p.has_stream(StreamKey::vb(VbId(3))),
            "dead at once: a new request may replace it"
        );
        assert_eq!(p.num_streams(), 1, "kept until its end is sent");
        let mut out = Vec::new();
        assert_eq!(p.fill(&mut out, 1, usize::MAX, now), 1);
        assert_eq!(
            decode_all(&out)[0].1,
            DcpMessage::StreamEnd(StreamEndReason::Ok)
        );
        assert_eq!(p.num_streams(), 0);
    }
}
