"""A node that crashes and comes back before anyone fails it over must not lose the durable
writes its replicas acknowledged.

Durability majority acknowledges a write once the active and enough replicas hold it in
memory; the active's disk may not have it yet. The nemesis found the hole: node 0 killed
with SIGKILL and restarted within the auto-failover timeout came back with its disk's
(shorter) history, served it, and rolled its replicas back to it: acknowledged writes gone.

The test makes the gap certain instead of lucky: node 1 is restarted (cleanly) with a 60 s
flush interval, so after its first flush nothing it takes is persisted for a minute. The
Python SDK then writes at durability majority to half of node 1's active vbuckets; the test
shows node 1's persisted seqno behind its high seqno and a replica at that high seqno, kills
node 1 with SIGKILL and starts it again at once (automatic failover is off, so nothing else
moves). Then:

* the vbuckets it took writes for are handed to the replica that holds them (the map's
  active moves), and every acknowledged write reads back with its value;
* the vbuckets it took no writes for are kept (still active on node 1): no replica was ahead.

An ephemeral bucket keeps nothing across a restart, so there every vbucket node 1 took
writes for is behind after any restart, crash or not; the same test shows those writes
survive through the replicas.

With two replicas, node 2 is frozen (SIGSTOP) before the writes, so only node 0's replicas
acknowledge them. While node 2 stays frozen, node 1 holds the vbuckets node 2 replicates
(NOT_MY_VBUCKET: node 2 might hold writes nobody else has); once node 2 is thawed they are
decided, and the writes survive through node 0 even where node 2 is the first replica.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import time
from datetime import timedelta
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from couchbase.durability import DurabilityLevel, ServerDurability
from couchbase.exceptions import CouchbaseException, DocumentNotFoundException
from couchbase.options import UpsertOptions

import mcbin
from conftest import PASSWORD, USERNAME, sluice_binary
from mcbin import kv_connect, vbucket_of
from test_cluster_faults import pid_of, vbucket_map, wait_stopped
from test_cluster_up import collection, free_base, stop, terminate, wait_up

NODES = 3
VBS = 16
FLUSH_HOLD_MS = 60_000
WRITES = 200


def cluster_up(data_dir: Path, base: int, replicas: int, bucket_type: str) -> subprocess.Popen:
    return subprocess.Popen(
        [str(sluice_binary()), "cluster", "up", "--nodes", str(NODES), "--replicas",
         str(replicas), "--data-dir", str(data_dir), "--base-port", str(base), "--vbuckets",
         str(VBS), "--memory-quota-mb", "128", "--auto-failover-timeout", "0",
         "--bucket-type", bucket_type],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def spawn(info: dict, node: int, extra: List[str]) -> subprocess.Popen:
    """Starts node `node` again from its data directory (a member restarts without --join)."""
    args = list(next(n["args"] for n in info["nodes"] if n["id"] == node))
    if "--join" in args:
        i = args.index("--join")
        del args[i:i + 2]
    data_dir = Path(args[args.index("--data-dir") + 1])
    log = open(data_dir / "server.log", "a")
    return subprocess.Popen([str(sluice_binary())] + args + extra, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)


def gone(pid: int) -> bool:
    """Exited (a zombie until `cluster up`, its parent, reaps it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def vb_seqnos(port: int, state: int) -> Dict[int, int]:
    """GET_ALL_VB_SEQNOS for vbuckets in `state` (1 active, 2 replica)."""
    with kv_connect(port, USERNAME, PASSWORD) as c:
        r = c.call(mcbin.OP_GET_ALL_VB_SEQNOS, extras=struct.pack(">I", state))
        assert r.status == mcbin.SUCCESS, r
        return dict(struct.unpack(">HQ", r.value[i:i + 10]) for i in range(0, len(r.value), 10))


def persisted(port: int, vb: int) -> int:
    with kv_connect(port, USERNAME, PASSWORD) as c:
        uuid = c.failover_log(vb)[0][0]
        status, obs = c.observe_seqno(vb, uuid)
        assert status == mcbin.SUCCESS and obs is not None, status
        return obs.persisted


def get_status(port: int, key: bytes) -> int:
    with kv_connect(port, USERNAME, PASSWORD) as c:
        return c.get(key, vb=vbucket_of(key, VBS)).status


def read(col, key: str):
    """The document's content, or "missing"."""
    try:
        return col.get(key).content_as[dict]
    except DocumentNotFoundException:
        return "missing"


def keys_in(vbs: List[int], n: int, prefix: str) -> List[str]:
    keys, i = [], 0
    while len(keys) < n:
        k = f"{prefix}{i}"
        i += 1
        if vbucket_of(k.encode(), VBS) in vbs:
            keys.append(k)
    return keys


def wait_for(what: str, check, timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    last: Optional[BaseException] = None
    while time.monotonic() < deadline:
        try:
            got = check()
            if got:
                return got
        except (OSError, CouchbaseException, mcbin.ProtocolError) as e:
            last = e
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what} (last error: {last!r})")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("bucket_type,replicas",
                         [("couchbase", 1), ("couchbase", 2), ("ephemeral", 1)])
