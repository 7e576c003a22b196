//! The DCP consumer against a real in-process Sluice node over 127.0.0.1: full streams,
//! resume from a positions file, "from now", rollbacks, flow control with a small window,
//! noops, and connection errors.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use sluice_client::dcp::{
    DcpError, DcpEvent, DcpOptions, DcpPosition, DcpStream, ReconnectingStream, StartFrom,
    StreamPositions,
};
use sluice_client::{Client, ConnectOptions, Status, StoreOptions};
use sluice_types::{Cas, Datatype, Seqno, VbId, VbUuid};

const VBUCKETS: u16 = 64;

/// An in-process node on free ports, its data in a temporary directory.
struct Node {
    running: sluice_server::Running,
    _dir: tempfile::TempDir,
    addr: String,
}

async fn start_node() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let mut c = sluice_server::ServerConfig::new(dir.path());
    c.kv_port = 0;
    c.admin_port = 0;
    c.vbuckets = VBUCKETS;
    c.memory_quota_mb = 128;
    c.connection_threads = 1;
    // Expirations in these tests come from reads of expired documents, not the pager.
    c.expiry_pager_interval_s = 3600;
    let running = sluice_server::start(c).await.unwrap();
    let addr = running.kv_addr.to_string();
    Node {
        running,
        _dir: dir,
        addr,
    }
}

impl Node {
    async fn kv(&self) -> Client {
        Client::connect(&self.addr, connect_options())
            .await
            .unwrap()
    }
}

fn connect_options() -> ConnectOptions {
    ConnectOptions::sluice("Administrator", "password", "default")
}

fn dcp_options() -> DcpOptions {
    DcpOptions::new(connect_options())
}

/// What the bucket should hold, as the test wrote it: key → value (`None` = deleted).
#[derive(Default)]
struct Model {
    docs: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    expired: HashSet<Vec<u8>>,
}

impl Model {
    async fn set(&mut self, c: &mut Client, key: &str, value: &[u8]) {
        self.set_with(c, key, value, 0).await;
    }

    async fn set_with(&mut self, c: &mut Client, key: &str, value: &[u8], expiry: u32) {
        let opts = StoreOptions {
            expiry,
            ..Default::default()
        };
        c.set(key.as_bytes(), value, opts).await.unwrap();
        self.docs
            .insert(key.as_bytes().to_vec(), Some(value.to_vec()));
    }

    async fn delete(&mut self, c: &mut Client, key: &str) {
        c.delete(key.as_bytes(), Cas::ZERO).await.unwrap();
        self.docs.insert(key.as_bytes().to_vec(), None);
    }
}

/// What a consumer rebuilt from the events, checking the stream's invariants as it goes:
/// per vbucket, seqnos strictly increase and each item lies inside its snapshot marker.
#[derive(Default)]
struct Replica {
    docs: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    expirations: HashSet<Vec<u8>>,
    deletions: HashSet<Vec<u8>>,
    last_seqno: HashMap<VbId, Seqno>,
    marker: HashMap<VbId, (Seqno, Seqno)>,
    items: usize,
    rollbacks: Vec<(VbId, Seqno)>,
    stream_ends: usize,
    json_values: usize,
}

impl Replica {
    /// Continues from saved positions: anything at or below them would be a duplicate.
    fn resuming_from(mut self, positions: &StreamPositions) -> Replica {
        for p in positions.iter() {
            self.last_seqno.insert(p.vb, p.seqno);
        }
        self.marker.clear();
        self
    }

    fn apply(&mut self, ev: &DcpEvent) {
        match ev {
            DcpEvent::SnapshotMarker { vb, start, end, .. } => {
                assert!(start <= end, "{vb}: marker {start}..{end}");
                self.marker.insert(*vb, (*start, *end));
            }
            DcpEvent::Rollback { vb, to } => {
                self.rollbacks.push((*vb, *to));
                self.last_seqno.insert(*vb, *to);
                self.marker.remove(vb);
            }
            DcpEvent::StreamEnd { .. } => self.stream_ends += 1,
            DcpEvent::VbucketState { vb, state } => panic!("{vb}: no takeover asked ({state:?})"),
            DcpEvent::Mutation(i) | DcpEvent::Deletion(i) | DcpEvent::Expiration(i) => {
                let vb = i.vb;
                let last = self.last_seqno.get(&vb).copied().unwrap_or(Seqno::ZERO);
                assert!(
                    i.seqno > last,
                    "{vb}: seqno {} after {last} (duplicate or out of order)",
                    i.seqno
                );
                let (start, end) = *self
                    .marker
                    .get(&vb)
                    .unwrap_or_else(|| panic!("{vb}: item {} before any marker", i.seqno));
                assert!(
                    start <= i.seqno && i.seqno <= end,
                    "{vb}: item {} outside its marker {start}..{end}",
                    i.seqno
                );
                self.last_seqno.insert(vb, i.seqno);
                self.items += 1;
                let key = i.key.to_vec();
                match ev {
                    DcpEvent::Mutation(_) => {
                        if i.datatype.is_json() {
                            self.json_values += 1;
                        }
                        self.docs.insert(key, Some(i.value.to_vec()));
                    }
                    DcpEvent::Deletion(_) => {
                        assert!(i.value.is_empty());
                        self.deletions.insert(key.clone());
                        self.docs.insert(key, None);
                    }
                    _ => {
                        self.expirations.insert(key.clone());
                        self.docs.insert(key, None);
                    }
                }
            }
        }
    }

