"""Fault tests over node processes on loopback: `sluice cluster up` with three nodes and one
replica, auto-failover after 2 s, a node killed with SIGKILL or stopped with SIGSTOP.

* test_kill9_auto_failover_keeps_acknowledged_durable_writes: the Python SDK writes at
  durability majority without pause; node 1 (which holds actives, as every node does) is
  killed. The leader fails it over on its own, the SDK carries on with the new map, and every
  write the SDK saw acknowledged is read back with its value.
* test_sigstop_node_answers_nothing_and_is_failed_over: a node frozen with SIGSTOP still
  accepts TCP connections (its kernel does) but answers nothing: it is failed over all the
  same, and the SDK writes and reads through the two others.
* test_gocbcore_dcp_client_rolls_back_across_failover: gocbcore's DCP agent (a client written
  by others, see test_dcp_gocbcore.py) follows the cluster through its map and receives
  writes that node 2's replicas never got (node 2 is frozen); node 1 is killed and failed
  over by hand (`sluice failover`), and the client's second run resumes on the promoted
  replicas. Rollbacks happen exactly in the vbuckets where the client is past the point the
  new active's history shares with the old, go back no further than needed, and what the
  client rebuilds equals what the cluster holds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Dict, List, Optional, Set

import pytest
from couchbase.durability import DurabilityLevel, ServerDurability
from couchbase.exceptions import CouchbaseException, DocumentNotFoundException
from couchbase.options import UpsertOptions

import admin_http
from conftest import PASSWORD, USERNAME, sluice_binary
from mcbin import kv_connect, vbucket_of
from test_cluster_up import collection, free_base, stop, wait_up
from test_dcp_gocbcore import (FOREVER, Client, all_vb_seqnos, expect_ok, fail_if,
                               resume_to_targets)

NODES = 3
VBS = 64
AUTO_FAILOVER_S = 2


def cluster_up(data_dir, base: int, auto_failover_s: int = AUTO_FAILOVER_S,
               encryption: str = "control") -> subprocess.Popen:
    return subprocess.Popen(
        [str(sluice_binary()), "cluster", "up", "--nodes", str(NODES), "--replicas", "1",
         "--data-dir", str(data_dir), "--base-port", str(base), "--vbuckets", str(VBS),
         "--memory-quota-mb", "128", "--auto-failover-timeout", str(auto_failover_s),
         "--cluster-encryption", encryption],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def cluster_view(admin_port: int, host: str = "127.0.0.1") -> dict:
    return admin_http.get_json(f"http://{host}:{admin_port}/api/v1/cluster")


def wait_failed_over(admin_port: int, node: int, timeout_s: float = 40,
                     host: str = "127.0.0.1") -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            view = cluster_view(admin_port, host)
            status = {n["id"]: n["status"] for n in view["nodes"]}
            if node not in (view["map_nodes"] or []) and status.get(node) == "failed_over":
                return view
        except OSError:
            pass
        assert time.monotonic() < deadline, f"node {node} was not failed over in {timeout_s}s"
        time.sleep(0.2)


def fail_over_by_hand(admin_port: int, node: int) -> dict:
    """`sluice failover NODE`, then waits until the cluster shows it failed over."""
    out = subprocess.run([str(sluice_binary()), "failover", str(node), "--admin",
                          f"127.0.0.1:{admin_port}"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"node {node} failed over" in out.stdout, out.stdout
    return wait_failed_over(admin_port, node)


class SdkWriter(threading.Thread):
    """Upserts new keys one after another until stopped, recording what was acknowledged
    and every error by type. Errors are expected while a node is down (timeouts, ambiguous
    outcomes, durability impossible on vbuckets that lost their replica)."""

    def __init__(self, col, prefix: str, durable: bool, vbuckets: Optional[Set[int]] = None):
        super().__init__(daemon=True)
        self.col, self.prefix, self.durable = col, prefix, durable
        self.vbuckets = vbuckets  # only keys of these vbuckets (None: any)
        self.acked: Dict[str, dict] = {}
        self.attempted: List[str] = []
        self.errors: Counter = Counter()
        self.stop_ev = threading.Event()

    def run(self) -> None:
        opts = UpsertOptions(timeout=timedelta(seconds=3))
        if self.durable:
            opts = UpsertOptions(durability=ServerDurability(DurabilityLevel.MAJORITY),
                                 timeout=timedelta(seconds=3))
        i = 0
        while not self.stop_ev.is_set():
            key, value = f"{self.prefix}{i}", {"n": i}
            i += 1
            if self.vbuckets is not None and vbucket_of(key.encode(), VBS) not in self.vbuckets:
                continue
            self.attempted.append(key)
            try:
                self.col.upsert(key, value, opts)
                self.acked[key] = value
            except CouchbaseException as e:
                self.errors[type(e).__name__] += 1
                time.sleep(0.02)

    def wait_acked(self, n: int, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.acked) < n:
            assert self.is_alive(), "the writer stopped"
            assert time.monotonic() < deadline, \
                f"only {len(self.acked)} of {n} writes acknowledged; errors {self.errors}"
            time.sleep(0.05)

    def finish(self) -> None:
        self.stop_ev.set()
        self.join(timeout=30)


def read_back(col, acked: Dict[str, dict]) -> List[str]:
    problems = []
    for key, value in acked.items():
        deadline = time.monotonic() + 20
        while True:
            try:
                got = col.get(key).content_as[dict]
                if got != value:
                    problems.append(f"{key}: acknowledged {value}, read {got}")
                break
            except DocumentNotFoundException:
                problems.append(f"{key}: acknowledged {value}, now missing")
                break
            except CouchbaseException as e:  # the SDK still learning the new map
                if time.monotonic() > deadline:
                    problems.append(f"{key}: unreadable: {e!r}")
                    break
                time.sleep(0.1)
    return problems


def wait_stopped(pid: int) -> None:
    """Until every thread of `pid` is stopped (SIGSTOP takes effect asynchronously)."""
    deadline = time.monotonic() + 10
    while True:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        if all(s == "T" for s in states):
            return
        assert time.monotonic() < deadline, f"pid {pid} not stopped: {states}"
        time.sleep(0.01)


def keys_in(vbuckets, prefix: str, count: int) -> List[str]:
    """The first `count` keys `<prefix><n>` that hash to one of `vbuckets`."""
    keys, n = [], 0
    while len(keys) < count:
        k = f"{prefix}{n}"
        n += 1
        if vbucket_of(k.encode(), VBS) in vbuckets:
            keys.append(k)
    return keys


def pid_of(info: dict, node: int) -> int:
    return next(n["pid"] for n in info["nodes"] if n["id"] == node)


@pytest.mark.timeout(300)
def test_kill9_auto_failover_keeps_acknowledged_durable_writes(tmp_path):
    base = free_base()
    proc = cluster_up(tmp_path, base)
    try:
        info = wait_up(proc, tmp_path)
        cluster, col = collection(base)
        writer = SdkWriter(col, "d", durable=True)
        writer.start()
        writer.wait_acked(200)
        os.kill(pid_of(info, 1), signal.SIGKILL)
        killed_at = len(writer.acked)
        view = wait_failed_over(base + 1, 1)
        assert view["map_nodes"] == [0, 2], view
        # The writer carries on with the new map: vbuckets with both copies on nodes 0 and 2
        # still take durable writes.
        writer.wait_acked(killed_at + 100)
        writer.finish()
        problems = read_back(col, writer.acked)
        fail_if(problems, "acknowledged durable writes after kill -9 and failover")
        print(f"kill -9: {len(writer.acked)} durable writes acknowledged of "
              f"{len(writer.attempted)}; errors {dict(writer.errors)}")
        cluster.close()
    finally:
        err = stop(proc)
    assert "node 1 exited" in err, err


@pytest.mark.timeout(300)
def test_sigstop_node_answers_nothing_and_is_failed_over(tmp_path):
    base = free_base()
    proc = cluster_up(tmp_path, base)
    frozen = None
    try:
        info = wait_up(proc, tmp_path)
        cluster, col = collection(base)
        # A direct connection to node 2, and keys whose active copy it holds.
        conn = kv_connect(base + 20, USERNAME, PASSWORD)
        frozen = pid_of(info, 2)
        os.kill(frozen, signal.SIGSTOP)
        wait_stopped(frozen)
        conn.sock.settimeout(1.0)
        with pytest.raises(OSError):
            conn.call(0x0a)  # NOOP: the frozen node never answers
        view = wait_failed_over(base + 1, 2)
        assert view["map_nodes"] == [0, 1], view
        # The SDK works on with the two others (promoted vbuckets included).
        for i in range(200):
            col.upsert(f"s{i}", {"s": i}, UpsertOptions(timeout=timedelta(seconds=10)))
        assert read_back(col, {f"s{i}": {"s": i} for i in range(200)}) == []
        cluster.close()
        conn.close()
    finally:
        if frozen is not None:
            os.kill(frozen, signal.SIGCONT)
        stop(proc)


def durable_writes_that_wait(col, vbuckets: List[int], count: int) -> List[str]:
    """Durable (majority) upserts of `count` new keys in `vbuckets`, all at once, each with
    a 2 s timeout; for vbuckets whose replica is frozen they wait as prepares and are
    aborted. Returns the keys; fails if any was acknowledged."""
    keys = keys_in(vbuckets, "p", count)
    opts = UpsertOptions(durability=ServerDurability(DurabilityLevel.MAJORITY),
                         timeout=timedelta(seconds=2))
    outcomes: Dict[str, str] = {}

    def one(k: str) -> None:
        try:
            col.upsert(k, {"pending": k}, opts)
            outcomes[k] = "acknowledged"
        except CouchbaseException as e:
            outcomes[k] = type(e).__name__

    threads = [threading.Thread(target=one, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    acked = [k for k, o in outcomes.items() if o == "acknowledged"]
    assert not acked, f"durable writes acknowledged without their frozen replica: {acked}"
    print("durable writes that waited on the frozen replica:", Counter(outcomes.values()))
    return keys


def vbucket_map(admin_port: int) -> List[List[int]]:
    """Each vbucket's chain as server indexes, from the map the admin port serves."""
    url = f"http://127.0.0.1:{admin_port}/pools/default/b/default"
    m = admin_http.get_json(url)["vBucketServerMap"]
    ports = [int(s.rsplit(":", 1)[1]) for s in m["serverList"]]
    return [[ports[i] if i >= 0 else -1 for i in chain] for chain in m["vBucketMap"]]


