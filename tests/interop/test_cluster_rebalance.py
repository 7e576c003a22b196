"""Rebalance over node processes on loopback: a 4th `sluice server` joins a 3-node cluster
(`sluice cluster up`, one replica) and `sluice rebalance` takes it in while the Python SDK
writes at durability majority without pause; then `sluice rebalance --eject 3` takes it out
again, under the same load. No acknowledged write is lost, the SDK reaches the new node while
it is in (it holds actives), and the only errors the SDK reports are ones a caller retries
(the SDK retries NOT_MY_VBUCKET itself)."""

from __future__ import annotations

import json
import subprocess
import time
from typing import List

import pytest

from conftest import PASSWORD, USERNAME, sluice_binary
from mcbin import kv_connect
from test_cluster_faults import SdkWriter, cluster_up, cluster_view, read_back
from test_cluster_up import collection, free_base, stop, terminate, wait_up
from test_dcp_gocbcore import all_vb_seqnos, fail_if

# What a caller may see and retry: timeouts and an unknown durable outcome (a durable write
# waiting on a vbucket that a takeover moved away is answered SYNC_WRITE_AMBIGUOUS), and
# RequestCanceled: the SDK closes its connection to an ejected node with a request still in
# flight, whose outcome is then unknown. Anything else (a document error, an authentication
# error, durability impossible) fails the test.
RETRYABLE = {"AmbiguousTimeoutException", "UnAmbiguousTimeoutException",
             "DurabilitySyncWriteAmbiguousException", "TemporaryFailException",
             "RequestCanceledException"}


def rebalance(admin_port: int, *eject: int) -> str:
    args = [str(sluice_binary()), "rebalance", "--admin", f"127.0.0.1:{admin_port}"]
    for n in eject:
        args += ["--eject", str(n)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "rebalanced onto nodes" in out.stdout, out.stdout
    return out.stdout


def wait_health(port: int, proc: subprocess.Popen, timeout_s: float = 60) -> None:
    import urllib.request
    deadline = time.monotonic() + timeout_s
    while True:
        assert proc.poll() is None, f"the 4th node exited ({proc.returncode})"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return
        except OSError:
            assert time.monotonic() < deadline, "the 4th node did not come up"
            time.sleep(0.2)


def encrypted_join_args(data_dir, kv_port: int, join_port: int) -> List[str]:
    """The TLS and `--join` arguments of a node joining the `cluster up` cluster in
    `data_dir`: its members call each other over TLS (`--cluster-encryption control`), so
    the joiner serves TLS too (node 0's certificate names 127.0.0.1, as every node here
    is), trusts the cluster's CA, and joins through the member's TLS admin port (its admin
    port + 7)."""
    first = json.loads((data_dir / "cluster.json").read_text())["nodes"][0]["args"]
    if "--cluster-encryption" not in first:
        return ["--join", f"127.0.0.1:{join_port}"]
    given = {flag: first[first.index(flag) + 1]
             for flag in ("--tls-cert", "--tls-key", "--tls-ca", "--cluster-encryption")}
    return [arg for flag, value in given.items() for arg in (flag, value)] + [
        "--kv-tls-port", str(kv_port + 7), "--admin-tls-port", str(kv_port + 8),
        "--join", f"127.0.0.1:{join_port + 7}"]


def join_fourth(data_dir, base: int, join_port: int, vbuckets: int,
                auto_failover_s: int = 0, extra: List[str] = ()) -> subprocess.Popen:
    """Starts node 3 (KV on base+30, admin on base+31) joining through `join_port`, and
    waits until it answers and nodes 0-2 all list it (its admin port answers before the
    join is done, and a rebalance planned without it would have nothing to do)."""
    node3 = data_dir / "node-3"
    node3.mkdir()
    log = open(node3 / "server.log", "w")
    proc = subprocess.Popen(
        [str(sluice_binary()), "server", "--data-dir", str(node3),
         "--kv-port", str(base + 30), "--admin-port", str(base + 31),
         "--vbuckets", str(vbuckets),
         "--memory-quota-mb", "128", "--auto-failover-timeout", str(auto_failover_s)]
        + list(extra) + encrypted_join_args(data_dir, base + 30, join_port),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    wait_health(base + 31, proc)
    deadline = time.monotonic() + 60
    for port in (base + 1, base + 11, base + 21):
        while 3 not in [n["id"] for n in cluster_view(port)["nodes"]]:
            assert time.monotonic() < deadline, f"node 3 never listed by :{port}"
            time.sleep(0.1)
    return proc


@pytest.mark.timeout(420)
def test_rebalance_in_and_out_under_durable_load(tmp_path):
    # Everything between the nodes over TLS (`all`): the rebalance's builds and takeovers
    # stream from the members' TLS KV ports, as replication does.
    base = free_base()
    proc = cluster_up(tmp_path, base, auto_failover_s=0, encryption="all")
    fourth = None
    try:
        wait_up(proc, tmp_path)
        cluster, col = collection(base)
        writer = SdkWriter(col, "d", durable=True)
        writer.start()
        writer.wait_acked(300)

        fourth = join_fourth(tmp_path, base, join_port=base + 1, vbuckets=64)

        print(rebalance(base + 1))
        assert cluster_view(base + 1)["map_nodes"] == [0, 1, 2, 3]
        with kv_connect(base + 30, USERNAME, PASSWORD) as conn:
            assert len(all_vb_seqnos(conn)) >= 64 // 4 - 1, "node 3 holds its share of actives"
        # Every replication feed a node serves came in over TLS (its STAT says so).
        for port in (base, base + 10, base + 20, base + 30):
            with kv_connect(port, USERNAME, PASSWORD) as conn:
                feeds = {k: v for k, v in conn.stat("dcp").items()
                         if k.startswith("eq_dcpq:replication:") and k.endswith(":ssl")}
            assert feeds and set(feeds.values()) == {"true"}, (port, feeds)
        acked_in = len(writer.acked)
        writer.wait_acked(acked_in + 300)
        # The SDK reaches every node, the new one included.
        fail_if(read_back(col, dict(writer.acked)), "after the rebalance in")

        print(rebalance(base + 21, 3))
        view = cluster_view(base + 1)
        assert view["map_nodes"] == [0, 1, 2], view
        assert 3 not in [n["id"] for n in view["nodes"]], view
        acked_out = len(writer.acked)
        writer.wait_acked(acked_out + 300)
        writer.finish()

        fail_if(read_back(col, writer.acked), "acknowledged durable writes after in and out")
        unexpected = {e: n for e, n in writer.errors.items() if e not in RETRYABLE}
        assert not unexpected, f"errors that are not retryable: {unexpected}"
        print(f"rebalance in/out: {len(writer.acked)} durable writes acknowledged of "
              f"{len(writer.attempted)}; errors {dict(writer.errors)}")
        cluster.close()
    finally:
        if fourth is not None:
            terminate(fourth)
        stop(proc)
