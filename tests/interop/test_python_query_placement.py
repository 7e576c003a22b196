"""Where the index service puts each index on a three-node cluster (`sluice cluster up`, one
bucket replica, no auto-failover), and how queries reach the copies.

The cluster's replicated metadata places an index on `num_replica` + 1 nodes: each copy goes
to the node holding the fewest copies (of every index) so far, ties to the lower node id.
A node without a copy scans one on another node, trying the holders in turn. When a node
is failed over, the copies it held are placed again at once on nodes holding none. The
tests compute the expected placement with a Python model of that rule (`Placement`) and
read the real one from `GET /indexStatus` (one entry per copy, with its node and status)
and from STAT `index` on each node's KV port (a node lists only the copies it holds).

- test_each_index_is_placed_on_its_own_nodes_and_answers_everywhere: `by_a` (no replica),
  `by_b` (`num_replica` 1) and `#primary` (`num_replica` 2), created by SQL++ on three
  different nodes, land where the rule says; every node's /indexStatus says so, all copies
  Ready, and only holders have STAT entries for an index. `num_replica` 3 on three nodes
  is refused and leaves nothing behind. Every node answers index scans (covered or
  fetching), a `b` lookup and primary scans exactly as a Python model of the documents
  says, from its own copy or another node's; EXPLAIN on a node without a copy of `by_a`
  still names `by_a`; `system:indexes` on every node lists all three, online. A dropped
  index leaves /indexStatus, `system:indexes` and its holders' stats.
- test_a_query_uses_any_copy_that_is_up_and_lost_copies_are_re_placed: padding indexes
  shift the load so that node 1 holds one copy of `by_a` (the other on node 2) and the
  only copy of `by_c`. Node 1 is killed with SIGKILL: /indexStatus shows its copies
  Offline, and a covered NOT_BOUNDED scan of `by_a` on node 0 (which holds no copy) still
  answers right, skipping the dead holder for node 2's copy; a query that needs `by_c`
  fails instead of answering partially. Node 1 is then failed over by hand: `by_c` is
  re-placed and rebuilt on node 2 and `by_a` gets its second copy back on node 0, as the
  rule says, and REQUEST_PLUS queries on both live nodes match what KV holds, key by key.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from datetime import timedelta
from types import SimpleNamespace
from typing import Dict, Iterable, List, Optional, Set, Tuple

import pytest
from couchbase.durability import DurabilityLevel, ServerDurability
from couchbase.options import UpsertOptions

import admin_http
from test_cluster_faults import fail_over_by_hand, pid_of
from test_cluster_up import free_base, stop, wait_up
from test_python_query import raw_query
from test_python_query_cluster import cluster_up, connect, index_stats, kv_truth, query_nodes

NODES = (0, 1, 2)


def admin_port(base: int, node: int) -> int:
    return base + 10 * node + 1


def kv_port(base: int, node: int) -> int:
    return base + 10 * node


class Placement:
    """The catalog's placement rule, in Python: a new index gets `replicas + 1` copies, each
    on the candidate (a node not failed over) with the fewest copies of every index so far,
    ties to the lower id; a failover drops the node's copies and tops every index up on the
    least loaded nodes that hold none, indexes in name order."""

    def __init__(self, nodes: Iterable[int]):
        self.live: Set[int] = set(nodes)
        self.indexes: Dict[str, Tuple[int, List[int]]] = {}  # name -> (replicas, nodes)

    def _load(self) -> Dict[int, int]:
        load = {n: 0 for n in self.live}
        for _, nodes in self.indexes.values():
            for n in nodes:
                if n in load:
                    load[n] += 1
        return load

    @staticmethod
    def _top_up(nodes: List[int], want: int, load: Dict[int, int]) -> None:
        while len(nodes) < want:
            free = [n for n in load if n not in nodes]
            if not free:
                return
            pick = min(free, key=lambda n: (load[n], n))
            nodes.append(pick)
            load[pick] += 1

    def create(self, name: str, replicas: int) -> List[int]:
        nodes: List[int] = []
        self._top_up(nodes, replicas + 1, self._load())
        self.indexes[name] = (replicas, nodes)
        return nodes

    def drop(self, name: str) -> None:
        del self.indexes[name]

    def fail_over(self, node: int) -> None:
        self.live.discard(node)
        for _, nodes in self.indexes.values():
            nodes[:] = [n for n in nodes if n in self.live]
        load = self._load()
        for name in sorted(self.indexes):
            replicas, nodes = self.indexes[name]
            self._top_up(nodes, replicas + 1, load)

    def nodes(self, name: str) -> List[int]:
        return sorted(self.indexes[name][1])

    def status(self, offline: Iterable[int] = ()) -> Dict[str, tuple]:
        """What /indexStatus should say (as `index_status` returns it): every copy Ready,
        but those on `offline` nodes."""
        down = set(offline)
        return {name: (replicas, [(n, "Offline" if n in down else "Ready")
                                  for n in sorted(nodes)])
                for name, (replicas, nodes) in self.indexes.items()}


def index_status(base: int, node: int) -> Dict[str, tuple]:
    """`GET /indexStatus` on `node`, as {index name: (numReplica, [(nodeId, status)] by node)},
    after checking each entry's shape (the default collection, `hosts` naming the holder,
    replica ids 0..n-1)."""
    body = admin_http.get_json(f"http://127.0.0.1:{admin_port(base, node)}/indexStatus",
                               timeout=15)
    assert body["warnings"] == [], body
    entries: Dict[str, list] = {}
    for e in body["indexes"]:
        assert (e["bucket"], e["scope"], e["collection"]) == \
            ("default", "_default", "_default"), e
        assert e["index"] == e["indexName"], e
        # The holder's plain admin address, as Couchbase lists host:8091 (not the TLS port
        # the nodes reach each other on when the cluster encrypts its own traffic).
        own = base + 10 * e["nodeId"]
        assert e["hosts"] == [f"127.0.0.1:{own + 1}"], e
        entries.setdefault(e["indexName"], []).append(e)
    out = {}
    for name, es in entries.items():
        assert sorted(e["replicaId"] for e in es) == list(range(len(es))), es
        assert len({e["numReplica"] for e in es}) == 1, es
        assert len({e["nodeId"] for e in es}) == len(es), f"two copies on one node: {es}"
        out[name] = (es[0]["numReplica"], sorted((e["nodeId"], e["status"]) for e in es))
    return out


def wait_status(base: int, node: int, want: Dict[str, tuple], timeout_s: float = 15) -> float:
    """Polls `node`'s /indexStatus until it says `want`; the seconds it took."""
    start = time.monotonic()
    while (got := index_status(base, node)) != want:
        assert time.monotonic() - start < timeout_s, \
            f"node {node}'s /indexStatus after {timeout_s}s:\n  got  {got}\n  want {want}"
        time.sleep(0.2)
    return time.monotonic() - start


