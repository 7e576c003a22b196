//! The DCP consumer against a real in-process Sluice node over 127.0.0.1: what a stream
//! delivers — full streams, resume from a positions file, "from now", rollbacks, end seqnos
//! and closing. Connection-level behaviour is in `dcp_connection.rs`.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::dcp_node::*;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

use sluice_client::dcp::{DcpError, DcpEvent, DcpPosition, DcpStream, StartFrom, StreamPositions};
use sluice_client::StoreOptions;
use sluice_types::{Seqno, VbId, VbUuid};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_changes_stream_from_the_beginning_in_order() {
    let node = start_node().await;
    let mut kv = node.kv().await;
    let mut model = Model::default();
    for i in 0..4000 {
        let value = if i % 2 == 0 {
            json_doc(i)
        } else {
            binary_doc(i)
        };
        model.set(&mut kv, &format!("doc-{i:05}"), &value).await;
    }
    for i in (0..4000).step_by(4).take(950) {
        model.delete(&mut kv, &format!("doc-{i:05}")).await;
    }
    for i in 0..50 {
        model
            .set_with(&mut kv, &format!("ttl-{i:02}"), &json_doc(i), 1)
            .await;
    }
    // Expiry has one-second resolution: past 2 s every TTL document is expired, and a read
    // of each turns it into an expiration.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    for i in 0..50 {
        let key = format!("ttl-{i:02}");
        let err = kv.get(key.as_bytes()).await.unwrap_err();
        assert!(err.is_not_found(), "{key}: {err}");
        model.docs.insert(key.clone().into_bytes(), None);
        model.expired.insert(key.into_bytes());
    }
    let highs = high_seqnos(&node).await;
    assert_eq!(highs.len(), VBUCKETS as usize);
    assert!(
        highs.values().map(|s| s.0).sum::<u64>() >= 5050,
        "every write took a seqno"
    );

    let mut stream = DcpStream::connect(&node.addr, dcp_options(), StartFrom::Beginning)
        .await
        .unwrap();
    let mut replica = Replica::default();
    stream_until(&mut stream, &mut replica, &highs).await;
    assert_quiet(&mut stream, &mut replica, Duration::from_millis(300)).await;

    replica.assert_matches(&model);
    assert!(replica.rollbacks.is_empty(), "{:?}", replica.rollbacks);
    assert_eq!(replica.stream_ends, 0);
    assert_eq!(replica.expirations.len(), 50);
    // Mutations and deletions of the same key may be deduplicated, never lost: at least the
    // final version of every key arrives.
    assert!(replica.items >= 4050, "{} items", replica.items);
    assert!(replica.json_values >= 1000, "JSON datatype is kept");
    for p in stream.positions().iter() {
        assert_ne!(
            p.vb_uuid,
            VbUuid(0),
            "{}: uuid learnt from the stream request",
            p.vb
        );
        assert_eq!(p.seqno, highs[&p.vb]);
        assert!(p.snap_start <= p.seqno && p.seqno <= p.snap_end);
    }
    node.running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_from_a_saved_file_misses_nothing_and_repeats_nothing() {
    let node = start_node().await;
    let mut kv = node.kv().await;
    let mut model = Model::default();
    for i in 0..3000 {
        model
            .set(&mut kv, &format!("doc-{i:05}"), &json_doc(i))
            .await;
    }
    let mut stream = DcpStream::connect(&node.addr, dcp_options(), StartFrom::Beginning)
        .await
        .unwrap();
    let mut first = Replica::default();
    while first.items < 1500 {
        let ev = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("events keep coming")
            .unwrap();
        first.apply(&ev);
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("positions.json");
    stream.positions().save(&file).unwrap();
    let saved = stream.positions().clone();
    drop(stream);

    // More changes while no one is streaming: new keys, updates and deletes of old ones.
    for i in 3000..3500 {
        model
            .set(&mut kv, &format!("doc-{i:05}"), &json_doc(i))
            .await;
    }
    for i in (0..3000).step_by(10) {
        model
            .set(&mut kv, &format!("doc-{i:05}"), &binary_doc(i))
            .await;
    }
    for i in (5..3000).step_by(15) {
        model.delete(&mut kv, &format!("doc-{i:05}")).await;
    }
    let highs = high_seqnos(&node).await;

    let loaded = StreamPositions::load(&file).unwrap();
    assert_eq!(loaded, saved);
    let mut stream = DcpStream::resume(&node.addr, dcp_options(), loaded)
        .await
        .unwrap();
    // The second session must start strictly after the saved seqnos (no duplicates)...
    let mut second = Replica::default().resuming_from(&saved);
    second.docs = first.docs.clone();
    stream_until(&mut stream, &mut second, &highs).await;
    assert_quiet(&mut stream, &mut second, Duration::from_millis(300)).await;
    // ...and together the two sessions rebuild the bucket exactly (nothing missing).
    second.assert_matches(&model);
    assert!(first.rollbacks.is_empty() && second.rollbacks.is_empty());
    node.running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_now_gets_only_later_writes_and_no_rollback() {
    let node = start_node().await;
    let mut kv = node.kv().await;
    let mut model = Model::default();
    for i in 0..1000 {
        model
            .set(&mut kv, &format!("before-{i:04}"), &json_doc(i))
            .await;
    }
    let mut stream = DcpStream::connect(&node.addr, dcp_options(), StartFrom::Now)
        .await
        .unwrap();
    let highs = high_seqnos(&node).await;
    for p in stream.positions().iter() {
        assert_ne!(p.vb_uuid, VbUuid(0));
        assert_eq!(p.seqno, highs[&p.vb], "{}: starts at the high seqno", p.vb);
    }
    for i in 0..200 {
        model
            .set(&mut kv, &format!("after-{i:04}"), &json_doc(i))
            .await;
    }
    let mut replica = Replica::default().resuming_from(stream.positions());
    while replica.items < 200 {
        let ev = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("the later writes arrive")
            .unwrap();
        replica.apply(&ev);
    }
    assert_quiet(&mut stream, &mut replica, Duration::from_millis(300)).await;
    assert!(replica.rollbacks.is_empty(), "{:?}", replica.rollbacks);
    assert_eq!(replica.items, 200);
    for k in replica.docs.keys() {
        assert!(k.starts_with(b"after-"), "{}", String::from_utf8_lossy(k));
    }
    node.running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_vb_uuid_rolls_back_to_zero_and_recovers() {
    let node = start_node().await;
    let mut kv = node.kv().await;
    let mut model = Model::default();
    for i in 0..1000 {
        model
            .set(&mut kv, &format!("doc-{i:04}"), &json_doc(i))
            .await;
    }
    let highs = high_seqnos(&node).await;
    let mut stream = DcpStream::connect(&node.addr, dcp_options(), StartFrom::Beginning)
        .await
        .unwrap();
    let mut replica = Replica::default();
    stream_until(&mut stream, &mut replica, &highs).await;
    let mut positions = stream.positions().clone();
    drop(stream);

    let vb = VbId(3);
    let real_uuid = positions.get(vb).unwrap().vb_uuid;
    let mut wrong = *positions.get(vb).unwrap();
    wrong.vb_uuid = VbUuid(0x0bad_0bad_0bad_0bad);
    positions.insert(wrong);

    let mut stream = DcpStream::resume(&node.addr, dcp_options(), positions.clone())
        .await
        .unwrap();
    let first = next_change(&mut stream).await;
    assert_eq!(first, DcpEvent::Rollback { vb, to: Seqno(0) });
    // The application truncates vb 3 and receives it again in full.
    let vb3_keys: Vec<Vec<u8>> = model
        .docs
        .keys()
        .filter(|k| kv.vbucket_of(k) == vb)
        .cloned()
        .collect();
    for k in &vb3_keys {
        replica.docs.remove(k);
    }
    let mut again = Replica::default().resuming_from(&positions);
    again.last_seqno.insert(vb, Seqno(0));
    again.docs = replica.docs.clone();
    stream_until(&mut stream, &mut again, &highs).await;
    assert_quiet(&mut stream, &mut again, Duration::from_millis(300)).await;
    again.assert_matches(&model);
    assert_eq!(again.items, vb3_keys.len(), "only vb 3 streams again");
    let p = stream.positions().get(vb).unwrap();
    assert_eq!((p.vb_uuid, p.seqno), (real_uuid, highs[&vb]));
    node.running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_to_a_nonzero_seqno_continues_on_the_producers_branch() {
    let node = start_node().await;
    let mut kv = node.kv().await;
    for i in 0..2000 {
        kv.set(
            format!("doc-{i:04}").as_bytes(),
            &json_doc(i),
            StoreOptions::default(),
        )
        .await
        .unwrap();
    }
    let vb = VbId(5);
    let high = high_seqnos(&node).await[&vb];
    assert!(high.0 > 10);
    let uuid = kv.get_failover_log(vb).await.unwrap()[0].uuid;
    // The client claims to be in the middle of a snapshot that ends beyond anything the
    // producer has: its history is only safe up to the snapshot's start, 4.
    let claimed = DcpPosition {
        vb,
        vb_uuid: uuid,
        seqno: Seqno(8),
        snap_start: Seqno(4),
        snap_end: Seqno(high.0 + 100),
    };
    let mut stream = DcpStream::resume(
        &node.addr,
        dcp_options(),
        StreamPositions::from_positions([claimed]),
    )
    .await
    .unwrap();
    let first = next_change(&mut stream).await;
    assert_eq!(first, DcpEvent::Rollback { vb, to: Seqno(4) });
    let p = *stream.positions().get(vb).unwrap();
    assert_eq!(
        (p.vb_uuid, p.seqno, p.snap_start, p.snap_end),
        (uuid, Seqno(4), Seqno(4), Seqno(4))
    );
    let mut replica = Replica::default();
    replica.last_seqno.insert(vb, Seqno(4));
    let mut seqnos = Vec::new();
    while stream.positions().get(vb).unwrap().seqno < high {
        let ev = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .unwrap()
            .unwrap();
        replica.apply(&ev);
        if let Some(i) = ev.item() {
            seqnos.push(i.seqno.0);
        }
    }
    // Every key was written once, so nothing is deduplicated: exactly 5..=high follow.
    assert_eq!(seqnos, (5..=high.0).collect::<Vec<_>>());
    assert_eq!(replica.rollbacks, vec![]);
    node.running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_with_an_end_seqno_ends_ok_and_then_reports_all_ended() {
    let node = start_node().await;
    let mut kv = node.kv().await;
    for i in 0..300 {
        kv.set(
            format!("doc-{i:04}").as_bytes(),
            b"{}",
            StoreOptions::default(),
        )
        .await
        .unwrap();
    }
    let mut opts = dcp_options();
    opts.end = Seqno(2);
    let mut stream = DcpStream::connect(&node.addr, opts, StartFrom::Beginning)
        .await
        .unwrap();
    let mut replica = Replica::default();
    let mut ended = HashSet::new();
    let mut items_per_vb: HashMap<VbId, u64> = HashMap::new();
    let err = loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .unwrap()
        {
            Ok(ev) => {
                replica.apply(&ev);
                if let DcpEvent::SnapshotMarker { vb, start, .. } = ev {
                    // "Stop after the snapshot holding the end seqno": a snapshot that
                    // starts past it is never sent.
                    assert!(
                        start < Seqno(2),
                        "{vb}: snapshot from {start} after the end"
                    );
                }
                if let Some(i) = ev.item() {
                    *items_per_vb.entry(i.vb).or_default() += 1;
                }
                if let DcpEvent::StreamEnd { vb, reason } = ev {
                    assert_eq!(reason.name(), "ok");
                    assert!(ended.insert(vb));
                }
            }
            Err(e) => break e,
        }
    };
    assert!(matches!(err, DcpError::AllStreamsEnded), "{err}");
    assert_eq!(ended.len(), VBUCKETS as usize);
    assert_eq!(stream.finished_vbuckets().len(), VBUCKETS as usize);
    // At least seqnos 1 and 2 of each vbucket; the rest of the snapshot holding 2 may
    // follow.
    assert_eq!(items_per_vb.len(), VBUCKETS as usize);
    assert!(items_per_vb.values().all(|n| *n >= 2), "{items_per_vb:?}");
    node.running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_stream_ends_it_with_reason_closed() {
    let node = start_node().await;
    let mut kv = node.kv().await;
    let mut stream = DcpStream::connect(&node.addr, dcp_options(), StartFrom::Now)
        .await
        .unwrap();
    let vb = VbId(9);
    assert!(
        !stream.close_stream(vb),
        "not accepted yet: nothing answered"
    );
    // Once a change of vb 9 arrives, its stream is accepted and can be closed.
    let key = (0..)
        .map(|i| format!("k{i}"))
        .find(|k| kv.vbucket_of(k.as_bytes()) == vb)
        .unwrap();
    kv.set(key.as_bytes(), b"1", StoreOptions::default())
        .await
        .unwrap();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .unwrap()
            .unwrap();
        if ev.item().is_some() {
            break;
        }
    }
    assert!(stream.close_stream(vb));
    let ev = next_change(&mut stream).await;
    assert_eq!(
        ev,
        DcpEvent::StreamEnd {
            vb,
            reason: sluice_client::dcp::StreamEndReason::Closed
        }
    );
    assert!(stream.finished_vbuckets().contains(&vb));
    assert_eq!(stream.live_streams(), VBUCKETS as usize - 1);
    assert!(!stream.close_stream(vb));
    // Later changes of vb 9 no longer arrive; other vbuckets still stream.
    kv.set(key.as_bytes(), b"2", StoreOptions::default())
        .await
        .unwrap();
    kv.set(b"other", b"3", StoreOptions::default())
        .await
        .unwrap();
    assert_ne!(kv.vbucket_of(b"other"), vb);
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .unwrap()
            .unwrap();
        assert_ne!(ev.vb(), vb, "{ev:?}");
        if let Some(i) = ev.item() {
            assert_eq!(&i.key[..], b"other");
            break;
        }
    }
    node.running.shutdown().await.unwrap();
}

/// The next event that is not a stream's acceptance (every requested vbucket's comes first,
/// in no set order across vbuckets), within 10 s.
async fn next_change(stream: &mut DcpStream) -> DcpEvent {
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .unwrap()
            .unwrap();
        if !matches!(ev, DcpEvent::StreamOpened { .. }) {
            return ev;
        }
    }
}
