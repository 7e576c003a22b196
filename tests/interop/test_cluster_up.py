"""`sluice cluster up`: three node processes on 127.0.0.1 form one cluster with one
replica; the Python SDK reaches every node through one seed, reads replicas, and makes
durable writes at every level (acknowledged once the replica holds them), and so does
`sluice kv` (the Rust smart client) from one seed; Ctrl-C stops every node cleanly and a second run restarts the same cluster
with its data."""

from __future__ import annotations

import json
import random
import signal
import socket
import subprocess
import time
from datetime import timedelta

import pytest
from couchbase.auth import PasswordAuthenticator
from couchbase.cluster import Cluster
from couchbase.durability import DurabilityLevel, ServerDurability
from couchbase.exceptions import CouchbaseException
from couchbase.options import ClusterOptions, UpsertOptions

from conftest import HOST, PASSWORD, USERNAME, sluice_binary

NODES = 3


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
            return True
        except OSError:
            return False


def free_base() -> int:
    """A base port whose cluster ports are free: KV, admin, TLS KV and TLS admin
    (+0, +1, +7, +8) of up to four nodes (a test may join a fourth). Below the kernel's
    ephemeral range (32768 and up), so no client's outgoing connection takes one of them
    between this check and the bind."""
    for _ in range(200):
        base = random.randrange(20000, 32700, 10)
        if all(port_free(base + 10 * i + d) for i in range(4) for d in (0, 1, 7, 8)):
            return base
    pytest.fail("no free port range for the cluster")


def cluster_up(data_dir, base: int) -> subprocess.Popen:
    return subprocess.Popen(
        [str(sluice_binary()), "cluster", "up", "--nodes", str(NODES), "--replicas", "1",
         "--data-dir", str(data_dir), "--base-port", str(base), "--vbuckets", "64",
         "--memory-quota-mb", "128"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_up(proc: subprocess.Popen, data_dir) -> dict:
    """The connection string line on stdout means the cluster is formed."""
    line = proc.stdout.readline()
    if not line.startswith("couchbase://"):
        proc.kill()
        pytest.fail(f"cluster up failed: {line!r}\n{proc.stderr.read()}")
    return json.loads((data_dir / "cluster.json").read_text())


def stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("cluster up did not stop within 90 s")
    assert proc.returncode == 0, err
    return err


def terminate(p: subprocess.Popen, timeout_s: float = 60) -> None:
    """SIGTERM (a node flushes and stops cleanly), then SIGKILL if it takes too long."""
    if p.poll() is not None:
        return
    p.terminate()
    try:
        p.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        p.kill()


def collection(seed_port: int, host: str = HOST):
    cluster = Cluster(f"couchbase://{host}:{seed_port}",
                      ClusterOptions(PasswordAuthenticator(USERNAME, PASSWORD)))
    return cluster, cluster.bucket("default").default_collection()


@pytest.mark.timeout(300)
def test_three_nodes_sdk_replicas_and_restart(tmp_path):
    base = free_base()
    proc = cluster_up(tmp_path, base)
    try:
        info = wait_up(proc, tmp_path)
        assert [n["id"] for n in info["nodes"]] == [0, 1, 2]
        assert info["bucket"]["replicas"] == 1
        assert info["map_nodes"] == [0, 1, 2]
        # Bootstrapped from the last node alone, the SDK routes to all three.
        cluster, col = collection(base + 20)
        for i in range(300):
            col.upsert(f"doc{i}", {"i": i})
        for i in range(300):
            assert col.get(f"doc{i}").content_as[dict] == {"i": i}
        deadline = time.time() + 20
        for i in range(300):
            while True:
                try:
                    r = col.get_any_replica(f"doc{i}")
                    if r.content_as[dict] == {"i": i}:
                        break
                except CouchbaseException:
                    pass
                assert time.time() < deadline, f"replica of doc{i}"
                time.sleep(0.05)
        # Durable writes at each of the SDK's levels: acknowledged only once the replica
        # holds them. It holds the prepare then; its commit leaves the active when the
        # answer does, so a replica read racing it may still see the key absent (as on
        # Couchbase Server): the read is retried for up to 2 s.
        levels = [DurabilityLevel.MAJORITY,
                  DurabilityLevel.MAJORITY_AND_PERSIST_TO_ACTIVE,
                  DurabilityLevel.PERSIST_TO_MAJORITY]
        for i in range(30):
            key = f"durable{i}"
            col.upsert(key, {"d": i}, UpsertOptions(
                durability=ServerDurability(levels[i % 3]),
                timeout=timedelta(seconds=10)))
            until = time.time() + 2
            while True:
                replicas = [r for r in col.get_all_replicas(key) if r.is_replica]
                if replicas or time.time() > until:
                    break
                time.sleep(0.01)
            assert [r.content_as[dict] for r in replicas] == [{"d": i}], key
        # The CLI's smart client, bootstrapped from the last node: routed by the map.
        seeds = f"127.0.0.1:{base + 20}"
        kv = [str(sluice_binary()), "kv", "--seeds", seeds]

        def cli(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(kv + list(args), capture_output=True, text=True, timeout=60)
        for i in range(20):
            out = cli("set", f"cli{i}", f'{{"c":{i}}}', "--durability", "majority")
            assert out.returncode == 0 and out.stdout.startswith("cas="), out
            assert col.get(f"cli{i}").content_as[dict] == {"c": i}
            out = cli("get", f"cli{i}", "--replica", "0")
            assert out.returncode == 0 and out.stdout.strip() == f'{{"c":{i}}}', out
        assert cli("delete", "cli0").returncode == 0
        missing = cli("get", "cli0")
        assert missing.returncode == 1 and "not found" in missing.stderr, missing
        cluster.close()
    finally:
        err = stop(proc)
    assert err.count("stopped (exit status: 0)") == NODES, err
    for n in info["nodes"]:
        log = open(f"{n['data_dir']}/server.log").read()
        assert "stopped cleanly" in log

    # The same directory: the same three nodes, with their data.
    proc = cluster_up(tmp_path, base)
    try:
        wait_up(proc, tmp_path)
        cluster, col = collection(base + 10)
        for i in range(300):
            assert col.get(f"doc{i}").content_as[dict] == {"i": i}
        cluster.close()
    finally:
        stop(proc)
