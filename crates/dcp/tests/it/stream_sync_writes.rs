//! What a stream sends of SyncWrites: prepares, commits and aborts as such (with v2.0
//! markers) to a consumer that enabled sync writes; to any other, only what became visible,
//! with markers that end on visible seqnos and SEQNO_ADVANCED closing a disk snapshot whose
//! last items it does not see. Each case is a table row over the same changes.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use bytes::Bytes;
use sluice_dcp::change::{Change, ChangeKind};
use sluice_dcp::stream::{ActiveStream, BackfillRange, StreamAction, StreamOptions};
use sluice_proto::dcp::DcpMessage;
use sluice_types::{CheckpointId, DurabilityLevel, ItemMeta, Seqno, VbId};

const MAJORITY: DurabilityLevel = DurabilityLevel::Majority;

fn change(seqno: u64, kind: ChangeKind, deleted: bool) -> Change {
    Change {
        key: Bytes::from_static(b"k"),
        value: Bytes::from_static(b"v"),
        meta: ItemMeta {
            seqno: Seqno(seqno),
            deleted,
            ..Default::default()
        },
        kind,
    }
}

/// 1 mutation, 2 prepare, 3 commit of 2, 4 prepare (a durable delete), 5 abort of 4.
fn history() -> Vec<Change> {
    vec![
        change(1, ChangeKind::Mutation, false),
        change(2, ChangeKind::Prepare(MAJORITY), false),
        change(3, ChangeKind::Commit { prepared: Seqno(2) }, false),
        change(4, ChangeKind::Prepare(MAJORITY), true),
        change(5, ChangeKind::Abort { prepared: Seqno(4) }, false),
    ]
}

/// Everything queued, compactly.
fn sent(s: &mut ActiveStream) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(m) = s.pop_ready() {
        out.push(match m {
            DcpMessage::SnapshotMarker(m) => match m.sync {
                None => format!("marker {}..{}", m.start.0, m.end.0),
                Some(x) => {
                    let completed = match x.high_completed_seqno.0 {
                        0 => String::new(),
                        hcs => format!(" completed {hcs}"),
                    };
                    format!(
                        "marker {}..{} visible {}{completed}",
                        m.start.0, m.end.0, x.max_visible_seqno.0
                    )
                }
            },
            DcpMessage::Mutation(d) => format!("mutation {}", d.seqno.0),
            DcpMessage::Deletion(d) => format!("deletion {}", d.seqno.0),
            DcpMessage::Prepare(p) => format!(
                "prepare {}{}",
                p.doc.seqno.0,
                if p.deleted { " delete" } else { "" }
            ),
            DcpMessage::Commit(c) => format!("commit {} of {}", c.seqno.0, c.prepared_seqno.0),
            DcpMessage::Abort(c) => format!("abort {} of {}", c.seqno.0, c.prepared_seqno.0),
            DcpMessage::SeqnoAdvanced(s) => format!("advanced {}", s.0),
            DcpMessage::StreamEnd(r) => format!("end {}", r.name()),
            other => format!("{other:?}"),
        });
    }
    out
}

/// A backfill's range: its end, max visible and high completed seqnos.
fn range(end: u64, max_visible: u64, high_completed: u64) -> BackfillRange {
    BackfillRange {
        end: Seqno(end),
        max_visible: Seqno(max_visible),
        high_completed: Seqno(high_completed),
    }
}

fn stream(sync_writes: bool, end: u64) -> ActiveStream {
    stream_from(sync_writes, 0, end)
}

/// A started stream of `(start, end]`.
fn stream_from(sync_writes: bool, start: u64, end: u64) -> ActiveStream {
    let opts = StreamOptions {
        sync_writes,
        ..Default::default()
    };
    let mut s = ActiveStream::new(VbId(0), 1, Seqno(start), Seqno(end), opts);
    assert_eq!(
        s.start(),
        vec![StreamAction::RegisterCursor {
            after: Seqno(start)
        }]
    );
    s
}

