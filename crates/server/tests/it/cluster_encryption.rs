//! Encrypted control traffic between members (`--cluster-encryption control`): a node joins
//! through its member's TLS admin port, and from then on the members' Raft, forwarded
//! proposals, probes and internal calls go over TLS, verified against the cluster's CA. The
//! cluster identity is refused on the cleartext admin port (so the cluster working at all
//! proves its members call each other over TLS); users still use either port; a joiner
//! pointed at the cleartext port fails its handshake instead of sending the administrator's
//! password, or receiving the secret, in the clear. At that level replication stays on the
//! cleartext KV port; at level `all` it goes to the members' TLS KV ports.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::cluster::{node, place_on, until};
use sluice_client::admin_http::{self, AdminAnswer};
use sluice_client::net::{trusting, Dial};
use sluice_client::{Client, ConnectOptions, Credentials, StoreOptions};
use sluice_cluster::metadata::MetaCommand;
use sluice_cluster::NodeId;
use sluice_manager::Running;
use sluice_server::tls::TlsFiles;
use sluice_server::{ClusterEncryption, ServerConfig};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

const T: Duration = Duration::from_secs(10);
const MAP_REV: &str = "/internal/rebalance/map_rev";

/// A CA (its PEM file) and one certificate for 127.0.0.1 signed by it, written under `dir`.
fn make_certs(dir: &Path) -> (PathBuf, TlsFiles) {
    let (files, ca) = common::certs::make_certs(dir);
    (ca.pem, files)
}

/// A node's settings for a cluster encrypted at `level`.
fn encrypted(
    level: ClusterEncryption,
    ca: &Path,
    files: &TlsFiles,
) -> impl FnOnce(&mut ServerConfig) {
    let (ca, files) = (ca.to_path_buf(), files.clone());
    move |c: &mut ServerConfig| {
        c.tls = Some(files);
        c.kv_tls_port = 0;
        c.admin_tls_port = 0;
        c.cluster_encryption = level;
        c.cluster_ca = Some(ca);
    }
}

/// Whether each of `n`'s replication feeds to its peers (DCP producer connections named
/// `replication:...`) came over TLS; waits until there is one.
async fn feeds_over_tls(n: &Running) -> Vec<bool> {
    let feeds = || -> Vec<bool> {
        n.node
            .dcp
            .snapshot()
            .iter()
            .filter(|c| c.name.starts_with("replication:"))
            .map(|c| c.tls)
            .collect()
    };
    until("a replication feed to the peer", || !feeds().is_empty()).await;
    feeds()
}

fn tls_admin(n: &Running) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], n.node.tls_ports().unwrap().admin))
}

