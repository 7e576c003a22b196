"""The index and query services on a three-node cluster (`sluice cluster up`), through the
Couchbase Python SDK.

The cluster's index catalog is replicated metadata, which places each index on
`num_replica` + 1 nodes; each copy streams every vbucket from the node the map makes its
active, and the map lists the query service (`n1ql`) on every node, so the SDK may send a
statement to any of them (a node without a copy scans one on another node).

- test_three_nodes_indexes_hold_every_vbucket (1 and 2 replicas): the query index manager
  creates, lists and drops indexes; REQUEST_PLUS queries with named parameters answer
  exactly what a Python model of the data says, for random documents and random queries
  with writes, deletes and expirations in between (`QUERY_SEED=<n>` replays); the four
  indexes, one copy each, are spread over the three nodes, every node answers alike
  (from its own copy or another node's), and a dropped index leaves every node.
- test_failover_rolls_back_only_the_vbuckets_that_need_it: node 2 is frozen while node 1
  takes writes for vbuckets replicated to node 2, and node 0's copy of the index applies them.
  (An AT_PLUS query with the writes' mutation tokens shows it, while node 2 is frozen.)
  The indexes have 2 replicas, so every node holds a copy; node 2's, thawed, answers
  alike afterwards.
  Node 1 is killed while a writer goes on, node 2 thawed, and node 1 failed over by hand:
  node 2's replicas, which are shown to lack those writes, become active on a new branch.
  The index clears and rebuilds exactly the vbuckets whose new active does not have what
  it applied (never the others), and a REQUEST_PLUS query then matches what KV holds,
  key by key.
- test_rebalance_moves_the_streams_without_rebuilding: node 2 is rebalanced out under
  writes; node 0's copy of the index (it has a copy on every node) follows its vbuckets'
  streams to their new actives (takeovers keep the history, so nothing is rebuilt) and
  REQUEST_PLUS answers what KV holds.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import time
import urllib.request
from datetime import timedelta
from types import SimpleNamespace
from typing import Dict, List

import pytest
from couchbase.auth import PasswordAuthenticator
from couchbase.cluster import Cluster
from couchbase.exceptions import CouchbaseException, DocumentNotFoundException
from couchbase.management.options import (CreatePrimaryQueryIndexOptions,
                                          CreateQueryIndexOptions)
from couchbase.mutation_state import MutationState
from couchbase.options import ClusterOptions, ClusterTimeoutOptions, QueryOptions

import admin_http
from conftest import PASSWORD, USERNAME, sluice_binary
from mcbin import kv_connect, vbucket_of
from test_cluster_faults import (SdkWriter, fail_over_by_hand, keys_in, pid_of, vbucket_map,
                                 wait_stopped)
from test_cluster_rebalance import RETRYABLE, rebalance
from test_cluster_up import free_base, stop, wait_up
from test_dcp_gocbcore import all_vb_seqnos, fail_if
from test_python_query import (check_random_queries, drop_expired, random_doc,
                               random_writes, raw_query, rows)

VBS = 64


def cluster_up(data_dir, base: int, replicas: int) -> subprocess.Popen:
    return subprocess.Popen(
        [str(sluice_binary()), "cluster", "up", "--nodes", "3", "--replicas", str(replicas),
         "--data-dir", str(data_dir), "--base-port", str(base), "--vbuckets", str(VBS),
         "--memory-quota-mb", "128", "--auto-failover-timeout", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def connect(base: int) -> Cluster:
    opts = ClusterOptions(
        PasswordAuthenticator(USERNAME, PASSWORD),
        timeout_options=ClusterTimeoutOptions(bootstrap_timeout=timedelta(seconds=10),
                                              kv_timeout=timedelta(seconds=5),
                                              query_timeout=timedelta(seconds=60),
                                              management_timeout=timedelta(seconds=60)),
        enable_dns_srv=False)
    c = Cluster(f"couchbase://127.0.0.1:{base}", opts)
    c.wait_until_ready(timedelta(seconds=30))
    return c


def query_at(admin_port: int, statement: str) -> list:
    """A REQUEST_PLUS statement on one node's query service, by hand: its results."""
    status, body = raw_query(SimpleNamespace(admin_url=f"http://127.0.0.1:{admin_port}"),
                             {"statement": statement, "scan_consistency": "request_plus"})
    assert status == 200 and body["status"] == "success", (admin_port, status, body)
    return body["results"]


