//! The smart client against real in-process nodes on loopback: routing by a 2-node map with
//! one replica, replica reads, and recovery when the map changes under it (NOT_MY_VBUCKET
//! with the new map; a node that dies and is failed over).
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::{answer, scripted_server, Reply, Req};
use sluice_client::{
    Client, ClusterClient, ClusterError, ClusterOptions, ClusterView, ConnectOptions, Op, OpResult,
    RetryReason, StoreOptions,
};
use sluice_cluster::{
    fail_over, place, BucketInfo, BucketKind, Chain, ClusterMap, NodeId, NodeInfo, ServingNode,
    VbMap,
};
use sluice_manager::Running;
use sluice_server::ServerConfig;
use sluice_types::{vbucket_of, Cas, VbId, VbState};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;
use tokio::time::Instant;

const VBS: u16 = 16;
const IDS: [NodeId; 2] = [NodeId(0), NodeId(1)];

struct TestNode {
    running: Running,
    _dir: tempfile::TempDir,
}

async fn start_node() -> TestNode {
    start_joining(None).await
}

/// Two nodes of one cluster: the second joins the first, so both hold the cluster's secret
/// and may replicate from each other (the map is then installed by hand).
async fn start_pair() -> (TestNode, TestNode) {
    let a = start_joining(None).await;
    let b = start_joining(Some(a.running.admin_addr)).await;
    assert_eq!(b.running.meta.id(), IDS[1]);
    (a, b)
}

async fn start_joining(member: Option<SocketAddr>) -> TestNode {
    let dir = tempfile::tempdir().unwrap();
    let mut c = ServerConfig::new(dir.path());
    c.join = member.map(|m| m.to_string());
    c.kv_port = 0;
    c.admin_port = 0;
    c.vbuckets = VBS;
    c.memory_quota_mb = 64;
    c.connection_threads = 1;
    let running = sluice_manager::start(c).await.unwrap();
    TestNode { running, _dir: dir }
}

fn options() -> ClusterOptions {
    ClusterOptions::sluice("Administrator", "password", "default")
}

fn key(i: usize) -> String {
    format!("doc{i}")
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(key).collect()
}

fn owner(map: &ClusterMap, k: &str) -> usize {
    let vb = vbucket_of(k.as_bytes(), VBS);
    map.vbmap().chain(vb).unwrap().active.unwrap().0 as usize
}

/// Gives both nodes one 2-node, 1-replica map and waits until their vbucket states follow
/// it. `kv_ports` overrides the advertised KV ports (a proxy in front of a node).
async fn form_cluster(nodes: &[&TestNode; 2], kv_ports: [Option<u16>; 2]) -> ClusterMap {
    let infos: Vec<NodeInfo> = (0..2)
        .map(|i| {
            let mut info = nodes[i].running.node.node_info(IDS[i]);
            if let Some(p) = kv_ports[i] {
                info.kv_port = p;
            }
            info
        })
        .collect();
    let solo = nodes[0].running.node.cluster_map();
    let map = solo.map.next(infos, place(&IDS, VBS, 1).unwrap()).unwrap();
    install(&[(nodes[0], IDS[0]), (nodes[1], IDS[1])], &map).await;
    map
}