def stat_indexes(base: int, node: int) -> Set[str]:
    """The indexes STAT `index` on `node` has `index:<name>:*` entries for (its copies)."""
    return {k.split(":")[1] for k in index_stats(kv_port(base, node))
            if k.startswith("index:")}


def run(base: int, node: int, statement: str, consistency: str = "request_plus") -> list:
    """One statement on `node`'s query service, by hand: its results (it must succeed)."""
    status, body = submit(base, node, statement, consistency)
    assert status == 200 and body.get("status") == "success", (node, statement, status, body)
    return body["results"]


def submit(base: int, node: int, statement: str, consistency: str = "request_plus") -> tuple:
    return raw_query(SimpleNamespace(admin_url=f"http://127.0.0.1:{admin_port(base, node)}"),
                     {"statement": statement, "scan_consistency": consistency})


def plan(base: int, node: int, statement: str) -> Tuple[Optional[str], bool, bool]:
    """EXPLAIN on `node`: the index its scan reads, whether it covers, whether it fetches."""
    children = run(base, node, f"EXPLAIN {statement}")[0]["plan"]["~children"]
    ops = [op["#operator"] for op in children]
    return children[0].get("index"), "covers" in children[0], "Fetch" in ops


def wait_cluster_map(base: int) -> None:
    """Until every node serves the three-node map (a node serves its own one-node map until
    then, and `num_replica` is checked against the map's nodes)."""
    admins = [f"127.0.0.1:{admin_port(base, n)}" for n in NODES]
    for n in NODES:
        deadline = time.monotonic() + 20
        while (listed := query_nodes(admin_port(base, n))) != admins:
            assert time.monotonic() < deadline, (n, listed)
            time.sleep(0.1)