def index_stats(kv_port: int) -> Dict[str, str]:
    with kv_connect(kv_port, USERNAME, PASSWORD) as c:
        return c.stat("index")


def metric_lines(admin_port: int) -> List[str]:
    """The node's /metrics lines about indexes."""
    req = admin_http.request(f"http://127.0.0.1:{admin_port}/metrics")
    with urllib.request.urlopen(req, timeout=10) as r:
        return [line for line in r.read().decode().splitlines()
                if line.startswith("sluice_index_")]


def query_nodes(admin_port: int) -> List[str]:
    """The `nodesExt` entries that list the query service, as `host:mgmt`."""
    cfg = admin_http.get_json(f"http://127.0.0.1:{admin_port}/pools/default/b/default")
    return [f"{n['hostname']}:{n['services']['mgmt']}" for n in cfg["nodesExt"]
            if "n1ql" in n["services"]]


@pytest.mark.timeout(420)
@pytest.mark.parametrize("replicas", [1, 2])
def test_three_nodes_indexes_hold_every_vbucket(tmp_path, replicas):
    seed = int(os.environ.get("QUERY_SEED", random.randrange(1 << 30)))
    print(f"QUERY_SEED={seed}")
    rng = random.Random(seed)
    base = free_base()
    proc = cluster_up(tmp_path, base, replicas)
    try:
        wait_up(proc, tmp_path)
        # Every node lists the query service on every node, once it serves the cluster's
        # map (a node serves its own one-node map until then).
        admins = [base + 1, base + 11, base + 21]
        for admin in admins:
            deadline = time.monotonic() + 20
            while (listed := query_nodes(admin)) != [f"127.0.0.1:{a}" for a in admins]:
                assert time.monotonic() < deadline, (admin, listed)
                time.sleep(0.1)
        cluster = connect(base)
        coll = cluster.bucket("default").default_collection()
        mgr = cluster.query_indexes()
        mgr.create_primary_index("default")
        mgr.create_index("default", "by_n", ["n"])
        mgr.create_index("default", "by_s_n", ["s", "n"])
        mgr.create_index("default", "by_g_partial", ["g"],
                         CreateQueryIndexOptions(condition="n > 0"))
        listed = {i.name: i.state for i in mgr.get_all_indexes("default")}
        assert listed == {"#primary": "online", "by_n": "online", "by_s_n": "online",
                          "by_g_partial": "online"}, listed

        # Documents in every vbucket, so on every node's actives.
        model: Dict[str, dict] = {}
        for i in range(900):
            doc = random_doc(rng)
            model[f"k{i}"] = doc
        coll.upsert_multi(model)
        assert {vbucket_of(k.encode(), VBS) for k in model} == set(range(VBS))
        got = rows(cluster, "SELECT COUNT(*) AS c FROM default")
        assert got == [{"c": len(model)}], got
        got = rows(cluster, "SELECT META().id AS id, n FROM default WHERE s = $s AND n >= $lo "
                            "ORDER BY n DESC, META().id LIMIT 9", s="banana", lo=-5)
        want = sorted(((k, d["n"]) for k, d in model.items()
                       if d.get("s") == "banana" and "n" in d and d["n"] >= -5),
                      key=lambda x: (-x[1], x[0]))[:9]
        assert [(r["id"], r["n"]) for r in got] == want

        expiring: Dict[str, float] = {}
        kinds = {"covered": 0, "fetched": 0}
        for round_ in range(6):
            random_writes(rng, coll, model, expiring, writes=80, keys=1200)
            if round_ % 3 == 2:
                drop_expired(model, expiring)
            check_random_queries(cluster, rng, model, expiring,
                                 f"QUERY_SEED={seed} round {round_}", kinds)
        # Covered scans read only this node's copy of the index; the others fetch
        # documents from every node.
        print(f"statements: {kinds}")
        assert kinds["covered"] > 0 and kinds["fetched"] > 0, f"QUERY_SEED={seed} {kinds}"
        # The stats count over the whole cluster: nothing is left to apply. One copy of
        # each index, so one node's stats show by_n.
        holders = [s for s in (index_stats(base + 10 * i) for i in range(3))
                   if "index:by_n:items_remaining" in s]
        assert len(holders) == 1, holders
        assert int(holders[0]["index:by_n:items_remaining"]) == 0, holders
        # Every node answers alike, from its own copy or another node's.
        uncertain = set(expiring)
        want = sorted(k for k, d in model.items() if d.get("n", -1) > 3)
        for admin in admins:
            got = query_at(admin, "SELECT RAW META().id FROM default WHERE n > 3 "
                                  "ORDER BY META().id")
            assert [k for k in got if k not in uncertain] == \
                [k for k in want if k not in uncertain], admin

        mgr.drop_index("default", "by_s_n")
        assert {i.name for i in mgr.get_all_indexes("default")} == \
            {"#primary", "by_n", "by_g_partial"}
        for admin in admins:
            names = query_at(admin, "SELECT RAW name FROM system:indexes ORDER BY name")
            assert names == ["#primary", "by_g_partial", "by_n"], (admin, names)
        cluster.close()
    finally:
        stop(proc)


