//! Where a replicated write's time goes (`dcp/stages.rs`): each change written on node 0 is
//! timed once at every stage of its way to node 1's replica, on the node where that stage
//! happens, and an external DCP client's stream of the same changes is not timed.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::cluster::{keys_active_on, placed_pair, until, VBS};
use common::dcp_peer::{Consumer, Event};
use common::kv_peer::Kv;
use hdrhistogram::serialization::Deserializer;
use sluice_client::{Client, ConnectOptions, StoreOptions};
use sluice_cluster::NodeId;
use sluice_manager::Running;
use sluice_server::Stage;
use std::collections::HashMap;

fn count(n: &Running, stage: Stage) -> u64 {
    n.node.replication.stages.snapshot(stage).len()
}

async fn write(c: &mut Client, keys: &[String]) {
    for k in keys {
        c.set(k.as_bytes(), b"{\"v\":1}", StoreOptions::default())
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_write_is_timed_once_at_each_stage_where_it_happens() {
    let (_dirs, a, b) = placed_pair().await;
    let mut ca = Client::connect(
        a.kv_addr,
        ConnectOptions::sluice("Administrator", "password", "default"),
    )
    .await
    .unwrap();

    let first = keys_active_on(&a, NodeId(0), "stage-", 50);
    write(&mut ca, &first).await;
    until("node 1 applied the 50 changes", || {
        count(&b, Stage::Applied) >= 50
    })
    .await;
    until("node 0 sent the 50 changes", || {
        count(&a, Stage::Sent) >= 50
    })
    .await;
    // Node 0's producer read and sent them; node 1's consumer received and applied them.
    // Nothing went the other way. (A change written before the replication stream opened
    // is backfilled: sent, but not read from a cursor.)
    assert!(count(&a, Stage::CursorRead) <= 50);
    for (n, stage, expected) in [
        (&a, Stage::Sent, 50),
        (&b, Stage::Received, 50),
        (&b, Stage::Applied, 50),
        (&b, Stage::CursorRead, 0),
        (&b, Stage::Sent, 0),
        (&a, Stage::Received, 0),
        (&a, Stage::Applied, 0),
    ] {
        assert_eq!(count(n, stage), expected, "{}", stage.name());
    }
    // A change is read from its cursor before any of its bytes leave, so no cursor read is
    // slower than the slowest apply (the histograms keep two significant digits). `sent` is
    // timed when the write call returns, which may be after the replica applied it.
    let slowest_applied = b.node.replication.stages.snapshot(Stage::Applied).max();
    let slowest_read = a.node.replication.stages.snapshot(Stage::CursorRead).max();
    assert!(
        slowest_read <= slowest_applied + slowest_applied / 50 + 1,
        "cursor_read: {slowest_read} µs, applied {slowest_applied} µs"
    );

    // The same over STAT, with the histogram a reader can merge.
    let mut kv = Kv::open(b.kv_addr).await;
    let stats = kv.stats(b"replication").await;
    assert_eq!(stats["stage:applied:count"], "50");
    let hist = base64_decode(&stats["stage:applied:hist"]);
    let h: hdrhistogram::Histogram<u64> = Deserializer::new().deserialize(&mut &hist[..]).unwrap();
    assert_eq!(h.len(), 50);

    // An external client's stream reads the same changes from its own cursor: only the
    // replication's reads and sends are timed.
    let mut external = Consumer::open(a.kv_addr, "external", 0, &[]).await;
    external.stream_all(0..VBS, 0, &HashMap::new()).await;
    let items = |c: &Consumer| -> usize {
        c.events
            .values()
            .flatten()
            .filter(|e| matches!(e, Event::Item { .. }))
            .count()
    };
    while items(&external) < 50 {
        external.step().await;
    }
    let read_before = count(&a, Stage::CursorRead);
    let more = keys_active_on(&a, NodeId(0), "stage-more-", 10);
    write(&mut ca, &more).await;
    while items(&external) < 60 {
        external.step().await;
    }
    until("node 1 applied the 10 more", || {
        count(&b, Stage::Applied) >= 60
    })
    .await;
    until("node 0 sent the 10 more", || count(&a, Stage::Sent) >= 60).await;
    // Both streams were in memory by then: each read the 10 from its cursor.
    assert_eq!(
        count(&a, Stage::CursorRead),
        read_before + 10,
        "the external stream is not timed"
    );
    assert_eq!(
        count(&a, Stage::Sent),
        60,
        "the external stream is not timed"
    );

    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}
