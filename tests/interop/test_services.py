"""Per-node services (`sluice cluster up --services N=LIST`, `sluice server --services`), on a
three-node cluster: node 0 runs every service, node 1 `kv` only, node 2 `index,query` only.

- test_each_node_serves_only_its_services:
  - `/api/v1/cluster` lists each node's services;
  - the bucket map every node serves gives vbuckets to nodes 0 and 1 only (`serverList`,
    `vBucketMap`), lists all three in `nodesExt`, node 1 without `n1ql` and node 2
    without `kv`;
  - the Python SDK writes and reads through the data nodes;
  - an index with `num_replica` 1 lands on the two index nodes (0 and 2), never on node 1
    (its STAT `index` has no entry); `num_replica` 2 is refused, naming the index service;
    `WITH {"nodes": [node 2]}` puts the one copy on node 2, and naming node 1, a node
    that is none, or more nodes than `num_replica` asks for is refused;
  - the SDK's REQUEST_PLUS queries (which it sends to the `n1ql` nodes) match a model;
  - node 2, which holds no vbucket, answers queries from its copy;
  - node 1's `/query/service` answers 503, code 5000, saying it runs no query service.
  - A node's services are fixed: node 1 killed and started again by hand as
    `--services kv,index,query` exits with the cluster's refusal; started with its own
    services it comes back and serves its vbuckets again.
- test_a_query_node_joins_and_nodes_without_kv_rebalance_out: on the same cluster, node 3
  joins with `--services query` and a rebalance takes it in: no vbucket moves, the map
  lists it in `nodesExt` with `n1ql` only, and it answers queries by scanning the copies
  on nodes 0 and 2. `rebalance --eject 2` then takes out the index/query node: again no
  vbucket moves, and `by_x`'s copy on node 2 is not re-placed on node 1 (`kv`) or node 3
  (`query`): node 0's is the only one left, and node 3's queries use it.
- test_cluster_up_checks_the_services_it_is_given: node 0 without `kv`, a node number past
  the cluster and an unknown service are refused before any node starts.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from types import SimpleNamespace
from typing import Dict, List

import pytest
from couchbase.exceptions import CouchbaseException
from couchbase.management.options import CreateQueryIndexOptions
from couchbase.options import QueryOptions
from couchbase.n1ql import QueryScanConsistency

import admin_http
from conftest import PASSWORD, USERNAME, sluice_binary
from test_cluster_faults import pid_of
from test_cluster_rebalance import join_fourth, rebalance
from test_cluster_up import free_base, stop, terminate, wait_up
from test_python_query_cluster import connect, index_stats, query_at
from test_python_query import raw_query

VBS = 64
SERVICES = {0: ["kv", "index", "query"], 1: ["kv"], 2: ["index", "query"]}


def cluster_up(data_dir, base: int) -> subprocess.Popen:
    return subprocess.Popen(
        [str(sluice_binary()), "cluster", "up", "--nodes", "3", "--replicas", "1",
         "--data-dir", str(data_dir), "--base-port", str(base), "--vbuckets", str(VBS),
         "--memory-quota-mb", "128", "--auto-failover-timeout", "0",
         "--services", "1=kv", "--services", "2=index,query"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def bucket_config(admin_port: int) -> dict:
    return admin_http.get_json(f"http://127.0.0.1:{admin_port}/pools/default/b/default")


def index_holders(admin_port: int) -> Dict[str, List[int]]:
    status = admin_http.get_json(f"http://127.0.0.1:{admin_port}/indexStatus")
    out: Dict[str, List[int]] = {}
    for e in status["indexes"]:
        out.setdefault(e["indexName"], []).append(e["nodeId"])
    return {k: sorted(v) for k, v in out.items()}


def check_map(base: int, admin_port: int) -> None:
    cfg = bucket_config(admin_port)
    data = [f"127.0.0.1:{base}", f"127.0.0.1:{base + 10}"]
    vmap = cfg["vBucketServerMap"]
    assert vmap["serverList"] == data, cfg
    used = {i for row in vmap["vBucketMap"] for i in row}
    assert used <= {-1, 0, 1} and {0, 1} <= used, vmap["vBucketMap"]
    ext = {n["services"]["mgmt"]: n["services"] for n in cfg["nodesExt"]}
    assert set(ext) == {base + 1, base + 11, base + 21}, cfg["nodesExt"]
    assert "kv" in ext[base + 1] and "n1ql" in ext[base + 1], ext
    assert "kv" in ext[base + 11] and "n1ql" not in ext[base + 11], ext
    assert "kv" not in ext[base + 21] and "n1ql" in ext[base + 21], ext
    # Data nodes first, in serverList's order.
    firsts = [f"{n['hostname']}:{n['services'].get('kv')}" for n in cfg["nodesExt"][:2]]
    assert firsts == data, cfg["nodesExt"]


def wait_closed(port: int) -> None:
    """Until nothing accepts on `port` (a killed node's listeners are gone)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        except OSError:
            return
        assert time.monotonic() < deadline, f"port {port} still accepts"
        time.sleep(0.05)


@pytest.mark.timeout(300)
def test_each_node_serves_only_its_services(tmp_path):
    base = free_base()
    proc = cluster_up(tmp_path, base)
    by_hand = None
    try:
        info = wait_up(proc, tmp_path)
        # Clients are given the data nodes to bootstrap from.
        assert info["connection_string"] == \
            f"couchbase://127.0.0.1:{base},127.0.0.1:{base + 10}", info
        view = admin_http.get_json(f"http://127.0.0.1:{base + 1}/api/v1/cluster")
        assert {n["id"]: n.get("services", ["kv", "index", "query"]) for n in view["nodes"]} \
            == SERVICES, view["nodes"]
        for admin in (base + 1, base + 11, base + 21):
            deadline = time.monotonic() + 20
            while True:
                try:
                    check_map(base, admin)
                    break
                except AssertionError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)

        cluster = connect(base)
        coll = cluster.bucket("default").default_collection()
        docs = {f"k{i}": {"x": i % 40, "n": i} for i in range(800)}
        assert coll.upsert_multi(docs).all_ok
        assert coll.get("k7").content_as[dict] == docs["k7"]

        mgr = cluster.query_indexes()
        mgr.create_index("default", "by_x", ["x"], CreateQueryIndexOptions(num_replicas=1))
        assert index_holders(base + 1) == {"by_x": [0, 2]}
        with pytest.raises(CouchbaseException) as refused:
            mgr.create_index("default", "by_n", ["n"], CreateQueryIndexOptions(num_replicas=2))
        assert "index service" in str(refused.value), refused.value
        assert index_holders(base + 1) == {"by_x": [0, 2]}
        # `WITH {"nodes"}` puts the copies where it says, on index nodes only.
        on2 = f"127.0.0.1:{base + 21}"
        status, body = raw_query(
            SimpleNamespace(admin_url=f"http://127.0.0.1:{base + 1}"),
            {"statement": f'CREATE INDEX by_n ON default(n) WITH {{"nodes": ["{on2}"]}}'})
        assert status == 200 and body["status"] == "success", body
        assert index_holders(base + 1) == {"by_x": [0, 2], "by_n": [2]}
        for with_, said in [
                (f'{{"nodes": ["127.0.0.1:{base + 11}"]}}', "does not run the index service"),
                (f'{{"nodes": ["{on2}"], "num_replica": 1}}', "num_replica 1 asks for 2"),
                ('{"nodes": ["127.0.0.1:1"]}', "no node 127.0.0.1:1")]:
            status, body = raw_query(
                SimpleNamespace(admin_url=f"http://127.0.0.1:{base + 1}"),
                {"statement": f"CREATE INDEX by_n2 ON default(n) WITH {with_}"})
            assert status != 200 and said in body["errors"][0]["msg"], (with_, body)
        assert set(index_holders(base + 1)) == {"by_x", "by_n"}
        # Node 1 holds no copy: its STAT lists none.
        assert not [k for k in index_stats(base + 10) if k.startswith("index:")]
        assert [k for k in index_stats(base) if k.startswith("index:by_x:")]

        want = sorted(k for k, d in docs.items() if d["x"] == 3)
        for _ in range(6):  # the SDK spreads queries over the n1ql nodes (0 and 2)
            got = sorted(cluster.query(
                "SELECT RAW META().id FROM default WHERE x = $x",
                QueryOptions(named_parameters={"x": 3},
                             scan_consistency=QueryScanConsistency.REQUEST_PLUS)).rows())
            assert got == want
        # Node 2 holds no vbucket and answers from its own copy.
        assert sorted(query_at(base + 21, "SELECT RAW META().id FROM default WHERE x = 3")) \
            == want
        # Node 1 runs no query service.
        status, body = raw_query(SimpleNamespace(admin_url=f"http://127.0.0.1:{base + 11}"),
                                 {"statement": "SELECT 1"})
        assert status == 503, (status, body)
        assert body["errors"][0]["code"] == 5000, body
        assert "does not run on this node" in body["errors"][0]["msg"], body

        # Services are fixed: node 1 back with every service is refused.
        node1 = next(n for n in info["nodes"] if n["id"] == 1)
        os.kill(pid_of(info, 1), signal.SIGKILL)
        wait_closed(base + 10)
        args = list(node1["args"])
        i = args.index("--services")
        changed = args[:i + 1] + ["kv,index,query"] + args[i + 2:]
        env = {**os.environ, "SLUICE_USERNAME": USERNAME, "SLUICE_PASSWORD": PASSWORD}
        out = subprocess.run([str(sluice_binary())] + changed, capture_output=True, text=True,
                             timeout=60, env=env)
        assert out.returncode != 0, out
        assert "services are fixed" in out.stderr and "start it with --services kv" \
            in out.stderr, out.stderr[-2000:]
        said = next(line for line in out.stderr.splitlines() if "services are fixed" in line)
        print(f"node 1 with other services: {said.strip()[:400]}")
        # With its own services it comes back, and serves its vbuckets.
        by_hand = subprocess.Popen([str(sluice_binary())] + args, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                if coll.get("k1").content_as[dict] == docs["k1"] and all(
                        coll.get(k).content_as[dict] == docs[k] for k in list(docs)[:200]):
                    break
            except CouchbaseException:
                pass
            assert time.monotonic() < deadline, "node 1 did not serve again"
            time.sleep(0.3)
        cluster.close()
    finally:
        if by_hand is not None:
            terminate(by_hand)
        stop(proc)


@pytest.mark.timeout(300)
def test_a_query_node_joins_and_nodes_without_kv_rebalance_out(tmp_path):
    base = free_base()
    proc = cluster_up(tmp_path, base)
    joined = None
    try:
        wait_up(proc, tmp_path)
        cluster = connect(base)
        coll = cluster.bucket("default").default_collection()
        docs = {f"k{i}": {"x": i % 40} for i in range(400)}
        assert coll.upsert_multi(docs).all_ok
        cluster.query_indexes().create_index("default", "by_x", ["x"],
                                             CreateQueryIndexOptions(num_replicas=1))
        assert index_holders(base + 1) == {"by_x": [0, 2]}
        want = sorted(k for k, d in docs.items() if d["x"] == 5)
        before = bucket_config(base + 1)["vBucketServerMap"]

        joined = join_fourth(tmp_path, base, base + 1, VBS, extra=["--services", "query"])
        out = rebalance(base + 1)
        print(out.strip().splitlines()[-1])
        cfg = bucket_config(base + 31)
        # No vbucket moved, and node 3 is in the map for its query service alone.
        assert cfg["vBucketServerMap"] == before, (cfg["vBucketServerMap"], before)
        ext = {n["services"]["mgmt"]: n["services"] for n in cfg["nodesExt"]}
        assert set(ext[base + 31]) <= {"mgmt", "mgmtSSL", "n1ql", "n1qlSSL"}, ext
        assert "n1ql" in ext[base + 31], ext
        assert sorted(query_at(base + 31, "SELECT RAW META().id FROM default WHERE x = 5")) \
            == want
        assert index_holders(base + 31) == {"by_x": [0, 2]}

        out = rebalance(base + 1, 2)
        print(out.strip().splitlines()[-1])
        cfg = bucket_config(base + 31)
        assert cfg["vBucketServerMap"] == before, (cfg["vBucketServerMap"], before)
        assert base + 21 not in [n["services"]["mgmt"] for n in cfg["nodesExt"]], cfg
        # Node 0 is the only index node left: by_x keeps one copy, not two.
        deadline = time.monotonic() + 20
        while index_holders(base + 31) != {"by_x": [0]}:
            assert time.monotonic() < deadline, index_holders(base + 31)
            time.sleep(0.2)
        assert sorted(query_at(base + 31, "SELECT RAW META().id FROM default WHERE x = 5")) \
            == want
        assert not [k for k in index_stats(base + 10) if k.startswith("index:")]
        cluster.close()
    finally:
        if joined is not None:
            terminate(joined)
        stop(proc)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("flags,said", [
    (["--services", "0=index,query"], "node 0 creates the cluster"),
    (["--services", "3=kv"], "the cluster has nodes 0 to 2"),
    (["--services", "1=kv,fts"], "unknown service \"fts\""),
    (["--services", "1=kv", "--services", "1=index"], "names node 1 twice"),
])
def test_cluster_up_checks_the_services_it_is_given(tmp_path, flags, said):
    out = subprocess.run(
        [str(sluice_binary()), "cluster", "up", "--nodes", "3", "--data-dir", str(tmp_path),
         "--base-port", str(free_base())] + flags, capture_output=True, text=True, timeout=50)
    assert out.returncode != 0, out
    assert said in out.stderr, out.stderr
    assert not (tmp_path / "node-0").exists(), "a node was started"