#[test]
fn memory_snapshots_by_consumer() {
    // (sync writes, end seqno, what is sent)
    let rows: Vec<(bool, u64, Vec<&str>)> = vec![
        (
            true,
            u64::MAX,
            vec![
                "marker 0..5 visible 3",
                "mutation 1",
                "prepare 2",
                "commit 3 of 2",
                "prepare 4 delete",
                "abort 5 of 4",
            ],
        ),
        // The marker ends at the commit: the prepare and abort after it are not shown.
        (
            false,
            u64::MAX,
            vec!["marker 0..3", "mutation 1", "mutation 3"],
        ),
        // A stream asked to end on an invisible seqno still ends.
        (
            false,
            5,
            vec!["marker 0..3", "mutation 1", "mutation 3", "end ok"],
        ),
    ];
    for (sync, end, want) in rows {
        let mut s = stream(sync, end);
        s.on_cursor(true);
        s.on_memory_chunk(CheckpointId(1), Seqno(5), &history());
        assert_eq!(sent(&mut s), want, "sync writes {sync}, end {end}");
        assert_eq!(
            s.last_read(),
            Seqno(5),
            "the position passes invisible seqnos"
        );
    }
}

#[test]
fn a_chunk_with_nothing_visible_sends_nothing_to_a_plain_consumer() {
    let mut s = stream(false, u64::MAX);
    s.on_cursor(true);
    s.on_memory_chunk(CheckpointId(1), Seqno(1), &history()[..1]);
    let invisible = vec![change(2, ChangeKind::Prepare(MAJORITY), false)];
    s.on_memory_chunk(CheckpointId(1), Seqno(2), &invisible);
    assert_eq!(sent(&mut s), vec!["marker 0..1", "mutation 1"]);
    assert_eq!(s.last_read(), Seqno(2));
    // The commit that follows opens a snapshot starting past the prepare.
    let commit = vec![change(3, ChangeKind::Commit { prepared: Seqno(2) }, false)];
    s.on_memory_chunk(CheckpointId(1), Seqno(3), &commit);
    assert_eq!(sent(&mut s), vec!["marker 2..3", "mutation 3"]);
}

#[test]
fn a_durable_delete_commits_as_a_deletion() {
    let mut s = stream(false, u64::MAX);
    s.on_cursor(true);
    let items = vec![
        change(1, ChangeKind::Prepare(MAJORITY), true),
        change(2, ChangeKind::Commit { prepared: Seqno(1) }, true),
    ];
    s.on_memory_chunk(CheckpointId(1), Seqno(2), &items);
    assert_eq!(sent(&mut s), vec!["marker 0..2", "deletion 2"]);
}

#[test]
fn a_disk_snapshot_ends_at_its_max_visible_seqno_for_a_non_sync_consumer() {
    // (sync writes, what is sent): seqnos 4 and 5 are a prepare and its abort.
    let rows: Vec<(bool, Vec<&str>)> = vec![
        (false, vec!["marker 0..3", "mutation 1", "mutation 3"]),
        (
            true,
            vec![
                "marker 0..5 visible 3 completed 4",
                "mutation 1",
                "prepare 2",
                "commit 3 of 2",
                "prepare 4 delete",
                "abort 5 of 4",
            ],
        ),
    ];
    for (sync, want) in rows {
        let mut s = stream(sync, u64::MAX);
        assert_eq!(
            s.on_cursor(false),
            vec![StreamAction::Backfill { after: Seqno(0) }]
        );
        s.on_backfill_begin(range(5, 3, 4));
        s.on_backfill_items(&history());
        assert_eq!(
            s.on_backfill_end(),
            vec![StreamAction::RegisterCursor { after: Seqno(5) }]
        );
        assert_eq!(sent(&mut s), want, "sync writes {sync}");
    }
    // Ending on a visible seqno: the same snapshot for both.
    let mut s = stream(false, u64::MAX);
    s.on_cursor(false);
    s.on_backfill_begin(range(3, 3, 2));
    s.on_backfill_items(&history()[..3]);
    s.on_backfill_end();
    assert_eq!(
        sent(&mut s),
        vec!["marker 0..3", "mutation 1", "mutation 3"]
    );
}

#[test]
fn a_disk_snapshot_with_nothing_visible_sends_nothing_to_a_non_sync_consumer() {
    // After seqno 3, the backfill holds only the prepare at 4 and its abort at 5.
    let mut s = stream_from(false, 3, 5);
    assert_eq!(
        s.on_cursor(false),
        vec![StreamAction::Backfill { after: Seqno(3) }]
    );
    s.on_backfill_begin(range(5, 3, 4));
    s.on_backfill_items(&history()[3..]);
    // The end seqno (5, an abort) is reached: the stream ends with no snapshot sent.
    assert_eq!(s.on_backfill_end(), vec![StreamAction::ReleaseCursor]);
    assert_eq!(sent(&mut s), vec!["end ok"]);
}
