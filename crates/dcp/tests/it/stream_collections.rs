//! Collection-aware streams: SEQNO_ADVANCED where a snapshot ends on changes the stream
//! does not show, the FilterEmpty end when the filter's last collection is dropped, and
//! streams named by a stream id. Each case is a table row: the events fed, the messages
//! queued (in a compact form), the actions asked for.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use bytes::Bytes;
use sluice_dcp::change::{Change, ChangeKind};
use sluice_dcp::filter::{KeyMode, StreamFilter};
use sluice_dcp::stream::{ActiveStream, BackfillRange, StreamAction, StreamOptions, StreamState};
use sluice_proto::dcp::{DcpMessage, SnapshotFlags, StreamEndReason};
use sluice_types::system_event::{collection_key, SystemEvent};
use sluice_types::{CheckpointId, CollectionId, DurabilityLevel, ItemMeta, Seqno, VbId};

/// A change in the tables: `(seqno, what)`.
#[derive(Clone, Copy, Debug)]
enum C {
    /// A document of collection `cid`.
    Doc(u64, u32),
    /// A prepare of collection `cid`.
    Prepare(u64, u32),
    /// The drop record of collection `cid` (in scope 8).
    Drop(u64, u32),
}

fn change(c: C) -> Change {
    let doc = |seqno: u64, cid: u32, kind| {
        let mut key = CollectionId(cid).prefix();
        key.extend_from_slice(format!("k{seqno}").as_bytes());
        Change {
            key: Bytes::from(key),
            value: Bytes::from_static(b"v"),
            meta: ItemMeta {
                seqno: Seqno(seqno),
                ..Default::default()
            },
            kind,
        }
    };
    match c {
        C::Doc(n, cid) => doc(n, cid, ChangeKind::Mutation),
        C::Prepare(n, cid) => doc(n, cid, ChangeKind::Prepare(DurabilityLevel::Majority)),
        C::Drop(n, cid) => {
            let record = SystemEvent::Collection {
                dropped: true,
                manifest_uid: 5,
                scope: 8,
                collection: cid,
                max_ttl_s: 0,
                name: Vec::new(),
            };
            Change {
                key: Bytes::from(collection_key(CollectionId(cid))),
                value: Bytes::from(record.encode()),
                meta: ItemMeta {
                    seqno: Seqno(n),
                    ..Default::default()
                },
                kind: ChangeKind::Mutation,
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Ev {
    Start,
    Cursor(bool),
    /// (checkpoint id, snapshot end, changes)
    Memory(u64, u64, &'static [C]),
    BackfillBegin(u64),
    BackfillItems(&'static [C]),
    BackfillEnd,
}

#[derive(Debug, PartialEq, Eq)]
enum Out {
    Marker(u64, u64, u32),
    Item(u64),
    Event(u64),
    Advanced(u64),
    End(StreamEndReason),
}

struct Case {
    name: &'static str,
    start: u64,
    end: u64,
    mode: KeyMode,
    sync_writes: bool,
    /// Collections the stream is filtered to (`None`: all).
    filter: Option<&'static [u32]>,
    events: &'static [Ev],
    out: Vec<Out>,
    actions: Vec<StreamAction>,
    state: StreamState,
}

const MEM_CKPT: u32 = SnapshotFlags::MEMORY.0 | SnapshotFlags::CHECKPOINT.0;
const MEM: u32 = SnapshotFlags::MEMORY.0;
const DISK: u32 = SnapshotFlags::DISK.0;
const FOREVER: u64 = u64::MAX;

fn drain(s: &mut ActiveStream, name: &str) -> Vec<Out> {
    let mut out = Vec::new();
    loop {
        let before = s.ready_bytes();
        let Some(m) = s.pop_ready() else { break };
        assert_eq!(
            before - s.ready_bytes(),
            m.wire_len_for_stream(s.sid),
            "{name}: ready bytes"
        );
        out.push(match m {
            DcpMessage::SnapshotMarker(m) => Out::Marker(m.start.0, m.end.0, m.flags.0),
            DcpMessage::Mutation(d) | DcpMessage::Deletion(d) => Out::Item(d.seqno.0),
            DcpMessage::Prepare(p) => Out::Item(p.doc.seqno.0),
            DcpMessage::SystemEvent(e) => Out::Event(e.seqno.0),
            DcpMessage::SeqnoAdvanced(n) => Out::Advanced(n.0),
            DcpMessage::StreamEnd(r) => Out::End(r),
            other => panic!("{name}: unexpected {other:?}"),
        });
    }
    out
}

fn run(c: &Case) {
    let opts = StreamOptions {
        collections: c.mode,
        sync_writes: c.sync_writes,
        ..Default::default()
    };
    let mut s = ActiveStream::new(VbId(0), 1, Seqno(c.start), Seqno(c.end), opts);
    if let Some(ids) = c.filter {
        s = s.with_filter(StreamFilter::collections(
            ids.iter().map(|&i| CollectionId(i)),
        ));
    }
    let mut actions = Vec::new();
    for ev in c.events {
        match *ev {
            Ev::Start => actions.extend(s.start()),
            Ev::Cursor(ok) => actions.extend(s.on_cursor(ok)),
            Ev::Memory(ckpt, end, changes) => {
                let items: Vec<Change> = changes.iter().map(|&x| change(x)).collect();
                actions.extend(s.on_memory_chunk(CheckpointId(ckpt), Seqno(end), &items));
            }
            Ev::BackfillBegin(end) => s.on_backfill_begin(BackfillRange {
                end: Seqno(end),
                max_visible: Seqno(end),
                high_completed: Seqno::ZERO,
            }),
            Ev::BackfillItems(changes) => {
                let items: Vec<Change> = changes.iter().map(|&x| change(x)).collect();
                actions.extend(s.on_backfill_items(&items));
            }
            Ev::BackfillEnd => actions.extend(s.on_backfill_end()),
        }
    }
    let out = drain(&mut s, c.name);
    assert_eq!(out, c.out, "{}: messages", c.name);
    assert_eq!(actions, c.actions, "{}: actions", c.name);
    assert_eq!(s.state(), c.state, "{}: final state", c.name);
    // What a consumer relies on: every seqno it is given (an item's, an event's or a
    // SEQNO_ADVANCED's) grows and lies in the snapshot last announced; a SEQNO_ADVANCED is
    // that snapshot's end.
    let mut last = c.start;
    let mut snap = None;
    for o in &out {
        let n = match o {
            Out::Marker(a, b, _) => {
                assert!(
                    *a >= last && a <= b,
                    "{}: marker {a}..{b} after {last}",
                    c.name
                );
                snap = Some((*a, *b));
                continue;
            }
            Out::Item(n) | Out::Event(n) => *n,
            Out::Advanced(n) => {
                assert_eq!(
                    Some(*n),
                    snap.map(|s| s.1),
                    "{}: advanced to the end",
                    c.name
                );
                *n
            }
            Out::End(_) => continue,
        };
        let (a, b) = snap.expect("a marker first");
        assert!(n > last && n > a && n <= b, "{}: {n} in {a}..{b}", c.name);
        last = n;
    }
}

#[test]
fn collection_aware_stream_scripts() {
    use Ev::*;
    use StreamAction::*;

    let cases = vec![
        Case {
            name: "a filtered snapshot ending on another collection advances to its end",
            start: 0,
            end: FOREVER,
            mode: KeyMode::Aware,
            sync_writes: false,
            filter: Some(&[8]),
            events: &[
                Start,
                Cursor(true),
                Memory(
                    1,
                    4,
                    &[C::Doc(1, 8), C::Doc(2, 9), C::Doc(3, 8), C::Doc(4, 9)],
                ),
            ],
            out: vec![
                Out::Marker(0, 4, MEM_CKPT),
                Out::Item(1),
                Out::Item(3),
                Out::Advanced(4),
            ],
            actions: vec![RegisterCursor { after: Seqno(0) }],
            state: StreamState::InMemory,
        },
        Case {
            name: "a read with nothing of the stream's collections sends nothing",
            start: 0,
            end: FOREVER,
            mode: KeyMode::Aware,
            sync_writes: false,
            filter: Some(&[8]),
            events: &[
                Start,
                Cursor(true),
                Memory(1, 2, &[C::Doc(1, 9), C::Doc(2, 9)]),
                Memory(2, 3, &[C::Doc(3, 8)]),
            ],
            out: vec![Out::Marker(2, 3, MEM_CKPT), Out::Item(3)],
            actions: vec![RegisterCursor { after: Seqno(0) }],
            state: StreamState::InMemory,
        },
        Case {
            name: "a snapshot read in two parts advances once its end is read",
            start: 0,
            end: FOREVER,
            mode: KeyMode::Aware,
            sync_writes: false,
            filter: Some(&[8]),
            events: &[
                Start,
                Cursor(true),
                Memory(1, 3, &[C::Doc(1, 8)]),
                Memory(1, 3, &[C::Doc(2, 9)]),
                Memory(1, 3, &[C::Doc(3, 9)]),
                Memory(1, 4, &[C::Doc(4, 8)]),
            ],
            out: vec![
                Out::Marker(0, 3, MEM_CKPT),
                Out::Item(1),
                Out::Advanced(3),
                Out::Marker(3, 4, MEM),
                Out::Item(4),
            ],
            actions: vec![RegisterCursor { after: Seqno(0) }],
            state: StreamState::InMemory,
        },
        Case {
            name: "a stream reaching its end on another collection's changes ends there",
            start: 0,
            end: 3,
            mode: KeyMode::Aware,
            sync_writes: false,
            filter: Some(&[8]),
            events: &[
                Start,
                Cursor(true),
                Memory(1, 1, &[C::Doc(1, 8)]),
                Memory(2, 3, &[C::Doc(2, 9), C::Doc(3, 9)]),
            ],
            out: vec![
                Out::Marker(0, 1, MEM_CKPT),
                Out::Item(1),
                Out::Marker(1, 3, MEM),
                Out::Advanced(3),
                Out::End(StreamEndReason::Ok),
            ],
            actions: vec![RegisterCursor { after: Seqno(0) }, ReleaseCursor],
            state: StreamState::Dead,
        },
        Case {
            name: "a backfill announces its whole range and advances past a filtered tail",
            start: 0,
            end: FOREVER,
            mode: KeyMode::Aware,
            sync_writes: false,
            filter: Some(&[8]),
            events: &[
                Start,
                Cursor(false),
                BackfillBegin(10),
                BackfillItems(&[C::Doc(2, 8), C::Doc(5, 9)]),
                BackfillItems(&[C::Doc(7, 9)]),
                BackfillEnd,
            ],
            out: vec![Out::Marker(0, 10, DISK), Out::Item(2), Out::Advanced(10)],
            actions: vec![
                RegisterCursor { after: Seqno(0) },
                Backfill { after: Seqno(0) },
                RegisterCursor { after: Seqno(10) },
            ],
            state: StreamState::Backfilling,
        },
        Case {
            name: "a backfill with nothing of the stream's collections still moves it",
            start: 0,
            end: 10,
            mode: KeyMode::Aware,
            sync_writes: false,
            filter: Some(&[8]),
            events: &[
                Start,
                Cursor(false),
                BackfillBegin(10),
                BackfillItems(&[C::Doc(4, 9), C::Doc(10, 9)]),
                BackfillEnd,
            ],
            out: vec![
                Out::Marker(0, 10, DISK),
                Out::Advanced(10),
                Out::End(StreamEndReason::Ok),
            ],
            actions: vec![
                RegisterCursor { after: Seqno(0) },
                Backfill { after: Seqno(0) },
                ReleaseCursor,
            ],
            state: StreamState::Dead,
        },
        Case {
            name: "an unfiltered aware stream sees a trailing prepare as an advance",
            start: 0,
            end: FOREVER,
            mode: KeyMode::Aware,
            sync_writes: false,
            filter: None,
            events: &[
                Start,
                Cursor(true),
                Memory(1, 2, &[C::Doc(1, 0), C::Prepare(2, 0)]),
                Memory(1, 3, &[C::Prepare(3, 0)]),
            ],
            out: vec![
                Out::Marker(0, 2, MEM_CKPT),
                Out::Item(1),
                Out::Advanced(2),
                Out::Marker(2, 3, MEM),
                Out::Advanced(3),
            ],
            actions: vec![RegisterCursor { after: Seqno(0) }],
            state: StreamState::InMemory,
        },
        Case {
            name: "sync writes: prepares are sent, nothing advances",
            start: 0,
            end: FOREVER,
            mode: KeyMode::Aware,
            sync_writes: true,
            filter: None,
            events: &[
                Start,
                Cursor(true),
                Memory(1, 2, &[C::Doc(1, 0), C::Prepare(2, 0)]),
            ],
            out: vec![Out::Marker(0, 2, MEM_CKPT), Out::Item(1), Out::Item(2)],
            actions: vec![RegisterCursor { after: Seqno(0) }],
            state: StreamState::InMemory,
        },
        Case {
            name: "a consumer without collections never gets SEQNO_ADVANCED",
            start: 0,
            end: FOREVER,
            mode: KeyMode::Legacy,
            sync_writes: false,
            filter: None,
            events: &[
                Start,
                Cursor(true),
                Memory(1, 4, &[C::Doc(1, 0), C::Doc(2, 9), C::Prepare(3, 0)]),
            ],
            out: vec![Out::Marker(0, 1, MEM_CKPT), Out::Item(1)],
            actions: vec![RegisterCursor { after: Seqno(0) }],
            state: StreamState::InMemory,
        },
        Case {
            name: "dropping the filter's last collection ends the stream FilterEmpty",
            start: 0,
            end: FOREVER,
            mode: KeyMode::Aware,
            sync_writes: false,
            filter: Some(&[8]),
            events: &[
                Start,
                Cursor(true),
                Memory(1, 3, &[C::Doc(1, 8), C::Drop(2, 8), C::Doc(3, 9)]),
            ],
            out: vec![
                Out::Marker(0, 3, MEM_CKPT),
                Out::Item(1),
                Out::Event(2),
                Out::Advanced(3),
                Out::End(StreamEndReason::FilterEmpty),
            ],
            actions: vec![RegisterCursor { after: Seqno(0) }, ReleaseCursor],
            state: StreamState::Dead,
        },
        Case {
            name: "a drop of one of two collections keeps the stream",
            start: 0,
            end: FOREVER,
            mode: KeyMode::Aware,
            sync_writes: false,
            filter: Some(&[8, 9]),
            events: &[
                Start,
                Cursor(true),
                Memory(1, 2, &[C::Doc(1, 9), C::Drop(2, 8)]),
            ],
            out: vec![Out::Marker(0, 2, MEM_CKPT), Out::Item(1), Out::Event(2)],
            actions: vec![RegisterCursor { after: Seqno(0) }],
            state: StreamState::InMemory,
        },
        Case {
            name: "a drop at the end seqno ends the stream Ok",
            start: 0,
            end: 2,
            mode: KeyMode::Aware,
            sync_writes: false,
            filter: Some(&[8]),
            events: &[
                Start,
                Cursor(true),
                Memory(1, 2, &[C::Doc(1, 8), C::Drop(2, 8)]),
            ],
            out: vec![
                Out::Marker(0, 2, MEM_CKPT),
                Out::Item(1),
                Out::Event(2),
                Out::End(StreamEndReason::Ok),
            ],
            actions: vec![RegisterCursor { after: Seqno(0) }, ReleaseCursor],
            state: StreamState::Dead,
        },
        Case {
            name: "a drop found by a backfill ends the stream there",
            start: 0,
            end: FOREVER,
            mode: KeyMode::Aware,
            sync_writes: false,
            filter: Some(&[8]),
            events: &[
                Start,
                Cursor(false),
                BackfillBegin(9),
                BackfillItems(&[C::Doc(3, 8), C::Drop(6, 8), C::Doc(9, 9)]),
            ],
            out: vec![
                Out::Marker(0, 9, DISK),
                Out::Item(3),
                Out::Event(6),
                Out::End(StreamEndReason::FilterEmpty),
            ],
            actions: vec![
                RegisterCursor { after: Seqno(0) },
                Backfill { after: Seqno(0) },
                ReleaseCursor,
            ],
            state: StreamState::Dead,
        },
    ];
    for c in &cases {
        run(c);
    }
}

#[test]
fn a_named_stream_counts_its_stream_id_frame_in_its_ready_bytes() {
    let opts = StreamOptions {
        collections: KeyMode::Aware,
        ..Default::default()
    };
    let plain = {
        let mut s = ActiveStream::new(VbId(2), 1, Seqno(0), Seqno(FOREVER), opts);
        s.start();
        s.on_cursor(true);
        s.on_memory_chunk(CheckpointId(1), Seqno(1), &[change(C::Doc(1, 8))]);
        s.ready_bytes()
    };
    let mut s = ActiveStream::new(VbId(2), 1, Seqno(0), Seqno(FOREVER), opts).with_stream_id(7);
    assert_eq!(s.key().sid, Some(7));
    s.start();
    s.on_cursor(true);
    s.on_memory_chunk(CheckpointId(1), Seqno(1), &[change(C::Doc(1, 8))]);
    assert_eq!(
        s.ready_bytes(),
        plain + 2 * 3,
        "a marker and an item, 3 bytes each more"
    );
    assert_eq!(drain(&mut s, "named").len(), 2);
    assert_eq!(s.ready_bytes(), 0);
}
