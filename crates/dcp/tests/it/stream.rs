//! The active stream state machine, driven by scripted events: what it asks the connection
//! to do and the messages it queues, step by step. Each case is a table row.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use bytes::Bytes;
use sluice_dcp::change::{Change, ChangeKind};
use sluice_dcp::stream::{ActiveStream, BackfillRange, StreamAction, StreamOptions, StreamState};
use sluice_proto::dcp::{DcpMessage, SnapshotFlags, StreamEndReason};
use sluice_types::{CheckpointId, ItemMeta, Seqno, VbId};

fn ch(seqno: u64) -> Change {
    Change {
        key: Bytes::from(format!("k{seqno}")),
        value: Bytes::from_static(b"v"),
        meta: ItemMeta {
            seqno: Seqno(seqno),
            ..Default::default()
        },
        kind: ChangeKind::Mutation,
    }
}

/// One event fed to the stream.
#[derive(Clone, Copy)]
enum Ev {
    Start,
    Cursor(bool),
    BackfillBegin(u64),
    BackfillItems(&'static [u64]),
    BackfillEnd,
    /// (checkpoint id, snapshot end, seqnos)
    Memory(u64, u64, &'static [u64]),
    Dropped,
    Close,
    Drained,
    VbAck,
}

/// What the queue should hold, in order, in a compact form.
#[derive(Debug, PartialEq, Eq)]
enum Out {
    Marker(u64, u64, u32),
    Item(u64),
    End(StreamEndReason),
    VbState(u8),
}

struct Case {
    name: &'static str,
    start: u64,
    end: u64,
    opts: StreamOptions,
    takeover: bool,
    events: &'static [Ev],
    /// Actions asked for, in order, over the whole script.
    actions: Vec<StreamAction>,
    out: Vec<Out>,
    state: StreamState,
}

/// Sends everything queued (pops the ready queue), checking the byte accounting.
fn send_all(s: &mut ActiveStream, name: &str, out: &mut Vec<Out>) {
    while let Some(m) = {
        let before = s.ready_bytes();
        let m = s.pop_ready();
        if let Some(m) = &m {
            assert_eq!(
                before - s.ready_bytes(),
                m.wire_len(),
                "{name}: ready bytes"
            );
        }
        m
    } {
        out.push(match m {
            DcpMessage::SnapshotMarker(m) => Out::Marker(m.start.0, m.end.0, m.flags.0),
            DcpMessage::Mutation(d) | DcpMessage::Deletion(d) | DcpMessage::Expiration(d) => {
                Out::Item(d.seqno.0)
            }
            DcpMessage::StreamEnd(r) => Out::End(r),
            DcpMessage::SetVbucketState(st) => Out::VbState(st as u8),
            other => panic!("{name}: unexpected {other:?}"),
        });
    }
}

fn run(c: &Case) {
    let mut s = ActiveStream::new(VbId(0), 1, Seqno(c.start), Seqno(c.end), c.opts);
    if c.takeover {
        s = s.with_takeover();
    }
    let mut actions = Vec::new();
    let mut out = Vec::new();
    for ev in c.events {
        match *ev {
            Ev::Start => actions.extend(s.start()),
            Ev::Cursor(ok) => actions.extend(s.on_cursor(ok)),
            // Every change in these tables is visible.
            Ev::BackfillBegin(end) => s.on_backfill_begin(BackfillRange {
                end: Seqno(end),
                max_visible: Seqno(end),
                high_completed: Seqno::ZERO,
            }),
            Ev::BackfillItems(seqnos) => {
                let items: Vec<Change> = seqnos.iter().map(|&n| ch(n)).collect();
                s.on_backfill_items(&items);
            }
            Ev::BackfillEnd => actions.extend(s.on_backfill_end()),
            Ev::Memory(ckpt, end, seqnos) => {
                let items: Vec<Change> = seqnos.iter().map(|&n| ch(n)).collect();
                actions.extend(s.on_memory_chunk(CheckpointId(ckpt), Seqno(end), &items));
            }
            Ev::Dropped => actions.extend(s.on_cursor_dropped()),
            Ev::Close => actions.extend(s.close()),
            // The connection only reports "drained" once everything queued went out.
            Ev::Drained => {
                send_all(&mut s, c.name, &mut out);
                actions.extend(s.on_drained());
            }
            Ev::VbAck => actions.extend(s.on_vb_state_ack()),
        }
    }
    send_all(&mut s, c.name, &mut out);
    assert_eq!(s.ready_bytes(), 0);
    assert_eq!(actions, c.actions, "{}: actions", c.name);
    assert_eq!(out, c.out, "{}: messages", c.name);
    assert_eq!(s.state(), c.state, "{}: final state", c.name);
    // The invariants every consumer relies on, whatever the script.
    let mut last = c.start;
    let mut snap = None;
    for o in &out {
        match o {
            Out::Marker(a, b, _) => {
                assert!(
                    *a >= last && a <= b,
                    "{}: marker {a}..{b} after {last}",
                    c.name
                );
                snap = Some((*a, *b));
            }
            Out::Item(n) => {
                let (a, b) = snap.expect("marker first");
                assert!(
                    *n > last && *n > a && *n <= b,
                    "{}: {n} in {a}..{b}",
                    c.name
                );
                last = *n;
            }
            Out::End(_) | Out::VbState(_) => {}
        }
    }
}

const MEM: u32 = SnapshotFlags::MEMORY.0;
const MEM_CKPT: u32 = SnapshotFlags::MEMORY.0 | SnapshotFlags::CHECKPOINT.0;
const DISK: u32 = SnapshotFlags::DISK.0;
const FOREVER: u64 = u64::MAX;

fn opts(cursor_dropping: bool, send_end_on_close: bool) -> StreamOptions {
    StreamOptions {
        cursor_dropping,
        send_end_on_close,
        ..Default::default()
    }
}

#[test]
fn stream_scripts() {
    use Ev::*;
    use StreamAction::*;
    let cases = vec![
        Case {
            name: "memory only: one marker per checkpoint, checkpoint flag on a new one",
            start: 0,
            end: FOREVER,
            takeover: false,
            opts: opts(false, false),
            events: &[
                Start,
                Cursor(true),
                Memory(1, 3, &[1, 2, 3]),
                Memory(2, 5, &[4, 5]),
            ],
            actions: vec![RegisterCursor { after: Seqno(0) }],
            out: vec![
                Out::Marker(0, 3, MEM_CKPT),
                Out::Item(1),
                Out::Item(2),
                Out::Item(3),
                Out::Marker(3, 5, MEM_CKPT),
                Out::Item(4),
                Out::Item(5),
            ],
            state: StreamState::InMemory,
        },
        Case {
            name: "a checkpoint read in two parts keeps one marker",
            start: 0,
            end: FOREVER,
            takeover: false,
            opts: opts(false, false),
            events: &[
                Start,
                Cursor(true),
                Memory(1, 4, &[1, 2]),
                Memory(1, 4, &[3, 4]),
            ],
            actions: vec![RegisterCursor { after: Seqno(0) }],
            out: vec![
                Out::Marker(0, 4, MEM_CKPT),
                Out::Item(1),
                Out::Item(2),
                Out::Item(3),
                Out::Item(4),
            ],
            state: StreamState::InMemory,
        },
        Case {
            name: "the open checkpoint growing gets a memory marker per read",
            start: 0,
            end: FOREVER,
            takeover: false,
            opts: opts(false, false),
            events: &[Start, Cursor(true), Memory(1, 1, &[1]), Memory(1, 2, &[2])],
            actions: vec![RegisterCursor { after: Seqno(0) }],
            out: vec![
                Out::Marker(0, 1, MEM_CKPT),
                Out::Item(1),
                Out::Marker(1, 2, MEM),
                Out::Item(2),
            ],
            state: StreamState::InMemory,
        },
        Case {
            name: "backfill, then memory: no gap, no duplicate (memory repeats 7 and 8)",
            start: 2,
            end: FOREVER,
            takeover: false,
            opts: opts(false, false),
            events: &[
                Start,
                Cursor(false),
                BackfillBegin(8),
                BackfillItems(&[3, 5]),
                BackfillItems(&[7, 8]),
                BackfillEnd,
                Cursor(true),
                Memory(4, 10, &[7, 8, 9, 10]),
            ],
            actions: vec![
                RegisterCursor { after: Seqno(2) },
                Backfill { after: Seqno(2) },
                RegisterCursor { after: Seqno(8) },
            ],
            out: vec![
                Out::Marker(2, 8, DISK),
                Out::Item(3),
                Out::Item(5),
                Out::Item(7),
                Out::Item(8),
                Out::Marker(8, 10, MEM_CKPT),
                Out::Item(9),
                Out::Item(10),
            ],
            state: StreamState::InMemory,
        },
        Case {
            name: "deduplicated tail: the backfill's end counts even without items there",
            start: 0,
            end: FOREVER,
            takeover: false,
            opts: opts(false, false),
            events: &[
                Start,
                Cursor(false),
                BackfillBegin(9),
                BackfillItems(&[4]),
                BackfillEnd,
                Cursor(false),
                BackfillBegin(12),
                BackfillItems(&[11]),
                BackfillEnd,
            ],
            actions: vec![
                RegisterCursor { after: Seqno(0) },
                Backfill { after: Seqno(0) },
                RegisterCursor { after: Seqno(9) },
                Backfill { after: Seqno(9) },
                RegisterCursor { after: Seqno(12) },
            ],
            out: vec![
                Out::Marker(0, 9, DISK),
                Out::Item(4),
                Out::Marker(9, 12, DISK),
                Out::Item(11),
            ],
            state: StreamState::Backfilling,
        },
        Case {
            name: "end seqno inside a backfill: the whole snapshot, then ok",
            start: 0,
            end: 5,
            takeover: false,
            opts: opts(false, false),
            events: &[
                Start,
                Cursor(false),
                BackfillBegin(8),
                BackfillItems(&[3, 6, 8]),
                BackfillEnd,
            ],
            actions: vec![
                RegisterCursor { after: Seqno(0) },
                Backfill { after: Seqno(0) },
                ReleaseCursor,
            ],
            out: vec![
                Out::Marker(0, 8, DISK),
                Out::Item(3),
                Out::Item(6),
                Out::Item(8),
                Out::End(StreamEndReason::Ok),
            ],
            state: StreamState::Dead,
        },
        Case {
            name: "nothing to send: start == end ends at once",
            start: 7,
            end: 7,
            takeover: false,
            opts: opts(false, false),
            events: &[Start],
            actions: vec![ReleaseCursor],
            out: vec![Out::End(StreamEndReason::Ok)],
            state: StreamState::Dead,
        },
        Case {
            name: "cursor dropped with the opt-in: back to disk from the last seqno",
            start: 0,
            end: FOREVER,
            takeover: false,
            opts: opts(true, false),
            events: &[
                Start,
                Cursor(true),
                Memory(1, 6, &[1, 2, 3]),
                Dropped,
                BackfillBegin(9),
                BackfillItems(&[5, 9]),
                BackfillEnd,
                Cursor(true),
                Memory(3, 11, &[10, 11]),
            ],
            actions: vec![
                RegisterCursor { after: Seqno(0) },
                Backfill { after: Seqno(3) },
                RegisterCursor { after: Seqno(9) },
            ],
            out: vec![
                Out::Marker(0, 6, MEM_CKPT),
                Out::Item(1),
                Out::Item(2),
                Out::Item(3),
                Out::Marker(3, 9, DISK),
                Out::Item(5),
                Out::Item(9),
                Out::Marker(9, 11, MEM_CKPT),
                Out::Item(10),
                Out::Item(11),
            ],
            state: StreamState::InMemory,
        },
        Case {
            name: "cursor dropped without the opt-in: ends as too slow",
            start: 0,
            end: FOREVER,
            takeover: false,
            opts: opts(false, false),
            events: &[Start, Cursor(true), Memory(1, 2, &[1, 2]), Dropped],
            actions: vec![RegisterCursor { after: Seqno(0) }, ReleaseCursor],
            out: vec![
                Out::Marker(0, 2, MEM_CKPT),
                Out::Item(1),
                Out::Item(2),
                Out::End(StreamEndReason::TooSlow),
            ],
            state: StreamState::Dead,
        },
        Case {
            name: "close with stream-end on close: queued items dropped, end(closed)",
            start: 0,
            end: FOREVER,
            takeover: false,
            opts: opts(false, true),
            events: &[Start, Cursor(true), Memory(1, 2, &[1, 2]), Close],
            actions: vec![RegisterCursor { after: Seqno(0) }, ReleaseCursor],
            out: vec![Out::End(StreamEndReason::Closed)],
            state: StreamState::Dead,
        },
        Case {
            name: "close without it: silent",
            start: 0,
            end: FOREVER,
            takeover: false,
            opts: opts(false, false),
            events: &[Start, Cursor(true), Close],
            actions: vec![RegisterCursor { after: Seqno(0) }, ReleaseCursor],
            out: vec![],
            state: StreamState::Dead,
        },
        Case {
            name: "events after death are ignored (a late backfill result)",
            start: 0,
            end: FOREVER,
            takeover: false,
            opts: opts(false, false),
            events: &[
                Start,
                Cursor(false),
                Close,
                BackfillBegin(5),
                BackfillItems(&[3]),
                BackfillEnd,
            ],
            actions: vec![
                RegisterCursor { after: Seqno(0) },
                Backfill { after: Seqno(0) },
                ReleaseCursor,
            ],
            out: vec![],
            state: StreamState::Dead,
        },
        Case {
            name: "takeover: catch up, pending, (vbucket dead) the rest, active, end ok",
            start: 0,
            end: 0,
            takeover: true,
            opts: opts(false, false),
            events: &[
                Start,
                Cursor(true),
                Memory(1, 2, &[1, 2]),
                Drained,
                // The connection reads nothing while waiting for the answer.
                VbAck,
                Memory(1, 3, &[3]),
                Drained,
                VbAck,
            ],
            actions: vec![
                RegisterCursor { after: Seqno(0) },
                SetVbucketDead,
                ReleaseCursor,
            ],
            out: vec![
                Out::Marker(0, 2, MEM_CKPT),
                Out::Item(1),
                Out::Item(2),
                Out::VbState(3),
                Out::Marker(2, 3, MEM),
                Out::Item(3),
                Out::VbState(1),
                Out::End(StreamEndReason::Ok),
            ],
            state: StreamState::Dead,
        },
    ];
    for c in &cases {
        run(c);
    }
}
