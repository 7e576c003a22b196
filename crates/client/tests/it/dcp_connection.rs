//! The DCP consumer's connection against a real in-process Sluice node (and a scripted
//! one): flow control with a small window, noops, dead connections, connection errors and
//! reconnecting. What streams deliver is in `dcp.rs`.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::dcp_node::*;
use std::time::{Duration, Instant};

use sluice_client::dcp::{
    DcpError, DcpEvent, DcpOptions, DcpPosition, DcpStream, ReconnectingStream, StartFrom,
    StreamPositions,
};
use sluice_client::{Client, ConnectOptions, Status, StoreOptions};
use sluice_types::{Datatype, VbId};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_64_kib_window_streams_a_5_mib_backlog() {
    let node = start_node().await;
    let mut kv = node.kv().await;
    let mut model = Model::default();
    for i in 0..512 {
        let mut value = vec![b'x'; 4096];
        value[..8].copy_from_slice(format!("{i:08}").as_bytes());
        model.set(&mut kv, &format!("big-{i:04}"), &value).await;
    }
    // Documents larger than the whole window: the producer sends one whenever any window
    // is left, the client acks it once delivered, and nothing deadlocks.
    for i in 0..3 {
        model
            .set(
                &mut kv,
                &format!("huge-{i}"),
                &vec![b'0' + i as u8; 1 << 20],
            )
            .await;
    }
    let highs = high_seqnos(&node).await;
    let mut opts = dcp_options();
    opts.window_bytes = 64 * 1024;
    let mut stream = DcpStream::connect(&node.addr, opts, StartFrom::Beginning)
        .await
        .unwrap();
    // While the application reads nothing, the producer stops at the window (overshooting
    // by at most one message): that, not the backlog, is what the client buffers.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let unacked = dcp_stat(&mut kv, stream.name(), "unacked_bytes").await;
    let largest_message = (1 << 20) + 100;
    assert!(
        unacked > 0 && unacked <= 64 * 1024 + largest_message,
        "unacked {unacked}"
    );
    let mut replica = Replica::default();
    // Without acks the producer would stop after 64 KiB, and this would time out.
    stream_until(&mut stream, &mut replica, &highs).await;
    replica.assert_matches(&model);
    assert_eq!(replica.items, 515);

    // Once everything is delivered and the timer ack has gone out, the producer's count of
    // unacknowledged bytes is exactly 0: both sides count the same bytes.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_quiet(&mut stream, &mut replica, Duration::from_millis(200)).await;
    assert_eq!(
        dcp_stat(&mut kv, stream.name(), "max_buffer_bytes").await,
        64 * 1024
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let unacked = dcp_stat(&mut kv, stream.name(), "unacked_bytes").await;
        if unacked == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "unacked bytes never reached 0: {unacked}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    node.running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answered_noops_keep_an_idle_stream_alive() {
    let node = start_node().await;
    let mut opts = dcp_options();
    opts.noop_interval = Duration::from_secs(1);
    let mut stream = DcpStream::connect(&node.addr, opts, StartFrom::Now)
        .await
        .unwrap();
    // The producer sends a noop after 1 s idle and hangs up if it is not answered within
    // another second; the client would declare the connection dead after 2 s of silence.
    // Neither may happen in 3.5 s of idling, once every vbucket's acceptance has come.
    while let Ok(ev) = tokio::time::timeout(Duration::from_millis(500), stream.next()).await {
        assert!(matches!(ev, Ok(DcpEvent::StreamOpened { .. })), "{ev:?}");
    }
    let idle = tokio::time::timeout(Duration::from_millis(3500), stream.next()).await;
    assert!(idle.is_err(), "nothing to deliver, and no error: {idle:?}");
    let mut kv = node.kv().await;
    kv.set(b"wake-up", b"{}", StoreOptions::default())
        .await
        .unwrap();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .unwrap()
            .unwrap();
        if let DcpEvent::Mutation(m) = ev {
            assert_eq!(&m.key[..], b"wake-up");
            assert_eq!(m.datatype, Datatype(Datatype::JSON));
            break;
        }
    }
    node.running.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_silent_server_is_a_dead_connection() {
    use common::{answer, scripted_server, Reply};
    use sluice_client::Opcode;
    // A producer that accepts everything, then never sends a byte, not even a noop.
    let addr = scripted_server(|req| {
        let ok = match Opcode::from_byte(req.opcode) {
            Some(Opcode::Hello) => answer(&req, Status::Success).to_vec(),
            Some(Opcode::DcpOpen | Opcode::DcpControl) => answer(&req, Status::Success).to_vec(),
            Some(Opcode::DcpStreamReq) => {
                let log = [7u64.to_be_bytes(), 0u64.to_be_bytes()].concat();
                answer(&req, Status::Success).value(&log).to_vec()
            }
            _ => Vec::new(),
        };
        Reply::Bytes(ok)
    })
    .await;
    let mut opts = DcpOptions::new(ConnectOptions::default());
    opts.noop_interval = Duration::from_secs(1);
    let started = Instant::now();
    let mut stream = DcpStream::connect(
        &addr.to_string(),
        opts,
        StartFrom::Positions(StreamPositions::from_beginning(1)),
    )
    .await
    .unwrap();
    // The acceptance of the stream request is delivered; then silence, then the error.
    let err = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stream.next().await {
                Ok(DcpEvent::StreamOpened { .. }) => continue,
                Ok(ev) => panic!("nothing was sent, yet {ev:?}"),
                Err(e) => break e,
            }
        }
    })
    .await
    .expect("detected well within 10 s");
    assert!(matches!(err, DcpError::DeadConnection(_)), "{err}");
    assert!(err.is_connection_lost());
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(5),
        "{took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_errors_are_clear() {
    let node = start_node().await;
    let bad = DcpOptions::new(ConnectOptions::sluice("Administrator", "wrong", "default"));
    let err = DcpStream::connect(&node.addr, bad, StartFrom::Now)
        .await
        .unwrap_err();
    assert!(err.is_auth_failure(), "{err}");
    assert!(!err.is_connection_lost());

    // A port nothing listens on (bound, then released).
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap().to_string();
    drop(free);
    let err = DcpStream::connect(&addr, dcp_options(), StartFrom::Beginning)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("cannot connect to {addr}")),
        "{err}"
    );

    let mut positions = StreamPositions::from_beginning(VBUCKETS);
    positions.insert(DcpPosition::zero(VbId(VBUCKETS)));
    let err = DcpStream::resume(&node.addr, dcp_options(), positions)
        .await
        .unwrap_err();
    assert!(matches!(err, DcpError::PositionsMismatch { .. }), "{err}");
    node.running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconnecting_stream_survives_a_dropped_connection() {
    let node = start_node().await;
    let mut kv = node.kv().await;
    let mut model = Model::default();
    for i in 0..500 {
        model
            .set(&mut kv, &format!("doc-{i:04}"), &json_doc(i))
            .await;
    }
    let mut opts = dcp_options();
    opts.name = "reconnect-test".into();
    let mut stream = ReconnectingStream::connect(&node.addr, opts, StartFrom::Beginning)
        .await
        .unwrap();
    let mut replica = Replica::default();
    while replica.items < 250 {
        replica.apply(&stream.next().await.unwrap());
    }
    // A second connection under the same name makes the producer drop the first one.
    let mut intruder_opts = dcp_options();
    intruder_opts.name = "reconnect-test".into();
    let intruder = DcpStream::connect(&node.addr, intruder_opts, StartFrom::Now)
        .await
        .unwrap();
    for i in 500..700 {
        model
            .set(&mut kv, &format!("doc-{i:04}"), &json_doc(i))
            .await;
    }
    drop(intruder);
    let highs = high_seqnos(&node).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while highs
        .iter()
        .any(|(vb, h)| stream.positions().get(*vb).unwrap().seqno < *h)
    {
        let left = deadline.saturating_duration_since(Instant::now());
        let ev = tokio::time::timeout(left, stream.next())
            .await
            .expect("catches up after reconnecting")
            .unwrap();
        replica.apply(&ev);
    }
    replica.assert_matches(&model);
    assert!(stream.reconnects() >= 1, "the first connection was dropped");
    node.running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconnecting_stream_follows_a_node_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = |port: u16| {
        let mut c = sluice_server::ServerConfig::new(dir.path());
        c.kv_port = port;
        c.admin_port = 0;
        c.vbuckets = VBUCKETS;
        c.memory_quota_mb = 64;
        c.connection_threads = 1;
        c
    };
    let running = sluice_manager::start(config(0)).await.unwrap();
    let addr = running.kv_addr.to_string();
    let mut kv = Client::connect(&addr, connect_options()).await.unwrap();
    let mut model = Model::default();
    for i in 0..300 {
        model
            .set(&mut kv, &format!("doc-{i:04}"), &json_doc(i))
            .await;
    }
    let mut opts = dcp_options();
    opts.noop_interval = Duration::from_secs(1);
    let mut stream = ReconnectingStream::connect(&addr, opts, StartFrom::Beginning)
        .await
        .unwrap();
    let mut replica = Replica::default();
    while replica.items < 300 {
        replica.apply(&stream.next().await.unwrap());
    }
    drop(kv);
    running.shutdown().await.unwrap();
    let running =
        sluice_manager::start(config(addr.parse::<std::net::SocketAddr>().unwrap().port()))
            .await
            .unwrap();
    let mut kv = Client::connect(&addr, connect_options()).await.unwrap();
    for i in 300..400 {
        model
            .set(&mut kv, &format!("doc-{i:04}"), &json_doc(i))
            .await;
    }
    while replica.items < 400 {
        let ev = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("reconnects and catches up")
            .unwrap();
        replica.apply(&ev);
    }
    replica.assert_matches(&model);
    assert!(replica.rollbacks.is_empty(), "{:?}", replica.rollbacks);
    assert!(stream.reconnects() >= 1);
    running.shutdown().await.unwrap();
}
