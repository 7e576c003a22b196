//! Connection placement over real sockets: connections opened from one CPU share the
//! connection thread of that CPU (`incoming-cpu`, the default), where round-robin splits
//! them; STAT connections shows each thread's count.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::loopback_config;
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use sluice_client::{Client, ConnectOptions};
use sluice_engine::BucketType;
use sluice_server::Placement;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Fewer than the imbalance bound (16): none is moved for balance.
const CONNECTIONS: u64 = 8;

fn allowed_cpus() -> Vec<usize> {
    let set = sched_getaffinity(Pid::from_raw(0)).unwrap();
    (0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap())
        .collect()
}

/// Opens `CONNECTIONS` plain TCP connections from a thread bound to `cpu` (on loopback the
/// handshake runs on the sender's CPU, so that is their incoming CPU).
fn connect_from(cpu: usize, addr: SocketAddr) -> Vec<TcpStream> {
    std::thread::spawn(move || {
        let mut set = CpuSet::new();
        set.set(cpu).unwrap();
        sched_setaffinity(Pid::from_raw(0), &set).unwrap();
        (0..CONNECTIONS)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect()
    })
    .join()
    .unwrap()
}

/// The placement's name and each connection thread's open connections.
async fn snapshot(client: &mut Client) -> (String, Vec<u64>) {
    let stats = client.stats("connections").await.unwrap();
    let placement = stats
        .iter()
        .find(|(k, _)| k == "connection_placement")
        .map(|(_, v)| v.clone())
        .unwrap();
    let loads = stats
        .iter()
        .filter(|(k, _)| k.starts_with("conn_thread_"))
        .map(|(_, v)| v.parse().unwrap())
        .collect();
    (placement, loads)
}

/// Where `CONNECTIONS` connections opened from one CPU went: per thread, besides the stats
/// connection (which came from wherever this test runs).
async fn place_from_one_cpu(placement: Placement) -> (String, Vec<u64>) {
    let dir = tempfile::tempdir().unwrap();
    let mut c = loopback_config(dir.path(), BucketType::Ephemeral, 16, 64);
    c.connection_threads = 2;
    c.connection_placement = placement;
    let node = sluice_manager::start(c).await.unwrap();
    let mut client = Client::connect(
        node.kv_addr,
        ConnectOptions::sluice("Administrator", "password", "default"),
    )
    .await
    .unwrap();
    let (_, before) = snapshot(&mut client).await;
    assert_eq!(before.iter().sum::<u64>(), 1, "the stats connection alone");
    let cpu = *allowed_cpus().last().unwrap();
    let kv = node.kv_addr;
    let _open = tokio::task::spawn_blocking(move || connect_from(cpu, kv))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (name, after) = snapshot(&mut client).await;
        if after.iter().sum::<u64>() == 1 + CONNECTIONS || Instant::now() > deadline {
            let added = after.iter().zip(&before).map(|(a, b)| a - b).collect();
            return (name, added);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_from_one_cpu_share_that_cpus_thread() {
    let cpus = allowed_cpus();
    let (name, loads) = place_from_one_cpu(Placement::IncomingCpu).await;
    assert_eq!(name, "incoming-cpu");
    if cpus.len() < 2 {
        // One CPU: both threads belong to it, and the first is the one chosen.
        eprintln!("only one CPU here: checking the count alone");
        assert_eq!(loads.iter().sum::<u64>(), CONNECTIONS);
        return;
    }
    // Thread i belongs to the i-th allowed CPU; the connections came from the last one.
    let expected_thread = (cpus.len() - 1) % 2;
    let mut expected = vec![0, 0];
    expected[expected_thread] = CONNECTIONS;
    assert_eq!(loads, expected, "every connection on the thread of its CPU");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_splits_them() {
    let (name, loads) = place_from_one_cpu(Placement::RoundRobin).await;
    assert_eq!(name, "round-robin");
    assert_eq!(loads.iter().sum::<u64>(), CONNECTIONS);
    assert_eq!(
        loads,
        [CONNECTIONS / 2, CONNECTIONS / 2],
        "round-robin puts half on each thread"
    );
}