/// Installs `map` on each node (as the given id) and waits until their states follow it.
async fn install(nodes: &[(&TestNode, NodeId)], map: &ClusterMap) {
    for (n, id) in nodes {
        n.running.node.install_map(map.clone(), *id);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    for (n, id) in nodes {
        let i = id.0;
        for (vb, chain) in map.vbmap().iter() {
            let want = if chain.active == Some(*id) {
                VbState::Active
            } else if chain.replicas.contains(&Some(*id)) {
                VbState::Replica
            } else {
                VbState::Dead
            };
            while n.running.node.bucket.engine.vb_state(vb).unwrap() != want {
                assert!(
                    Instant::now() < deadline,
                    "{vb} on node {i} never became {want:?}"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    // And until each node serves the replication feeds the map asks of it (the agent opens
    // them after the states): a test counting connections must not count a feed's.
    for (n, id) in nodes {
        let followers: std::collections::BTreeSet<NodeId> = map
            .vbmap()
            .iter()
            .filter(|(_, c)| c.active == Some(*id))
            .flat_map(|(_, c)| c.replicas.iter().flatten().copied().collect::<Vec<_>>())
            .collect();
        let served = || {
            n.running
                .node
                .dcp
                .snapshot()
                .iter()
                .filter(|c| c.name.starts_with("replication:"))
                .count()
        };
        while served() < followers.len() {
            assert!(
                Instant::now() < deadline,
                "node {} never served its {} replication feed(s)",
                id.0,
                followers.len()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Reads `k` straight from one node, without any routing.
async fn read_direct(addr: SocketAddr, k: &str) -> Result<Vec<u8>, sluice_client::ClientError> {
    let opts = ConnectOptions::sluice("Administrator", "password", "default");
    let mut c = Client::connect(addr, opts).await?;
    Ok(c.get(k.as_bytes()).await?.value.to_vec())
}

/// Polls replica reads through the client until every key reads `want` from replica 0.
async fn wait_replicated(client: &ClusterClient, ks: &[String], want: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ops = ks
            .iter()
            .map(|k| Op::GetReplica {
                key: k.clone().into_bytes().into(),
                index: 0,
            })
            .collect();
        let answers = client.execute_many(ops).await;
        let missing: Vec<String> = answers
            .iter()
            .zip(ks)
            .filter(|(a, _)| !matches!(a, Ok(OpResult::Document(d)) if d.value == want.as_bytes()))
            .map(|(a, k)| format!("{k}: {a:?}"))
            .collect();
        if missing.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} key(s) never replicated, e.g. {}",
            missing.len(),
            missing[0]
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn set_all(client: &ClusterClient, ks: &[String], value: &str) {
    let items: Vec<(&str, &str)> = ks.iter().map(|k| (k.as_str(), value)).collect();
    for (r, k) in client
        .set_many(&items, StoreOptions::default())
        .await
        .into_iter()
        .zip(ks)
    {
        let m = r.unwrap_or_else(|e| panic!("set {k}: {e}"));
        assert_ne!(m.cas, Cas::ZERO);
        assert!(m.token.is_some(), "MutationSeqno is negotiated");
    }
}

async fn get_all(client: &ClusterClient, ks: &[String], want: &str) {
    for (r, k) in client.get_many(ks).await.into_iter().zip(ks) {
        let doc = r.unwrap_or_else(|e| panic!("get {k}: {e}"));
        assert_eq!(doc.value, want.as_bytes(), "{k}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_by_the_map_pipelines_and_reads_replicas() {
    let (a, b) = start_pair().await;
    let map = form_cluster(&[&a, &b], [None, None]).await;
    let addrs = [a.running.kv_addr, b.running.kv_addr];
    let connections_before = [&a, &b].map(|n| {
        n.running
            .node
            .connections_total
            .load(std::sync::atomic::Ordering::Relaxed)
    });

    // Bootstrapped from node B alone (after a seed that refuses connections).
    let dead_seed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let client = ClusterClient::connect(&[dead_seed, addrs[1].to_string()], options())
        .await
        .unwrap();
    assert_eq!(client.map().version().rev, map.rev().0 as i64);
    assert_eq!(client.map().nodes().len(), 2);

    let ks = keys(500);
    set_all(&client, &ks, "v1").await;
    get_all(&client, &ks, "v1").await;
    // 1000 operations, one connection per node (the bootstrap one reused for B).
    for (i, before) in connections_before.iter().enumerate() {
        let now = [&a, &b][i]
            .running
            .node
            .connections_total
            .load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(now - before, 1, "connections opened to node {i}");
    }
    let stats = client.stats();
    assert_eq!(stats.not_my_vbucket, 0, "the map was right: {stats:?}");
    assert_eq!((stats.retries, stats.map_updates), (0, 0), "{stats:?}");

    // Every write landed on its active node (the replica copy would refuse a direct read).
    for k in ks.iter().step_by(7) {
        let o = owner(&map, k);
        assert_eq!(read_direct(addrs[o], k).await.unwrap(), b"v1", "{k}");
        let other = read_direct(addrs[1 - o], k).await.unwrap_err();
        assert_eq!(other.status(), Some(sluice_client::Status::NotMyVbucket));
    }

    // Replica 0 lives on the other node and catches up.
    wait_replicated(&client, &ks, "v1").await;
    let err = client.get_replica(b"doc1", 1).await.unwrap_err();
    assert!(
        matches!(
            err,
            ClusterError::NoSuchReplica {
                index: 1,
                replicas: 1
            }
        ),
        "{err}"
    );

    // Single operations, and a miss.
    let m = client
        .set(b"single", b"x", StoreOptions::default())
        .await
        .unwrap();
    assert_eq!(client.get(b"single").await.unwrap().cas, m.cas);
    client.delete(b"single", Cas::ZERO).await.unwrap();
    assert!(client.get(b"single").await.unwrap_err().is_not_found());
    let stale = client.delete(b"doc0", Cas(1)).await.unwrap_err();
    assert_eq!(stale.status(), Some(sluice_client::Status::KeyEexists));

    a.running.shutdown().await.unwrap();
    b.running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_new_map_announced_by_not_my_vbucket() {
    let (a, b) = start_pair().await;
    let map1 = form_cluster(&[&a, &b], [None, None]).await;
    let client = ClusterClient::connect(&[b.running.kv_addr.to_string()], options())
        .await
        .unwrap();
    let ks = keys(200);
    set_all(&client, &ks, "v1").await;
    wait_replicated(&client, &ks, "v1").await;

    // Every vbucket swaps its active and its replica: each key's owner changes.
    let swapped: Vec<Chain> = map1
        .vbmap()
        .iter()
        .map(|(_, c)| Chain::new(c.replicas[0], vec![c.active]))
        .collect();
    let map2 = map1.with_vbmap(VbMap::new(1, swapped).unwrap()).unwrap();
    install(&[(&a, IDS[0]), (&b, IDS[1])], &map2).await;
    assert_eq!(
        client.map().version().rev,
        map1.rev().0 as i64,
        "not told yet"
    );

    get_all(&client, &ks, "v1").await;
    let stats = client.stats();
    assert!(stats.not_my_vbucket > 0, "{stats:?}");
    assert_eq!(stats.map_updates, 1, "{stats:?}");
    assert_eq!(client.map().version().rev, map2.rev().0 as i64);

    set_all(&client, &ks, "v2").await;
    let addrs = [a.running.kv_addr, b.running.kv_addr];
    for k in ks.iter().step_by(5) {
        let o = owner(&map2, k);
        assert_ne!(o, owner(&map1, k));
        assert_eq!(read_direct(addrs[o], k).await.unwrap(), b"v2", "{k}");
    }
    a.running.shutdown().await.unwrap();
    b.running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survives_a_node_failure_and_its_failover() {
    let (a, b) = start_pair().await;
    // Clients and B's replication reach A through a proxy that can be cut like a cable.
    let proxy = Proxy::start(a.running.kv_addr).await;
    let map1 = form_cluster(&[&a, &b], [Some(proxy.addr.port()), None]).await;
    let client = ClusterClient::connect(&[b.running.kv_addr.to_string()], options())
        .await
        .unwrap();
    let ks = keys(200);
    set_all(&client, &ks, "v1").await;
    wait_replicated(&client, &ks, "v1").await;

    // A goes away; B is told to fail it over. The client still holds map1.
    proxy.cut();
    a.running.shutdown().await.unwrap();
    let out = fail_over(map1.vbmap(), &[IDS[0]]);
    assert!(out.lost.is_empty());
    let map2 = map1.with_vbmap(out.map).unwrap();
    install(&[(&b, IDS[1])], &map2).await;

    get_all(&client, &ks, "v1").await;
    let stats = client.stats();
    assert!(stats.connection_failures > 0, "{stats:?}");
    assert_eq!(stats.map_updates, 1, "{stats:?}");
    assert_eq!(client.map().version().rev, map2.rev().0 as i64);
    set_all(&client, &ks, "v2").await;
    get_all(&client, &ks, "v2").await;

    // No replicas are left to read from.
    let err = client.get_replica(b"doc1", 0).await.unwrap_err();
    assert!(
        matches!(err, ClusterError::ReplicaUnavailable { index: 0, .. }),
        "{err}"
    );
    b.running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gives_up_within_the_timeout_when_a_vbucket_has_no_active() {
    let n = start_node().await;
    let client = ClusterClient::connect(&[n.running.kv_addr.to_string()], {
        let mut o = options();
        o.operation_timeout = Duration::from_millis(300);
        o
    })
    .await
    .unwrap();
    // A map whose vbucket of "lost" has no copy anywhere.
    let lost_vb = vbucket_of(b"lost", VBS);
    let solo = n.running.node.cluster_map();
    let chains = solo
        .map
        .vbmap()
        .iter()
        .map(|(vb, c)| {
            if vb == lost_vb {
                Chain::lost(0)
            } else {
                c.clone()
            }
        })
        .collect();
    let map = solo.map.with_vbmap(VbMap::new(0, chains).unwrap()).unwrap();
    install(&[(&n, solo.this)], &map).await;

    let started = Instant::now();
    let err = client.get(b"lost").await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    match err {
        ClusterError::RetriesExhausted {
            last: RetryReason::NoActive { vb, .. },
            attempts,
            ..
        } => assert!(vb == lost_vb && attempts > 1, "{vb} after {attempts}"),
        other => panic!("{other}"),
    }
    // Other vbuckets still work, with the newer map (learnt from NOT_MY_VBUCKET).
    let other = (0..)
        .map(key)
        .find(|k| vbucket_of(k.as_bytes(), VBS) != lost_vb)
        .unwrap();
    client
        .set(other.as_bytes(), b"ok", StoreOptions::default())
        .await
        .unwrap();
    n.running.shutdown().await.unwrap();
}

#[tokio::test]
async fn bootstrap_needs_a_seed_and_a_bucket() {
    let no_seed: [&str; 0] = [];
    assert!(matches!(
        ClusterClient::connect(&no_seed, options()).await,
        Err(ClusterError::NoSeeds)
    ));
    let mut o = options();
    o.connect.bucket = None;
    assert!(matches!(
        ClusterClient::connect(&["127.0.0.1:1"], o).await,
        Err(ClusterError::NoBucket)
    ));
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let err = ClusterClient::connect(&[dead.clone(), dead], options())
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClusterError::Bootstrap { seeds: 2, .. }),
        "{err}"
    );
}

/// The client's parser reads the planner's rendering of a 3-node, 2-replica map with empty
/// slots exactly as the planner meant it.
#[test]
fn parses_the_maps_the_planner_renders() {
    let ids = [NodeId(4), NodeId(9), NodeId(2)];
    let nodes: Vec<NodeInfo> = ids
        .iter()
        .enumerate()
        .map(|(i, &id)| NodeInfo {
            id,
            host: "127.0.0.1".into(),
            kv_port: 12000 + i as u16,
            admin_port: 8091 + i as u16,
            tls: None,
            services: sluice_cluster::Services::ALL,
        })
        .collect();
    let placed = place(&ids, 64, 2).unwrap();
    let failed = fail_over(&placed, &[NodeId(9)]).map;
    let map = ClusterMap::new(nodes.clone(), failed).unwrap();
    let bucket = BucketInfo {
        name: "default",
        uuid: "00",
        kind: BucketKind::Couchbase,
    };
    let serving = ServingNode {
        host: "127.0.0.1",
        kv_port: 12002,
        admin_port: 8091,
        services: sluice_cluster::Services::ALL,
    };
    let json = serde_json::to_vec(&map.terse_bucket_config(&bucket, &serving)).unwrap();
    let view = ClusterView::parse(&json).unwrap();
    assert_eq!((view.num_vbuckets(), view.num_replicas()), (64, 2));
    assert!(view.nodes()[2].this_node && !view.nodes()[0].this_node);
    let addr_of = |id: Option<NodeId>| {
        id.map(|id| {
            let n = nodes.iter().find(|n| n.id == id).unwrap();
            format!("127.0.0.1:{}", n.kv_port)
        })
    };
    for (vb, chain) in map.vbmap().iter() {
        let active = view.active_node(vb).map(|n| n.addr.clone());
        assert_eq!(active, addr_of(chain.active), "{vb}");
        for (i, slot) in chain.replicas.iter().enumerate() {
            let got = view.replica_node(vb, i as u8).map(|n| n.addr.clone());
            assert_eq!(got, addr_of(*slot), "{vb} replica {i}");
        }
    }
    assert_eq!(view.vbucket_of(b"k"), VbId(vbucket_of(b"k", 64).0));
}

/// Two operations on one node travel together and their answers, sent in reverse order,
/// reach the right callers: requests are pipelined and matched by opaque.
#[tokio::test]
async fn pipelined_answers_are_matched_by_opaque() {
    use sluice_client::{Opcode, Status};
    let own_addr: Arc<Mutex<String>> = Arc::default();
    let addr_for_script = own_addr.clone();
    let mut held: Option<Req> = None;
    let addr = scripted_server(move |req: Req| {
        let reply = |r: &Req| {
            answer(r, Status::Success)
                .extras(&[0, 0, 0, 0])
                .value(&r.key)
                .to_vec()
        };
        let bytes = match Opcode::from_byte(req.opcode).unwrap() {
            Opcode::Hello | Opcode::SelectBucket => answer(&req, Status::Success).to_vec(),
            Opcode::GetClusterConfig => {
                let me = addr_for_script.lock().unwrap().clone();
                let config = format!(
                    r#"{{"rev":3,"nodeLocator":"vbucket","vBucketServerMap":{{"numReplicas":0,"serverList":["{me}"],"vBucketMap":[[0],[0],[0],[0]]}}}}"#
                );
                answer(&req, Status::Success).value(config.as_bytes()).to_vec()
            }
            // Hold the first GET until the second arrives, then answer the second first.
            Opcode::Get => match held.take() {
                None => {
                    held = Some(req);
                    Vec::new()
                }
                Some(first) => [reply(&req), reply(&first)].concat(),
            },
            other => panic!("unexpected {other:?}"),
        };
        Reply::Bytes(bytes)
    })
    .await;
    *own_addr.lock().unwrap() = addr.to_string();
    let mut o = options();
    o.connect.auth = None;
    let client = ClusterClient::connect(&[addr.to_string()], o)
        .await
        .unwrap();
    let (x, y) = tokio::join!(client.get(b"first"), client.get(b"second"));
    assert_eq!(&x.unwrap().value[..], b"first");
    assert_eq!(&y.unwrap().value[..], b"second");
}

/// With one request in flight per node and a batch of 4 at a time, a batch of 100 still
/// completes: the limits throttle, they do not deadlock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_limits_throttle_a_batch() {
    let n = start_node().await;
    let mut o = options();
    o.node_in_flight_max = 1;
    o.batch_in_flight_max = 4;
    let client = ClusterClient::connect(&[n.running.kv_addr.to_string()], o)
        .await
        .unwrap();
    let ks = keys(100);
    set_all(&client, &ks, "v").await;
    get_all(&client, &ks, "v").await;
    n.running.shutdown().await.unwrap();
}

/// A TCP proxy on loopback whose connections can all be cut at once.
struct Proxy {
    addr: SocketAddr,
    tasks: Arc<Mutex<Vec<AbortHandle>>>,
}

impl Proxy {
    async fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let tasks: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let registry = tasks.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let pipe = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                registry.lock().unwrap().push(pipe.abort_handle());
            }
        });
        tasks.lock().unwrap().push(accept.abort_handle());
        Proxy { addr, tasks }
    }

    /// Stops listening and drops every proxied connection.
    fn cut(&self) {
        for t in self.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}