def wait_dead(pid: int) -> str:
    """Until `pid` is gone or a zombie (killed, not yet reaped by `cluster up`)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return "reaped"
        if state == "Z":
            return "zombie"
        assert time.monotonic() < deadline, f"pid {pid} still running ({state})"
        time.sleep(0.05)


@pytest.mark.timeout(300)
def test_each_index_is_placed_on_its_own_nodes_and_answers_everywhere(tmp_path):
    base = free_base()
    proc = cluster_up(tmp_path, base, 1)
    try:
        wait_up(proc, tmp_path)
        wait_cluster_map(base)
        model = Placement(NODES)
        # Each statement on another node: DDL works from any of them.
        run(base, 0, "CREATE INDEX by_a ON default(a)")
        model.create("by_a", 0)
        run(base, 1, 'CREATE INDEX by_b ON default(b) WITH {"num_replica": 1}')
        model.create("by_b", 1)
        run(base, 2, 'CREATE PRIMARY INDEX ON default WITH {"num_replica": 2}')
        model.create("#primary", 2)
        # The rule, worked by hand: by_a on the empty cluster goes to node 0; by_b's two
        # copies to the empty nodes 1 and 2; then each node holds one, so #primary's three
        # go everywhere.
        assert (model.nodes("by_a"), model.nodes("by_b"), model.nodes("#primary")) == \
            ([0], [1, 2], [0, 1, 2])

        # Four copies on three nodes cannot each have their own node.
        status, body = submit(base, 0, 'CREATE INDEX by_x ON default(x) WITH {"num_replica": 3}')
        print(f"num_replica 3 on 3 nodes: HTTP {status}, errors {body.get('errors')}")
        assert status != 200 or body.get("errors"), (status, body)
        assert body.get("status") != "success", body

        # Every node sees the same placement, every copy built (the DDL waited for them),
        # and nothing of the refused index.
        want = model.status()
        for n in NODES:
            wait_status(base, n, want)
        print(f"placement: {index_status(base, 0)}")
        for n in NODES:
            held = stat_indexes(base, n)
            expect = {name for name in model.indexes if n in model.nodes(name)}
            assert held == expect, f"node {n}'s STAT index lists copies of {held}, " \
                                   f"the placement gives it {expect}"

        cluster = connect(base)
        coll = cluster.bucket("default").default_collection()
        docs: Dict[str, dict] = {}
        for i in range(480):
            doc: dict = {"i": i}
            if i % 5:
                doc["a"] = i % 17
            if i % 3:
                doc["b"] = f"s{i % 7}"
            docs[f"k{i:03}"] = doc
        written = coll.upsert_multi(docs)
        assert written.all_ok, written.exceptions

        by_a = "SELECT RAW META().id FROM default WHERE a >= 10 ORDER BY META().id"
        want_a = sorted(k for k, d in docs.items() if d.get("a", -1) >= 10)
        covered = "SELECT a FROM default WHERE a BETWEEN 3 AND 7"
        want_covered = Counter(d["a"] for d in docs.values() if 3 <= d.get("a", -1) <= 7)
        by_b = "SELECT RAW META().id FROM default WHERE b = 's3' ORDER BY META().id"
        want_b = sorted(k for k, d in docs.items() if d.get("b") == "s3")
        primary = "SELECT RAW META().id FROM default ORDER BY META().id"
        for n in NODES:
            # Nodes 1 and 2 hold no copy of by_a: their planner still picks it, and the scan
            # reads node 0's copy.
            assert plan(base, n, by_a)[0] == "by_a", n
            assert plan(base, n, covered) == ("by_a", True, False), n
            assert plan(base, n, by_b)[0] == "by_b", n
            assert plan(base, n, primary)[0] == "#primary", n
            got = run(base, n, by_a)
            assert got == want_a, (n, sorted(set(got) ^ set(want_a))[:20])
            got_covered = Counter(r["a"] for r in run(base, n, covered))
            assert got_covered == want_covered, (n, got_covered, want_covered)
            assert run(base, n, by_b) == want_b, n
            assert run(base, n, primary) == sorted(docs), n
            assert run(base, n, "SELECT COUNT(*) AS c FROM default") == [{"c": len(docs)}], n
            listed = run(base, n, "SELECT name, state FROM system:indexes ORDER BY name")
            assert listed == [{"name": "#primary", "state": "online"},
                              {"name": "by_a", "state": "online"},
                              {"name": "by_b", "state": "online"}], (n, listed)

        # A dropped index leaves every node: the catalog, its holders' stores and stats.
        run(base, 2, "DROP INDEX by_b ON default")
        model.drop("by_b")
        want = model.status()
        for n in NODES:
            wait_status(base, n, want)
            names = run(base, n, "SELECT RAW name FROM system:indexes ORDER BY name")
            assert names == ["#primary", "by_a"], (n, names)
        for n in (1, 2):
            deadline = time.monotonic() + 10
            while "by_b" in (held := stat_indexes(base, n)):
                assert time.monotonic() < deadline, f"node {n} still lists by_b: {held}"
                time.sleep(0.2)
        # With by_b gone the b lookup falls back to the primary index, on every node.
        for n in NODES:
            assert plan(base, n, by_b)[0] == "#primary", n
            assert run(base, n, by_b) == want_b, n
        cluster.close()
    finally:
        stop(proc)


@pytest.mark.timeout(300)
def test_a_query_uses_any_copy_that_is_up_and_lost_copies_are_re_placed(tmp_path):
    base = free_base()
    proc = cluster_up(tmp_path, base, 1)
    try:
        info = wait_up(proc, tmp_path)
        wait_cluster_map(base)
        model = Placement(NODES)
        # Padding: node 0 ends with two copies and nodes 1 and 2 with none (the rule spreads
        # copies evenly, so only dropping pad1 leaves them that uneven). by_a then goes to
        # nodes 1 and 2, and by_c to node 1 (tied with node 2, lower id): node 1 holds one
        # copy of by_a and the only copy of by_c, and node 0, the one queried while node 1
        # is down, holds no copy of either.
        for name, replicas in (("pad0", 0), ("pad1", 1), ("pad2", 0)):
            run(base, 0, f'CREATE INDEX {name} ON default({name}) '
                         f'WITH {{"num_replica": {replicas}}}')
            model.create(name, replicas)
        run(base, 0, "DROP INDEX pad1 ON default")
        model.drop("pad1")
        run(base, 0, 'CREATE INDEX by_a ON default(a) WITH {"num_replica": 1}')
        model.create("by_a", 1)
        run(base, 0, 'CREATE INDEX by_c ON default(c) WITH {"num_replica": 0}')
        model.create("by_c", 0)
        assert (model.nodes("pad0"), model.nodes("pad2"), model.nodes("by_a"),
                model.nodes("by_c")) == ([0], [0], [1, 2], [1]), model.indexes
        victim, survivor, asker = 1, 2, 0
        for n in NODES:
            wait_status(base, n, model.status())
        print(f"placement before the kill: {index_status(base, 0)}")

        # Durable writes: node 1's replicas elsewhere hold every one before it dies.
        cluster = connect(base)
        coll = cluster.bucket("default").default_collection()
        docs: Dict[str, dict] = {}
        durable = UpsertOptions(durability=ServerDurability(DurabilityLevel.MAJORITY),
                                timeout=timedelta(seconds=10))
        for i in range(480):
            doc: dict = {"i": i}
            if i % 4:
                doc["a"] = i % 23
            if i % 3 == 0:
                doc["c"] = i
            docs[f"k{i:03}"] = doc
            coll.upsert(f"k{i:03}", doc, durable)

        scan_a = "SELECT META().id AS id, a FROM default WHERE a >= 10"
        want_a = {k: d["a"] for k, d in docs.items() if d.get("a", -1) >= 10}
        scan_c = "SELECT RAW META().id FROM default WHERE c IS VALUED ORDER BY META().id"
        # Covered: built from index entries alone, so the scan needs no KV read from the
        # node about to die (whose active vbuckets have no active until the failover).
        assert plan(base, asker, scan_a) == ("by_a", True, False)
        assert plan(base, asker, scan_c)[0] == "by_c"
        # REQUEST_PLUS on the survivor scans its own copy: it has applied every write.
        for n in (survivor, asker):
            got = {r["id"]: r["a"] for r in run(base, n, scan_a)}
            assert got == want_a, (n, sorted(set(got) ^ set(want_a))[:20])

        pid = pid_of(info, victim)
        os.kill(pid, signal.SIGKILL)
        print(f"node {victim} (pid {pid}) killed: {wait_dead(pid)}")
        down = model.status(offline=[victim])
        for n in (asker, survivor):
            wait_status(base, n, down)
        print(f"placement with node {victim} down: {index_status(base, asker)}")

        # NOT_BOUNDED: REQUEST_PLUS would wait for the dead node's vbuckets' seqnos, which
        # nobody can say until the failover (as on Couchbase). Several scans, since each
        # starts from another holder: some try the dead one first and must pass it by.
        for attempt in range(6):
            got = {r["id"]: r["a"] for r in run(base, asker, scan_a, "not_bounded")}
            assert got == want_a, (attempt, sorted(set(got) ^ set(want_a))[:20])
        # The only copy of by_c is on the dead node: no answer rather than a partial one.
        status, body = submit(base, asker, scan_c, "not_bounded")
        print(f"by_c with its only copy down: HTTP {status}, errors {body.get('errors')}")
        assert body.get("status") != "success" and body.get("errors"), (status, body)

        started = time.monotonic()
        fail_over_by_hand(admin_port(base, asker), victim)
        model.fail_over(victim)
        # by_a (first in name order) takes node 0 back to two copies; then by_c goes to the
        # less loaded node, 2 (one copy against node 0's three).
        assert (model.nodes("by_a"), model.nodes("by_c")) == ([0, 2], [2]), model.indexes
        after = model.status()
        for n in (asker, survivor):
            wait_status(base, n, after, timeout_s=60)
        print(f"node {victim} failed over; copies re-placed and built in "
              f"{time.monotonic() - started:.1f}s: {index_status(base, asker)}")
        assert stat_indexes(base, survivor) == {"by_a", "by_c"}
        assert stat_indexes(base, asker) == {"pad0", "pad2", "by_a"}

        # What KV holds now, key by key (the SDK learns the new map as it goes).
        truth = kv_truth(coll, docs)
        assert truth == docs, f"durable writes lost: {sorted(set(docs) - set(truth))[:20]}"
        want_c = sorted(k for k, d in truth.items() if "c" in d)
        want_a = {k: d["a"] for k, d in truth.items() if d.get("a", -1) >= 10}
        for n in (asker, survivor):
            assert plan(base, n, scan_c)[0] == "by_c", n
            got = run(base, n, scan_c)
            assert got == want_c, (n, sorted(set(got) ^ set(want_c))[:20])
            got = {r["id"]: r["a"] for r in run(base, n, scan_a)}
            assert got == want_a, (n, sorted(set(got) ^ set(want_a))[:20])
            names = run(base, n, "SELECT name, state FROM system:indexes ORDER BY name")
            assert names == [{"name": x, "state": "online"}
                             for x in ("by_a", "by_c", "pad0", "pad2")], (n, names)
        cluster.close()
    finally:
        stop(proc)