def kv_truth(coll, keys) -> Dict[str, dict]:
    """What KV holds for each of `keys` (a key it does not hold is left out), each read
    again for up to 20 s while the SDK cannot reach its vbucket (a failover in progress)."""
    truth: Dict[str, dict] = {}
    for k in keys:
        deadline = time.monotonic() + 20
        while True:
            try:
                truth[k] = coll.get(k).content_as[dict]
                break
            except DocumentNotFoundException:
                break
            except CouchbaseException:
                assert time.monotonic() < deadline, k
                time.sleep(0.1)
    return truth


def replica_seqnos(kv_port: int) -> Dict[int, int]:
    """The high seqno of every replica vbucket on the node (STAT vbucket-seqno)."""
    with kv_connect(kv_port, USERNAME, PASSWORD) as c:
        states = c.stat("vbucket")
        seqnos = c.stat("vbucket-seqno")
    out = {}
    for k, state in states.items():
        m = re.fullmatch(r"vb_(\d+)", k)
        if m and state == "replica":
            out[int(m.group(1))] = int(seqnos[f"vb_{m.group(1)}:high_seqno"])
    return out


def rolled_back_vbuckets(data_dir) -> List[int]:
    """The vbuckets node 0's index log says it cleared after a rollback."""
    log = (data_dir / "node-0" / "server.log").read_text(errors="replace")
    return sorted({int(m.group(1)) for m in re.finditer(
        r"index vbucket rolled back.*?vb=(\d+)", log)})