async fn as_member(n: &Running, dial: &Dial, addr: SocketAddr) -> AdminAnswer {
    let who = n.meta.config().secret.credentials();
    admin_http::call(dial, &addr.to_string(), &who, MAP_REV, None, T)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_call_each_other_over_tls_only() {
    let certs = tempfile::tempdir().unwrap();
    let (ca, files) = make_certs(certs.path());
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = node(
        dirs[0].path(),
        None,
        encrypted(ClusterEncryption::Control, &ca, &files),
    )
    .await;

    // A joiner sent to the cleartext admin port: its TLS handshake fails there, and it
    // does not start (nothing was sent in the clear).
    let mut cleartext_join = ServerConfig::new(dirs[2].path());
    (cleartext_join.kv_port, cleartext_join.admin_port) = (0, 0);
    encrypted(ClusterEncryption::Control, &ca, &files)(&mut cleartext_join);
    cleartext_join.join = Some(a.admin_addr.to_string());
    let refused = tokio::time::timeout(
        Duration::from_secs(60),
        sluice_manager::start(cleartext_join),
    )
    .await
    .expect("a failed join gives up");
    let err = refused
        .err()
        .expect("a join over cleartext fails")
        .to_string();
    assert!(err.contains(&a.admin_addr.to_string()), "{err}");

    // Through the TLS admin port, the join works: the joiner got the secret over TLS.
    let b = node(
        dirs[1].path(),
        Some(tls_admin(&a)),
        encrypted(ClusterEncryption::Control, &ca, &files),
    )
    .await;
    assert_eq!(b.meta.id(), NodeId(1));
    // Raft replicates the map to b, over TLS.
    place_on(&a, &[&a, &b], &[NodeId(0), NodeId(1)]).await;
    // A proposal made on b is forwarded to the leader, over TLS.
    assert_ne!(a.meta.leader(), Some(b.meta.id()));
    let edit = MetaCommand::SetBucketQuota {
        name: "default".into(),
        quota_bytes: 96 << 20,
    };
    b.meta.propose(edit).await.unwrap().unwrap();
    until("the quota edit applied on a", || {
        a.meta
            .state()
            .borrow()
            .bucket("default")
            .unwrap()
            .quota_bytes
            == 96 << 20
    })
    .await;

    // The cluster identity is refused in the clear, and taken over TLS.
    let member_tls = Dial {
        source: None,
        tls: Some(trusting(&ca).unwrap()),
    };
    for n in [&a, &b] {
        let clear = as_member(n, &Dial::default(), n.admin_addr).await;
        assert_eq!(clear.status, 403, "{:?}", clear.body);
        assert!(clear.body["error"].as_str().unwrap().contains("TLS"));
        let over_tls = as_member(n, &member_tls, tls_admin(n)).await;
        assert_eq!(over_tls.status, 200, "{:?}", over_tls.body);
    }
    // Users may still use the cleartext port.
    let admin = Credentials::new("Administrator", "password");
    let view = admin_http::get(&a.admin_addr.to_string(), &admin, "/api/v1/cluster", T)
        .await
        .unwrap();
    assert!(view.ok(), "{view:?}");

    // The fencing probes go over TLS too: past the fencing bound (1.5 s), neither node has
    // fenced itself, and a write to each node's actives succeeds and reaches the replica.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!a.node.is_fenced() && !b.node.is_fenced());
    write_and_replicate(&a, &b).await;
    // At this level the documents' streams stay on the cleartext KV port.
    assert_eq!(feeds_over_tls(&a).await, [false]);
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}

/// Sets 40 keys through whichever node is active for each, and waits until the other holds
/// each as a replica.
async fn write_and_replicate(a: &Running, b: &Running) {
    let opts = ConnectOptions::sluice("Administrator", "password", "default");
    let mut ca_client = Client::connect(a.kv_addr, opts.clone()).await.unwrap();
    let mut cb_client = Client::connect(b.kv_addr, opts).await.unwrap();
    let view = a.node.cluster_map();
    for (i, k) in (0..40).map(|i| format!("k{i}")).enumerate() {
        let vb = sluice_types::vbucket_of(k.as_bytes(), common::cluster::VBS);
        let active = view.map.vbmap().chain(vb).unwrap().active.unwrap();
        let (writer, reader) = match active {
            NodeId(0) => (&mut ca_client, &mut cb_client),
            _ => (&mut cb_client, &mut ca_client),
        };
        let value = format!("v{i}");
        // Right after the placement a node may not serve its actives yet (its first
        // lease round): NOT_MY_VBUCKET until it does.
        let deadline = tokio::time::Instant::now() + T;
        while let Err(e) = writer
            .set(k.as_bytes(), value.as_bytes(), StoreOptions::default())
            .await
        {
            assert_eq!(e.status(), Some(sluice_proto::Status::NotMyVbucket), "{e}");
            assert!(tokio::time::Instant::now() < deadline, "{k}: never served");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let deadline = tokio::time::Instant::now() + T;
        while !reader
            .get_replica(k.as_bytes())
            .await
            .is_ok_and(|r| r.value == value.as_bytes())
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{k} never replicated"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Level `all`: the replication streams between the members go to their TLS KV ports too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn level_all_replicates_over_tls() {
    let certs = tempfile::tempdir().unwrap();
    let (ca, files) = make_certs(certs.path());
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let all = || encrypted(ClusterEncryption::All, &ca, &files);
    let a = node(dirs[0].path(), None, all()).await;
    let b = node(dirs[1].path(), Some(tls_admin(&a)), all()).await;
    place_on(&a, &[&a, &b], &[NodeId(0), NodeId(1)]).await;
    write_and_replicate(&a, &b).await;
    // Each node's feed to its peer came in over TLS (the producer's side says so).
    assert_eq!(feeds_over_tls(&a).await, [true]);
    assert_eq!(feeds_over_tls(&b).await, [true]);
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}

/// A node told to encrypt its cluster's traffic without a certificate of its own (its peers
/// could not call it over TLS) refuses to start, and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encryption_without_a_certificate_stops_the_start() {
    let certs = tempfile::tempdir().unwrap();
    let (ca, _) = make_certs(certs.path());
    let dir = tempfile::tempdir().unwrap();
    let mut c = ServerConfig::new(dir.path());
    (c.kv_port, c.admin_port) = (0, 0);
    c.cluster_encryption = ClusterEncryption::Control;
    c.cluster_ca = Some(ca);
    let err = sluice_manager::start(c).await.err().unwrap().to_string();
    assert!(err.contains("--tls-cert"), "{err}");
}