def test_a_crashed_active_restarted_before_failover_keeps_acknowledged_writes(
        tmp_path, bucket_type, replicas):
    base = free_base()
    proc = cluster_up(tmp_path, base, replicas, bucket_type)
    restarted: List[subprocess.Popen] = []
    frozen = None
    try:
        info = wait_up(proc, tmp_path)
        port = {i: base + 10 * i for i in range(NODES)}
        # Node 1 again, cleanly, with a flusher that holds off for a minute after its
        # first flush.
        os.kill(pid_of(info, 1), signal.SIGTERM)
        wait_for("node 1 to stop", lambda: gone(pid_of(info, 1)))
        restarted.append(spawn(info, 1, ["--flush-interval-ms", str(FLUSH_HOLD_MS)]))
        cluster, col = collection(base)
        chains = wait_for("node 1 back in the map", lambda: vbucket_map(base + 1))
        mine = [vb for vb, c in enumerate(chains) if c[0] == port[1]]
        assert len(mine) >= 2, chains
        written, untouched = mine[::2], mine[1::2]
        durable = UpsertOptions(durability=ServerDurability(DurabilityLevel.MAJORITY),
                                timeout=timedelta(seconds=10))
        # The node serves and its replicas stream: durable writes to the vbuckets under test
        # succeed (and give the flusher its one immediate round). The others take no write
        # from now on: nothing of theirs is unpersisted.
        for k in keys_in(written, len(written) * 3, "warm"):
            wait_for(f"a durable write of {k}", lambda k=k: col.upsert(k, {"w": k}, durable)
                     or True)
        time.sleep(0.5)
        if replicas == 2:
            frozen = pid_of(info, 2)
            os.kill(frozen, signal.SIGSTOP)
            wait_stopped(frozen)
        acked: Dict[str, dict] = {}
        for k in keys_in(written, WRITES, "k"):
            value = {"k": k, "n": len(acked)}
            col.upsert(k, value, durable)
            acked[k] = value

        # The fault is real: node 1 has not persisted what it acknowledged, and node 0
        # holds all of it wherever it is a replica (with two replicas it is one of them,
        # and the only one that acknowledged).
        high = vb_seqnos(port[1], 1)
        if bucket_type == "couchbase":  # an ephemeral bucket keeps nothing anyway
            behind = {vb: (persisted(port[1], vb), high[vb]) for vb in written}
            assert all(p < h for p, h in behind.values()), f"persisted vs high: {behind}"
        on0 = vb_seqnos(port[0], 2)
        via0 = [vb for vb in written if port[0] in chains[vb][1:]]
        assert via0 and all(on0[vb] >= high[vb] for vb in via0), (on0, high, via0)
        if replicas == 1:
            for vb in written:
                rep = chains[vb][1]
                got = vb_seqnos(rep, 2)[vb]
                assert got >= high[vb], f"vb {vb}: replica at {got}, active at {high[vb]}"

        victim = restarted[-1]
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        restarted.append(spawn(info, 1, []))

        if replicas == 2:
            # Node 2 answers nothing: the vbuckets it replicates stay held on node 1.
            held = [vb for vb in mine if port[2] in chains[vb]]
            assert held, chains
            key = keys_in([held[0]], 1, "probe")[0].encode()
            wait_for("node 1 to serve its KV port",
                     lambda: get_status(port[1], key) in (mcbin.NOT_MY_VBUCKET,
                                                          mcbin.KEY_ENOENT, mcbin.SUCCESS))
            time.sleep(2.0)
            assert get_status(port[1], key) == mcbin.NOT_MY_VBUCKET, \
                "a vbucket a silent replica holds was served before that replica answered"
            os.kill(frozen, signal.SIGCONT)
            frozen = None

        # Every acknowledged write reads back (the SDK retries NOT_MY_VBUCKET while the
        # vbuckets are held and follows the map when they move).
        problems = []
        for k, v in acked.items():
            got = wait_for(f"reading {k}", lambda k=k: read(col, k), 30)
            if got != v:
                problems.append(f"{k}: acknowledged {v}, read {got}")
        assert not problems, f"{len(problems)} acknowledged writes lost: {problems[:10]}"

        def decided():
            m = vbucket_map(base + 1)
            moved = all(m[vb][0] != port[1] for vb in written)
            kept = all(m[vb][0] == port[1] for vb in untouched)
            return m if moved and kept else None
        after = wait_for("written vbuckets handed over, the others kept", decided)

        # Node 1 serves the vbuckets it kept, and writes go on everywhere.
        for k in keys_in(mine, len(mine) * 2, "after"):
            wait_for(f"a durable write of {k}", lambda k=k: col.upsert(k, {"a": k}, durable)
                     or True)
        print(f"{bucket_type}, {replicas} replica(s): {len(written)} vbuckets handed over "
              f"{[(vb, chains[vb][0], after[vb][0]) for vb in written]}, "
              f"{len(untouched)} kept; {len(acked)} acknowledged writes all read back")
        cluster.close()
    finally:
        if frozen is not None:
            os.kill(frozen, signal.SIGCONT)
        for p in restarted:
            terminate(p)
        stop(proc)