@pytest.mark.timeout(420)
def test_gocbcore_dcp_client_rolls_back_across_failover(tmp_path):
    """Node 2 is frozen while node 1 takes writes for vbuckets replicated to node 2, and the
    DCP client receives them from node 1. Node 1 is then killed, node 2 thawed, and node 1
    failed over by hand (`sluice failover`): node 2's replicas, which never got all of those
    writes, become active on a new branch, so the client must roll back there, and only as
    far as needed.

    With sync writes in flight: while node 2 is frozen, durable writes to those vbuckets
    wait as prepares on node 1 (their majority needs node 2) until they time out and are
    aborted; the client, streaming from node 1 meanwhile, must never see them, nor may
    they exist afterwards. And a durable writer runs across the kill and the failover:
    whatever it was told is safe reads back, and the client's final state matches the
    cluster's key by key (no prepare or aborted write shows as a mutation)."""
    base = free_base()
    proc = cluster_up(tmp_path, base, auto_failover_s=0)
    frozen = None
    try:
        info = wait_up(proc, tmp_path)
        cluster, col = collection(base)
        col.upsert_multi({f"a{i}": {"a": i} for i in range(3000)})
        chains = vbucket_map(base + 1)
        node1, node2 = base + 10, base + 20
        behind = [vb for vb, c in enumerate(chains) if c == [node1, node2]]
        assert behind, chains
        keys = keys_in(behind, "x", 600)
        # The client connects to every node and takes the preload; then node 2 freezes
        # (after its replicas caught up), and the client gets node 1's new writes alone.
        client = Client(tmp_path / "client", base)
        p1 = client.start(stop_after=3600, until={vb: FOREVER for vb in range(VBS)},
                          timeout_s=120)
        deadline = time.monotonic() + 60
        while client.items_written() < 3000:
            assert p1.poll() is None and time.monotonic() < deadline, "preload not streamed"
            time.sleep(0.05)
        time.sleep(1.0)
        frozen = pid_of(info, 2)
        os.kill(frozen, signal.SIGSTOP)
        # 12 MB: more than the 6.4 MB flow-control window node 1's producer may send to the
        # frozen replica (5 % of the 128 MiB quota) without acks, and more than the socket
        # buffers hold, so node 2 cannot have them all when it wakes up.
        pad = "y" * 20_000
        col.upsert_multi({k: {"x": k, "pad": pad} for k in keys})
        pending = durable_writes_that_wait(col, behind, 40)
        r1 = client.finish(p1, 120)
        expect_ok(r1, "first run")
        saved = client.state()
        # Durable writes in flight when node 1 dies: to vbuckets node 1 and node 0 hold (node
        # 2, frozen, would hold every write back), so node 0 holds prepares at the kill.
        with_node0 = {vb for vb, c in enumerate(chains) if sorted(c) == sorted([base, node1])}
        writer = SdkWriter(col, "q", durable=True, vbuckets=with_node0)
        writer.start()
        writer.wait_acked(100)
        os.kill(pid_of(info, 1), signal.SIGKILL)
        os.kill(frozen, signal.SIGCONT)
        frozen = None
        view = fail_over_by_hand(base + 1, 1)
        col.upsert_multi({f"b{i}": {"b": i} for i in range(500)})
        # (Its vbuckets have no replica left now: durable writes to them are impossible.)
        writer.finish()
        fail_if(read_back(col, writer.acked), "durable writes across the failover")

        # Where every vbucket is now, and where each new active's history branched.
        ports = {0: base, 2: base + 20}
        targets: Dict[int, int] = {}
        branch: Dict[int, int] = {}
        for node in view["map_nodes"]:
            with kv_connect(ports[node], USERNAME, PASSWORD) as conn:
                active = all_vb_seqnos(conn)
                targets.update(active)
                for vb in active:
                    uuid, seqno = conn.failover_log(vb)[0]
                    # A vbucket still on the client's branch shares all of its history.
                    same = uuid == saved.get(vb, {}).get("vbuuid")
                    branch[vb] = active[vb] if same else seqno
        assert sorted(targets) == list(range(VBS)), targets

        r2, rp = resume_to_targets(client, targets, saved, branch, VBS,
                                   "second run (after kill -9 and failover)")
        rolled = {rb["vb"] for rb in rp.rollbacks}
        assert rolled and rolled <= set(behind), (rolled, behind)

        keys_all = ([f"a{i}" for i in range(3000)] + keys + [f"b{i}" for i in range(500)]
                    + pending + writer.attempted)
        # The prepares that waited on frozen node 2 were never visible: not to the client
        # streaming from node 1 while they waited, nor after (aborted, so absent).
        shown = sorted({e["key"] for e in client.events() if e.get("key") in set(pending)})
        assert not shown, f"the DCP client saw writes that were never committed: {shown[:10]}"
        problems = []
        for k in keys_all:
            try:
                truth = col.get(k).content_as[dict]
            except DocumentNotFoundException:
                truth = None
            it = rp.final.get(k)
            if truth is not None:
                if it is None or it.kind != "mutation" or json.loads(it.value) != truth:
                    problems.append(f"{k}: cluster holds {truth}, client's last event {it}")
            elif it is not None and it.kind == "mutation":
                problems.append(f"{k}: absent in the cluster, client's last event {it}")
            if k in pending and truth is not None:
                problems.append(f"{k}: a durable write aborted on node 1 exists: {truth}")
        fail_if(problems, "client state vs cluster after failover")
        print(f"failover: {len(rp.rollbacks)} rollbacks, {len(rolled)} of {len(behind)} "
              f"vbuckets replicated to the frozen node, "
              f"run 1 {r1.summary}, run 2 {r2.summary}")
        cluster.close()
    finally:
        if frozen is not None:
            os.kill(frozen, signal.SIGCONT)
        stop(proc)