@pytest.mark.timeout(420)
def test_failover_rolls_back_only_the_vbuckets_that_need_it(tmp_path):
    base = free_base()
    proc = cluster_up(tmp_path, base, 1)
    frozen = None
    try:
        info = wait_up(proc, tmp_path)
        cluster = connect(base)
        coll = cluster.bucket("default").default_collection()
        mgr = cluster.query_indexes()
        # A copy on every node: node 0's is the one that must roll back.
        mgr.create_primary_index("default", CreatePrimaryQueryIndexOptions(num_replicas=2))
        mgr.create_index("default", "by_x", ["x"], CreateQueryIndexOptions(num_replicas=2))
        coll.upsert_multi({f"a{i}": {"x": i % 50} for i in range(3000)})
        assert rows(cluster, "SELECT COUNT(*) AS c FROM default WHERE x >= 0") == [{"c": 3000}]

        chains = vbucket_map(base + 1)
        node1, node2 = base + 10, base + 20
        behind = [vb for vb, c in enumerate(chains) if c == [node1, node2]]
        assert behind, chains
        keys = keys_in(behind, "x", 600)
        time.sleep(1.0)  # node 2's replicas take the preload first
        frozen = pid_of(info, 2)
        os.kill(frozen, signal.SIGSTOP)
        wait_stopped(frozen)
        # 12 MB: more than node 1's producer may send the frozen replica without acks, and
        # more than socket buffers hold, so node 2 cannot have them all when it wakes up.
        pad = "y" * 20_000
        written = coll.upsert_multi({k: {"x": 1000 + i, "pad": pad}
                                     for i, k in enumerate(keys)})
        assert written.all_ok, written.exceptions
        # Node 0's copy of the index has them, streamed from node 1: AT_PLUS with their
        # mutation tokens, asked of node 0 by hand (the SDK may pick frozen node 2, and
        # REQUEST_PLUS would wait for node 2 to say its seqnos).
        vectors: Dict[str, list] = {}
        for r in written.results.values():
            t = r.mutation_token()
            vb = str(t.partition_id)
            if vb not in vectors or vectors[vb][0] < t.sequence_number:
                vectors[vb] = [t.sequence_number, str(t.partition_uuid)]
        status, body = raw_query(
            SimpleNamespace(admin_url=f"http://127.0.0.1:{base + 1}"),
            {"statement": "SELECT COUNT(*) AS c FROM default WHERE x >= 1000",
             "scan_consistency": "at_plus", "scan_vectors": {"default": vectors}})
        assert status == 200 and body["results"] == [{"c": len(keys)}], body
        # And the primary index's copy (no WHERE: only it covers every document), so both
        # indexes hold writes node 2 may lack and each must roll back where node 2 lags.
        status, body = raw_query(
            SimpleNamespace(admin_url=f"http://127.0.0.1:{base + 1}"),
            {"statement": "SELECT COUNT(*) AS c FROM default",
             "scan_consistency": "at_plus", "scan_vectors": {"default": vectors}})
        assert status == 200 and body["results"] == [{"c": 3000 + len(keys)}], body
        with kv_connect(node1, USERNAME, PASSWORD) as c:
            node1_high = {vb: s for vb, s in all_vb_seqnos(c).items() if vb in behind}

        # Writes go on through the failover, to the vbuckets node 0 is active for (node 2 is
        # frozen for a while; their copies never diverge, so no rollback there is expected).
        elsewhere = {vb for vb, c in enumerate(chains) if c[0] == base}
        writer = SdkWriter(coll, "w", durable=False, vbuckets=elsewhere)
        writer.start()
        writer.wait_acked(100)
        os.kill(pid_of(info, 1), signal.SIGKILL)
        os.kill(frozen, signal.SIGCONT)
        frozen = None
        time.sleep(1.0)  # node 2 reads what its socket buffers still held
        # The fault happened: node 2's copies of some of those vbuckets lack writes the
        # index applied.
        lagging = {vb for vb, s in replica_seqnos(node2).items()
                   if vb in node1_high and s < node1_high[vb]}
        assert lagging, (replica_seqnos(node2), node1_high)
        before = int(index_stats(base)["index_rebuilt_vbuckets"])
        fail_over_by_hand(base + 1, 1)
        writer.wait_acked(len(writer.acked) + 100)
        writer.finish()

        # What KV holds now, key by key, is what the index must answer.
        held = kv_truth(coll, [f"a{i}" for i in range(3000)] + keys + writer.attempted)
        truth = {k: d["x"] for k, d in held.items() if "x" in d}
        lost = [k for k in keys if k not in truth]
        assert lost, "no write was lost with node 1: the failover tested nothing"
        got = set(rows(cluster, "SELECT RAW META().id FROM default WHERE x IS VALUED"))
        problems = []
        if got - set(truth):
            problems.append(f"in the index, not in KV: {sorted(got - set(truth))[:20]}")
        if set(truth) - got:
            problems.append(f"in KV, not in the index: {sorted(set(truth) - got)[:20]}")
        fail_if(problems, "index after failover vs KV")
        got_x = {r["id"]: r["x"] for r in rows(
            cluster, "SELECT META().id AS id, x FROM default WHERE x >= 1000")}
        assert got_x == {k: v for k, v in truth.items() if v >= 1000}
        # The SDK's AT_PLUS (consistent_with a mutation token) sees a write at once.
        tokens = MutationState(coll.upsert("after", {"x": 5000}))
        got = list(cluster.query("SELECT RAW META().id FROM default WHERE x = 5000",
                                 QueryOptions(consistent_with=tokens)).rows())
        assert got == ["after"], got
        truth["after"] = 5000
        # Node 2's copy (it was frozen, then its replicas became actives) answers alike.
        for admin in (base + 1, base + 21):
            got = set(query_at(admin, "SELECT RAW META().id FROM default WHERE x IS VALUED"))
            assert got == set(truth), (admin, sorted(got ^ set(truth))[:20])

        rebuilt = int(index_stats(base)["index_rebuilt_vbuckets"]) - before
        rolled = rolled_back_vbuckets(tmp_path)
        # Every vbucket whose new active lacks what the index applied was rebuilt, and no
        # other (two indexes: each rebuilds its own entries of a vbucket).
        assert set(rolled) == lagging, (rolled, sorted(lagging))
        assert rebuilt == 2 * len(lagging), (rebuilt, sorted(lagging))
        print(f"failover: {len(lagging)} of {len(behind)} vbuckets replicated to the frozen "
              f"node lagged and were rebuilt, {len(lost)} writes lost with node 1, "
              f"{len(writer.acked)} writes by the writer, errors {dict(writer.errors)}")
        cluster.close()
    finally:
        if frozen is not None:
            os.kill(frozen, signal.SIGCONT)
        stop(proc)