    /// The live documents (deleted ones dropped) must equal the model's.
    fn assert_matches(&self, model: &Model) {
        let live = |m: &BTreeMap<Vec<u8>, Option<Vec<u8>>>| -> BTreeMap<Vec<u8>, Vec<u8>> {
            m.iter()
                .filter_map(|(k, v)| v.clone().map(|v| (k.clone(), v)))
                .collect()
        };
        let want = live(&model.docs);
        let got = live(&self.docs);
        assert_eq!(got.len(), want.len(), "number of live documents");
        for (k, v) in &want {
            assert_eq!(
                got.get(k),
                Some(v),
                "document {}",
                String::from_utf8_lossy(k)
            );
        }
        for (k, v) in &model.docs {
            if v.is_none() && !model.expired.contains(k) {
                assert!(
                    self.docs.get(k) == Some(&None),
                    "deleted {} must arrive as a deletion",
                    String::from_utf8_lossy(k)
                );
            }
        }
        for k in &model.expired {
            assert!(
                self.expirations.contains(k),
                "{} must arrive as an expiration",
                String::from_utf8_lossy(k)
            );
        }
    }
}

/// Each vbucket's high seqno now.
async fn high_seqnos(node: &Node) -> HashMap<VbId, Seqno> {
    node.kv()
        .await
        .get_all_vb_seqnos()
        .await
        .unwrap()
        .into_iter()
        .collect()
}

/// Delivers events into `replica` until every vbucket's position reaches `highs`.
async fn stream_until(stream: &mut DcpStream, replica: &mut Replica, highs: &HashMap<VbId, Seqno>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let behind = highs
            .iter()
            .filter(|(vb, high)| {
                stream
                    .positions()
                    .get(**vb)
                    .is_none_or(|p| p.seqno < **high)
            })
            .count();
        if behind == 0 {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let ev = tokio::time::timeout(left, stream.next())
            .await
            .unwrap_or_else(|_| panic!("{behind} vbuckets still behind after 60 s"))
            .unwrap();
        replica.apply(&ev);
    }
}

/// One number from `STAT dcp` for the connection named `name` (refreshed every second).
async fn dcp_stat(kv: &mut Client, name: &str, stat: &str) -> u64 {
    let key = format!("eq_dcpq:{name}:{stat}");
    let stats = kv.stats("dcp").await.unwrap();
    let (_, v) = stats
        .iter()
        .find(|(k, _)| *k == key)
        .unwrap_or_else(|| panic!("no {key} in {stats:?}"));
    v.parse().unwrap()
}

/// Nothing more arrives for a while (used after a stream has caught up).
async fn assert_quiet(stream: &mut DcpStream, replica: &mut Replica, for_: Duration) {
    if let Ok(ev) = tokio::time::timeout(for_, stream.next()).await {
        let ev = ev.unwrap();
        replica.apply(&ev);
        assert!(
            ev.item().is_none(),
            "no further change was written, yet got {ev:?}"
        );
    }
}

fn json_doc(i: usize) -> Vec<u8> {
    format!(r#"{{"i":{i},"name":"doc {i}","tags":["a","b"]}}"#).into_bytes()
}

fn binary_doc(i: usize) -> Vec<u8> {
    let mut v = vec![0u8, 0xff, 0x10];
    v.extend_from_slice(format!("bin-{i}").as_bytes());
    v
}

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
    let first = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .unwrap()
        .unwrap();
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
    let first = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .unwrap()
        .unwrap();
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
    // Neither may happen in 3.5 s of idling.
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
    let err = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("detected well within 10 s")
        .unwrap_err();
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
    let ev = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .unwrap()
        .unwrap();
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
    let running = sluice_server::start(config(0)).await.unwrap();
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
        sluice_server::start(config(addr.parse::<std::net::SocketAddr>().unwrap().port()))
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