@pytest.mark.timeout(420)
def test_rebalance_moves_the_streams_without_rebuilding(tmp_path):
    """`sluice rebalance --eject 2` under writes: node 2's active vbuckets move to nodes 0
    and 1 by takeover, their history intact. The index's streams follow the map, no
    vbucket is rebuilt, and a REQUEST_PLUS query matches what KV holds."""
    base = free_base()
    proc = cluster_up(tmp_path, base, 1)
    try:
        wait_up(proc, tmp_path)
        cluster = connect(base)
        coll = cluster.bucket("default").default_collection()
        # A copy on every node: node 0's streams must follow the moves.
        cluster.query_indexes().create_index("default", "by_n", ["n"],
                                             CreateQueryIndexOptions(num_replicas=2))
        coll.upsert_multi({f"a{i}": {"n": i} for i in range(2000)})
        writer = SdkWriter(coll, "w", durable=False)
        writer.start()
        writer.wait_acked(200)
        # Under the writes, the stats show the index applying them every second, and what
        # the index store holds in memory, in STAT and in /metrics.
        deadline = time.monotonic() + 10
        while int(index_stats(base)["index:by_n:changes_per_sec"]) == 0:
            assert time.monotonic() < deadline, index_stats(base)
            time.sleep(0.2)
        assert int(index_stats(base)["index_memory_write_buffer_bytes"]) > 0
        metrics = metric_lines(base + 1)
        assert any(re.fullmatch(r'sluice_index_changes_per_second\{bucket="default",'
                                r'scope="_default",collection="_default",'
                                r'index="by_n"\} \d+', m) for m in metrics), metrics
        assert any(m.startswith("sluice_index_memory_write_buffer_bytes ") for m in metrics)
        moved = [vb for vb, c in enumerate(vbucket_map(base + 1)) if c[0] == base + 20]
        assert moved
        out = rebalance(base + 1, 2)
        writer.wait_acked(len(writer.acked) + 200)
        writer.finish()
        assert set(writer.errors) <= RETRYABLE, writer.errors
        assert all(c[0] in (base, base + 10) for c in vbucket_map(base + 1))

        truth = {}
        for k in [f"a{i}" for i in range(2000)] + writer.attempted:
            try:
                truth[k] = coll.get(k).content_as[dict]["n"]
            except DocumentNotFoundException:
                pass
        assert len(truth) >= 2000 + 400
        got = {r["id"]: r["n"] for r in rows(
            cluster, "SELECT META().id AS id, n FROM default WHERE n IS VALUED")}
        assert got == truth, (sorted(set(got) ^ set(truth))[:20], out)
        stats = index_stats(base)
        assert int(stats["index_rebuilt_vbuckets"]) == 0, stats
        log = (tmp_path / "node-0" / "server.log").read_text(errors="replace")
        assert "index source stopped: the map moved its vbuckets" in log
        print(f"rebalance: {len(moved)} active vbuckets moved off node 2, "
              f"{len(writer.acked)} writes during it, errors {dict(writer.errors)}")
        cluster.close()
    finally:
        stop(proc)
