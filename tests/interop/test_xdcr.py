"""XDCR: one-way replication from one Sluice cluster to another, driven through the
Couchbase-shaped REST API on the source's admin port, with the Python SDK writing and
reading documents on both sides.

Two clusters per module, 3+2 nodes, both made by `sluice cluster up` (64 vbuckets): A
(3 nodes, 2 replicas) is the source, B (2 nodes, 1 replica) the target. B has its own
administrator (B_USER / B_PASS, not A's), so a remote reference must carry B's credentials
and the pipeline must log in to B with them. Every test makes its own buckets (on B, and on A
for the tests that move data) so each can count what the target holds; A's have 2 replicas
and B's 1, checked from their vbucket maps. B's items are counted over both of its nodes
(active vbuckets only), and B is read through the SDK bootstrapped from both.

* test_pools_uuid_*: `GET /pools` gives one uuid on every node of A, another one on both
  nodes of B, 401 with wrong or no credentials.
* test_remote_cluster_references: POST / GET / edit / DELETE /pools/default/remoteClusters,
  the refusals (bad credentials: "Authentication failed", unreachable host, duplicate name,
  missing fields), B's uuid in the reference, the password never shown, a reference made on
  one node of A listed by the other two.
* test_create_replication_validation_and_lifecycle: createReplication's refusals (unknown
  fromBucket / toCluster / toBucket, a seqno bucket to a last-write-wins one, a filter that is
  not a regex, the same replication twice), the id `<uuid B>/<from>/<to>`, a reference in use
  that cannot be deleted, the task in /pools/default/tasks (on every node of A), pause and
  resume through /settings/replications/<id>, cancelXDCR, and a replication created paused.
* test_one_way_replication_carries_documents_and_metadata: ~2000 documents (JSON, binary
  and string bodies with custom flags, far expiries, user xattrs), some written before the
  replication exists and the rest while it runs, then updated (bodies, xattrs, touches),
  deleted, and a few recreated; B converges to exactly A's live documents with the same
  body, CAS, revision, flags, expiry, datatype and user xattrs (read from `$document`), the
  deleted ones absent (their tombstones, where B has one, with A's CAS and revision). While
  it runs, 40 more documents (some with a user xattr) are written with a 3 s expiry; once
  past it they are read on A, which expires them there, and A's expirations must reach B:
  B's item count drops to A's live documents without B reading or paging them itself (B's
  expiry pager is set to an hour, so only a replicated expiration removes them), then they
  are absent on B, their tombstones (where B has one) with A's CAS and revision. The task
  reports docsWritten > 0 and changesLeft 0.
* test_filter_expression_replicates_matching_keys_only: `^keep-` lets keep-* through and
  neither drop-* nor x-keep-* (the expression is a search, anchored by `^`).
* test_pause_holds_mutations_until_resume: writes and deletions made while paused do not
  reach B (checked for 5 s), and all arrive after resume.

The REST, cluster, `$document` and polling helpers are in xdcr_helpers.py (shared with
test_xdcr_both_ways.py and test_xdcr_faults.py).

Run: cd tests/interop && python3 -m pytest test_xdcr.py -q -p no:cacheprovider
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Dict, List, Optional

import couchbase.subdocument as SD
import pytest
from couchbase.exceptions import DocumentNotFoundException
from couchbase.options import MutateInOptions, UpsertOptions

from admin_http import basic
from conftest import HOST, PASSWORD, USERNAME, free_ports
from test_cluster_up import free_base
from xdcr_helpers import (AUTH_A, AUTH_B, B_PASS, B_USER, VBS, ClusterA, Passthrough, Resp,
                          absent, active_items, cancel, connect, create_bucket,
                          create_replication, eventually, field_errors, http, is_field_errors,
                          live_state, pools_uuid, ready_collection, set_paused, settings,
                          start_cluster_a, start_replication_at, stop_cluster, task_of,
                          tombstone_state, xdcr_tasks)

pytestmark = pytest.mark.timeout(240)

A_NODES, A_REPLICAS = 3, 2
B_NODES, B_REPLICAS = 2, 1
JSON_FLAGS = 0x02000000    # the SDK's JSON common flags
STRING_FLAGS = 0x04000000  # the SDK's string common flags
FAR_EXPIRY = timedelta(seconds=3600)
FARTHER_EXPIRY = timedelta(seconds=7200)
SHORT_EXPIRY = timedelta(seconds=3)    # documents that expire while the test runs
TTL_DOCS = 40
# B's expiry pager, in seconds: longer than the module, so a document that expired on B is
# only deleted there by A's replicated expiration (or by a read on B, which the test delays
# until those have arrived).
B_EXPIRY_PAGER_S = "3600"


# ------------------------------------------------------------------ clusters

@pytest.fixture(scope="module")
def cluster_a(tmp_path_factory):
    a = start_cluster_a(tmp_path_factory.mktemp("xdcr-a"), free_base(), A_NODES,
                        replicas=A_REPLICAS)
    try:
        yield a
    finally:
        stop_cluster(a.proc)


@pytest.fixture(scope="module")
def cluster_b(tmp_path_factory, cluster_a):
    """The target: `sluice cluster up` with its own administrator. Made after A (A's ports
    are bound by then, so B's free range cannot take them)."""
    b = start_cluster_a(tmp_path_factory.mktemp("xdcr-b"), free_base(), B_NODES,
                        replicas=B_REPLICAS, username=B_USER, password=B_PASS,
                        env={"SLUICE_EXPIRY_PAGER_INTERVAL_S": B_EXPIRY_PAGER_S})
    try:
        yield b
    finally:
        stop_cluster(b.proc)


def b_url(b: ClusterA) -> str:
    return b.url


def b_hostname(b: ClusterA) -> str:
    return f"{HOST}:{b.admin_ports[0]}"


def chains(url: str, auth: str, bucket: str) -> List[List[int]]:
    r = http("GET", f"{url}/pools/default/b/{bucket}", auth=auth, timeout=10)
    assert r.status == 200 and isinstance(r.body, dict), f"map of {bucket} at {url}: {r}"
    m = r.body["vBucketServerMap"]
    assert m.get("numReplicas") is not None, r
    return m["vBucketMap"]


def assert_copies(url: str, auth: str, bucket: str, nodes: int, replicas: int) -> None:
    """Every vbucket of the bucket has an active and `replicas` replicas, on distinct nodes
    of the `nodes` (eventually: a new bucket's map is placed within a few seconds)."""
    def placed():
        cs = chains(url, auth, bucket)
        return len(cs) == VBS and all(
            len(c) == replicas + 1 and all(0 <= n < nodes for n in c) and len(set(c)) == len(c)
            for c in cs)
    eventually(f"{bucket} at {url}: {replicas} replicas of every vbucket on {nodes} nodes",
               placed, timeout=20,
               diag=lambda: f"chains: {chains(url, auth, bucket)[:8]}...")


def make_pair(a: ClusterA, src: str, b: ClusterA, dst: str) -> None:
    """The source bucket on A (2 replicas) and the target bucket on B (1 replica)."""
    create_bucket(a.url, AUTH_A, src, replicaNumber=str(A_REPLICAS))
    create_bucket(b_url(b), AUTH_B, dst, replicaNumber=str(B_REPLICAS))
    assert_copies(a.url, AUTH_A, src, A_NODES, A_REPLICAS)
    assert_copies(b_url(b), AUTH_B, dst, B_NODES, B_REPLICAS)


@pytest.fixture(scope="module")
def sdk_a(cluster_a):
    c = connect(cluster_a.connstr, USERNAME, PASSWORD)
    yield c
    c.close()


@pytest.fixture(scope="module")
def sdk_b(cluster_b):
    c = connect(cluster_b.connstr, B_USER, B_PASS)
    yield c
    c.close()


def add_remote(a: ClusterA, name: str, b, *, url: Optional[str] = None, **over) -> Resp:
    form = {"name": name, "hostname": b_hostname(b), "username": B_USER, "password": B_PASS}
    form.update(over)
    return http("POST", f"{url or a.url}/pools/default/remoteClusters", form)


def remotes(url: str) -> List[dict]:
    r = http("GET", f"{url}/pools/default/remoteClusters")
    assert r.status == 200 and isinstance(r.body, list), f"GET remoteClusters: {r}"
    return r.body


@pytest.fixture(scope="module")
def remote_b(cluster_a, cluster_b):
    """A reference on A to B, shared by the tests that move data (made at first use, after
    the reference tests, which make and delete their own)."""
    r = add_remote(cluster_a, "clusterB", cluster_b)
    assert r.status == 200 and isinstance(r.body, dict), f"remote reference to B: {r}"
    return r.body


def b_items(b: ClusterA, bucket: str) -> int:
    """Live documents in B's bucket: its active vbuckets' items over both of B's nodes."""
    return active_items(b.kv_ports, B_USER, B_PASS, bucket)


def a_items(a: ClusterA, bucket: str) -> int:
    return active_items(a.kv_ports, USERNAME, PASSWORD, bucket)


# ------------------------------------------------------------------ replications

def start_replication(a: ClusterA, from_bucket: str, remote: dict, to_bucket: str,
                      **extra: str) -> str:
    return start_replication_at(a.url, from_bucket, remote, to_bucket, **extra)


def diagnostics(a: ClusterA, b, rid: Optional[str], src: Optional[str],
                dst: Optional[str]) -> str:
    out = []
    for url in a.urls:
        try:
            out.append(f"tasks at {url}: {json.dumps(xdcr_tasks(url), indent=1)}")
        except Exception as e:
            out.append(f"tasks at {url}: {e!r}")
    if rid:
        out.append(f"settings of {rid}: {settings(a.url, rid)}")
    for what, fn in ((f"A {src} active items", lambda: a_items(a, src)),
                     (f"B {dst} active items", lambda: b_items(b, dst))):
        if src and dst:
            try:
                out.append(f"{what}: {fn()}")
            except Exception as e:
                out.append(f"{what}: {e!r}")
    out.append(a.log_tail())
    out.append(b.log_tail(10))
    return "\n".join(out)


# ------------------------------------------------------------------ documents

@dataclass
class Want:
    kind: str                 # "json" | "bin" | "str"
    value: object             # dict for json, bytes otherwise
    flags: int = JSON_FLAGS
    expiry: Optional[timedelta] = None
    owner: Optional[str] = None
    deleted: bool = False
    history: List[str] = field(default_factory=list)


def write(col, key: str, w: Want) -> None:
    """Stores `w` whole (upsert), then its user xattr if it has one (keeping the expiry)."""
    opts = {} if w.expiry is None else {"expiry": w.expiry}
    if w.kind == "json":
        col.upsert(key, w.value, UpsertOptions(**opts))
    else:
        col.upsert(key, w.value, UpsertOptions(transcoder=Passthrough(w.flags), **opts))
    if w.owner is not None:
        col.mutate_in(key, [SD.upsert("meta.owner", w.owner, xattr=True, create_parents=True)],
                      MutateInOptions(preserve_expiry=True))


def model_problem(key: str, w: Want, st: Optional[dict]) -> Optional[str]:
    """Why A's own document is not what the test wrote (a check of the test itself, so the
    A/B comparison is not of two equally wrong things)."""
    if st is None:
        return f"{key}: missing on A ({w.history})"
    if w.kind == "json":
        if json.loads(st["body"]) != w.value or st["get_flags"] != JSON_FLAGS:
            return f"{key}: A has {st['body']!r} flags {st['get_flags']:#x}, wrote {w.value}"
    elif st["body"] != w.value or st["get_flags"] != w.flags:
        return f"{key}: A has {st['body']!r} flags {st['get_flags']:#x}, wrote " \
               f"{w.value!r} {w.flags:#x}"
    if (st["exptime"] != 0) != (w.expiry is not None):
        return f"{key}: A's exptime {st['exptime']}, wrote expiry {w.expiry} ({w.history})"
    if w.owner is not None and st["meta_xattr"] != {"owner": w.owner}:
        return f"{key}: A's meta xattr {st['meta_xattr']}, wrote owner {w.owner}"
    return None


# ------------------------------------------------------------------ 1. /pools

def test_pools_uuid_same_on_every_node_of_a_cluster(cluster_a, cluster_b):
    uuids = [pools_uuid(url, AUTH_A) for url in cluster_a.urls]
    assert len(set(uuids)) == 1, f"nodes of A disagree on the cluster uuid: {uuids}"
    r = http("GET", f"{cluster_a.url}/pools")
    assert r.body.get("isAdminCreds") is True, r
    pools = r.body.get("pools")
    assert isinstance(pools, list) and pools and pools[0].get("name") == "default", r
    assert pools[0].get("uri") == f"/pools/default?uuid={uuids[0]}", r
    # Stable: asked again, the same.
    assert pools_uuid(cluster_a.urls[1], AUTH_A) == uuids[0]
    # B's nodes agree among themselves too (as B's administrator).
    uuids_b = [pools_uuid(url, AUTH_B) for url in cluster_b.urls]
    assert len(uuids_b) == B_NODES and len(set(uuids_b)) == 1, \
        f"nodes of B disagree on the cluster uuid: {uuids_b}"


def test_pools_uuid_differs_between_clusters(cluster_a, cluster_b):
    ua = pools_uuid(cluster_a.url, AUTH_A)
    ub = pools_uuid(b_url(cluster_b), AUTH_B)
    assert ua != ub, f"two clusters started apart share the uuid {ua}"


def test_pools_uuid_needs_credentials(cluster_a, cluster_b):
    for url, auth in ((cluster_a.url, basic(USERNAME, "wrong")),
                      (cluster_a.urls[1], basic("nobody", PASSWORD)),
                      (cluster_a.urls[2], AUTH_B),    # B's administrator is nobody on A
                      (b_url(cluster_b), AUTH_A),     # A's administrator is nobody on B
                      (cluster_b.urls[1], AUTH_A),
                      (b_url(cluster_b), None)):
        r = http("GET", f"{url}/pools", auth=auth)
        assert r.status == 401, f"GET {url}/pools with {auth!r}: {r}"
        assert "uuid" not in r.text, r


# ------------------------------------------------------------------ 2. remote references

def test_remote_cluster_references(cluster_a, cluster_b):
    a, b = cluster_a, cluster_b
    uuid_b = pools_uuid(b_url(b), AUTH_B)
    base = f"{a.url}/pools/default/remoteClusters"
    name = "ref-basic"
    try:
        # Wrong password: B refuses the source's probe.
        r = add_remote(a, name, b, password="not-" + B_PASS)
        assert r.status == 400 and is_field_errors(r), f"wrong password: {r}"
        assert "Authentication failed" in r.text, f"wrong password: {r}"
        r = add_remote(a, name, b, username="nobody")
        assert r.status == 400 and "Authentication failed" in r.text, f"wrong user: {r}"
        # Nobody listens there.
        r = add_remote(a, name, b, hostname=f"{HOST}:{free_ports(1)[0]}")
        assert r.status == 400 and is_field_errors(r), f"unreachable host: {r}"
        # Missing fields.
        for missing in ("name", "hostname", "username"):
            form = {"name": name, "hostname": b_hostname(b), "username": B_USER,
                    "password": B_PASS}
            del form[missing]
            r = http("POST", base, form)
            assert r.status == 400 and is_field_errors(r), f"without {missing}: {r}"
            assert missing in field_errors(r), \
                f"without {missing}: the error names another field: {r}"
        assert [x for x in remotes(a.url) if x.get("name") == name] == [], \
            f"a refused reference was saved: {remotes(a.url)}"

        # The good one.
        r = add_remote(a, name, b)
        assert r.status == 200 and isinstance(r.body, dict), f"good reference: {r}"
        assert B_PASS not in r.text, f"the POST answer shows the password: {r}"
        ref = r.body
        want = {"name": name, "uri": f"/pools/default/remoteClusters/{name}",
                "hostname": b_hostname(b), "username": B_USER, "uuid": uuid_b,
                "deleted": False, "secureType": "none", "demandEncryption": False}
        got = {k: ref.get(k) for k in want}
        assert got == want, f"reference: {ref}"
        assert "validateURI" in ref and "password" not in ref, ref

        # Listed, by this node and by the other one, without the password.
        r = http("GET", base)
        assert r.status == 200 and isinstance(r.body, list), r
        assert B_PASS not in r.text, f"GET remoteClusters shows the password: {r}"
        listed = [x for x in r.body if x.get("name") == name]
        assert len(listed) == 1 and {k: listed[0].get(k) for k in want} == want, r
        assert "password" not in listed[0], listed[0]
        for url in a.urls[1:]:
            eventually(f"the reference listed by A's node at {url}",
                       lambda: [x.get("uuid") for x in remotes(url)
                                if x.get("name") == name] == [uuid_b], timeout=20)

        # The same name again: refused, whichever node is asked.
        for url in a.urls:
            r = add_remote(a, name, b, url=url)
            assert r.status == 400 and is_field_errors(r), f"duplicate name via {url}: {r}"
        assert len([x for x in remotes(a.url) if x.get("name") == name]) == 1

        # An edit with bad credentials is refused and changes nothing; a good one is taken.
        r = http("POST", f"{base}/{name}", {"name": name, "hostname": b_hostname(b),
                                            "username": B_USER, "password": "bad"})
        assert r.status == 400 and "Authentication failed" in r.text, f"bad edit: {r}"
        r = http("POST", f"{base}/{name}", {"name": name, "hostname": b_hostname(b),
                                            "username": B_USER, "password": B_PASS})
        assert r.status == 200, f"good edit: {r}"
        assert B_PASS not in r.text, f"the edit's answer shows the password: {r}"
        listed = [x for x in remotes(a.url) if x.get("name") == name]
        assert len(listed) == 1 and {k: listed[0].get(k) for k in want} == want, listed

        # Delete: gone (from every node); unknown: 404.
        r = http("DELETE", f"{base}/{name}")
        assert r.status == 200, f"delete: {r}"
        assert [x for x in remotes(a.url) if x.get("name") == name] == []
        for url in a.urls[1:]:
            eventually(f"the reference gone from A's node at {url}",
                       lambda: not [x for x in remotes(url) if x.get("name") == name],
                       timeout=20)
        r = http("DELETE", f"{base}/{name}")
        assert r.status == 404, f"delete again: {r}"
        r = http("DELETE", f"{base}/no-such-reference")
        assert r.status == 404, f"delete unknown: {r}"
        # And the name can be used again.
        r = add_remote(a, name, b)
        assert r.status == 200, f"re-adding a deleted name: {r}"
    finally:
        http("DELETE", f"{base}/{name}")


# ------------------------------------------------------------------ 3. replication admin

def test_create_replication_validation_and_lifecycle(cluster_a, cluster_b):
    a, b = cluster_a, cluster_b
    uuid_b = pools_uuid(b_url(b), AUTH_B)
    create_bucket(b_url(b), AUTH_B, "v_seqno")
    create_bucket(b_url(b), AUTH_B, "v_lww", conflictResolutionType="lww")
    ref = "ref-validate"
    refs = f"{a.url}/pools/default/remoteClusters"
    rid = None
    try:
        r = add_remote(a, ref, b)
        assert r.status == 200 and r.body.get("uuid") == uuid_b, f"reference: {r}"

        def refused(what: str, r: Resp, field_name: Optional[str] = None) -> None:
            assert r.status == 400 and is_field_errors(r), f"{what}: {r}"
            if field_name is not None:
                assert field_name in field_errors(r), \
                    f"{what}: the error names another field: {r}"

        refused("unknown fromBucket", create_replication(a.url, "nosuch_src", ref, "v_seqno"),
                "fromBucket")
        refused("unknown toCluster", create_replication(a.url, "default", "no-ref", "v_seqno"),
                "toCluster")
        refused("unknown toBucket on B", create_replication(a.url, "default", ref, "nosuch"))
        r = create_replication(a.url, "default", ref, "v_lww")
        refused("seqno bucket to an lww bucket", r)
        assert re.search(r"conflict[ _-]?resolution", r.text, re.I), \
            f"the mismatch's message does not mention conflict resolution: {r}"
        refused("a filter that is no regex",
                create_replication(a.url, "default", ref, "v_seqno", filterExpression="keep-("),
                "filterExpression")
        assert not [t for t in xdcr_tasks(a.url) if t.get("source") == "default"], \
            f"a refused replication shows as a task: {xdcr_tasks(a.url)}"

        # The good one.
        r = create_replication(a.url, "default", ref, "v_seqno")
        assert r.status == 200 and isinstance(r.body, dict), f"createReplication: {r}"
        rid = r.body.get("id")
        assert rid == f"{uuid_b}/default/v_seqno", r
        diag = lambda: diagnostics(a, b, rid, None, None)  # noqa: E731
        refused("the same replication again", create_replication(a.url, "default", ref,
                                                                 "v_seqno"))
        r = create_replication(a.urls[1], "default", ref, "v_seqno")
        assert r.status == 400, f"the same replication again, via A's node 1: {r}"
        # A reference in use stays.
        r = http("DELETE", f"{refs}/{ref}")
        assert r.status == 400, f"deleting a reference in use: {r}"
        assert [x.get("name") for x in remotes(a.url)].count(ref) == 1

        # Listed as a running task, by every node.
        want = {"type": "xdcr", "id": rid, "source": "default",
                "target": f"/remoteClusters/{uuid_b}/buckets/v_seqno", "filterExpression": ""}
        for url in a.urls:
            t = eventually(f"the task running at {url}",
                           lambda: (lambda t: t if t and t.get("status") == "running" else None)(
                               task_of(url, rid)), timeout=20, diag=diag)
            assert {k: t.get(k) for k in want} == want, t
            for counter in ("docsWritten", "docsFailedCrTarget", "changesLeft"):
                assert isinstance(t.get(counter), int), f"{counter} in {t}"
        s = settings(a.url, rid)
        assert s.status == 200 and isinstance(s.body, dict), f"settings: {s}"
        assert s.body.get("pauseRequested") is False and s.body.get("filterExpression") == "", s

        # Pause (asked of node 1, seen by node 0), resume.
        r = set_paused(a.urls[1], rid, True)
        assert r.status == 200, f"pause: {r}"
        eventually("pauseRequested true", lambda: settings(a.url, rid).body.get(
            "pauseRequested") is True, timeout=20, diag=diag)
        for url in a.urls:
            eventually(f"the task paused at {url}",
                       lambda: (task_of(url, rid) or {}).get("status") == "paused",
                       timeout=20, diag=diag)
        r = set_paused(a.url, rid, False)
        assert r.status == 200, f"resume: {r}"
        assert settings(a.url, rid).body.get("pauseRequested") is False
        for url in a.urls:
            eventually(f"the task running again at {url}",
                       lambda: (task_of(url, rid) or {}).get("status") == "running",
                       timeout=20, diag=diag)

        # Cancel: gone; again: 404; the reference can go now.
        r = cancel(a.url, rid)
        assert r.status == 200, f"cancel: {r}"
        for url in a.urls:
            eventually(f"the task gone at {url}", lambda: task_of(url, rid) is None,
                       timeout=20, diag=diag)
        r = cancel(a.url, rid)
        assert r.status == 404, f"cancel again: {r}"
        rid = None

        # Created paused: shown paused from the start; a filter is shown where it is asked.
        r = create_replication(a.url, "default", ref, "v_seqno", pauseRequested="true",
                               filterExpression="^user::")
        assert r.status == 200 and r.body.get("id") == f"{uuid_b}/default/v_seqno", r
        rid = r.body["id"]
        s = settings(a.url, rid)
        assert s.status == 200 and s.body.get("pauseRequested") is True, s
        assert s.body.get("filterExpression") == "^user::", s
        t = eventually("the task created paused", lambda: task_of(a.url, rid), timeout=20,
                       diag=diag)
        assert t.get("status") == "paused" and t.get("filterExpression") == "^user::", t
        r = cancel(a.url, rid)
        assert r.status == 200, f"cancel: {r}"
        rid = None

        r = http("DELETE", f"{refs}/{ref}")
        assert r.status == 200, f"deleting the reference once unused: {r}"
        assert ref not in [x.get("name") for x in remotes(a.url)]
    finally:
        if rid is not None:
            cancel(a.url, rid)
        http("DELETE", f"{refs}/{ref}")


# ------------------------------------------------------------------ 4. one way, all of it

def test_one_way_replication_carries_documents_and_metadata(cluster_a, cluster_b, sdk_a, sdk_b,
                                                            remote_b):
    a, b = cluster_a, cluster_b
    src, dst = "ow_src", "ow_dst"
    make_pair(a, src, b, dst)
    col_a = ready_collection(sdk_a, src)
    col_b = ready_collection(sdk_b, dst)
    model: Dict[str, Want] = {}

    def fresh(i: int, prefix: str) -> Want:
        """Document i's first version: its kind by i, some with a far expiry, some with a
        user xattr (binary ones too)."""
        kind = {5: "bin", 6: "str"}.get(i % 10, "json")
        if kind == "json":
            w = Want("json", {"i": i, "v": 1, "name": f"{prefix}{i}", "tags": ["a", i % 3]})
        elif kind == "bin":
            w = Want("bin", bytes([i % 256, 0, 255]) + f"bin-{i}".encode(),
                     flags=0xDEAD0000 | i)
        else:
            w = Want("str", f"string value {i} é".encode(), flags=STRING_FLAGS)
        if i % 10 in (7, 8) or i % 20 == 6:
            w.expiry = FAR_EXPIRY
        if i % 10 in (8, 9) or i % 20 == 5:
            w.owner = f"owner-{i % 4}"
        w.history.append("create")
        return w

    def short_lived(i: int) -> Want:
        """A document that expires during the test: JSON (every other with a user xattr),
        binary with custom flags, or JSON written without expiry and then touched."""
        kind = ("json", "bin", "touched", "json")[i % 4]
        if kind == "bin":
            w = Want("bin", f"ttl-bin-{i}".encode() + bytes([0, i % 256]), flags=0xBEEF0000 | i)
        else:
            w = Want("json", {"ttl": i, "k": kind})
        w.expiry = SHORT_EXPIRY
        if i % 4 in (0, 1):
            w.owner = f"ttl-owner-{i % 3}"
        w.history.append("touch" if kind == "touched" else "create")
        return w

    # 300 documents before the replication exists (sent by its backfill)...
    for i in range(300):
        key = f"pre-{i}"
        model[key] = fresh(i, "pre-")
        write(col_a, key, model[key])

    rid = start_replication(a, src, remote_b, dst)
    diag = lambda: diagnostics(a, b, rid, src, dst)  # noqa: E731
    try:
        # ... and 1700 while it runs.
        for i in range(1700):
            key = f"doc-{i}"
            model[key] = fresh(i, "doc-")
            write(col_a, key, model[key])

        # Documents that expire while the test runs: written with a short expiry (some with
        # a user xattr, kept with the expiry), or written without one and touched to it.
        ttl = {f"ttl-{i}": short_lived(i) for i in range(TTL_DOCS)}
        for key, w in ttl.items():
            if "touch" in w.history:
                write(col_a, key, Want(w.kind, w.value, w.flags, owner=w.owner))
                col_a.touch(key, SHORT_EXPIRY)
            else:
                write(col_a, key, w)
        ttl_written = time.monotonic()
        for key, w in ttl.items():   # A holds them, with an expiry (unless already past it)
            st = live_state(col_a, key)
            if st is None:
                assert time.monotonic() - ttl_written > 1.5, f"{key} gone from A at once"
            else:
                assert (p := model_problem(key, w, st)) is None, p

        keys = sorted(model)
        for n, key in enumerate(keys):
            w = model[key]
            if n % 7 == 0:    # a new body (and flags), whole
                if w.kind == "json":
                    w.value = {**w.value, "v": 2, "extra": "x" * (n % 50)}
                else:
                    w.value = w.value + b"-v2"
                    w.flags = w.flags if w.kind == "str" else w.flags ^ 0x100
                w.history.append("rewrite")
                write(col_a, key, w)
            if n % 11 == 0 and w.kind == "json":   # body and xattr in one sub-doc mutation
                col_a.mutate_in(key, [SD.upsert("v", 3),
                                      SD.upsert("meta.owner", "z", xattr=True,
                                                create_parents=True)],
                                MutateInOptions(preserve_expiry=True))
                w.value = {**w.value, "v": 3}
                w.owner = "z"
                w.history.append("mutate_in")
            if n % 13 == 0:   # a new expiry only
                col_a.touch(key, FARTHER_EXPIRY)
                w.expiry = FARTHER_EXPIRY
                w.history.append("touch")
        for n, key in enumerate(keys):
            if n % 9 == 4:
                col_a.remove(key)
                model[key].deleted = True
                model[key].history.append("remove")
        for n, key in enumerate(keys):
            if n % 27 == 4:   # back after its deletion
                w = Want("json", {"again": n}, history=model[key].history + ["recreate"])
                model[key] = w
                write(col_a, key, w)

        live = [k for k in keys if not model[k].deleted]
        gone = [k for k in keys if model[k].deleted]
        print(f"{len(keys)} keys written on A: {len(live)} live, {len(gone)} deleted, and "
              f"{len(ttl)} with a {SHORT_EXPIRY.seconds} s expiry")

        # The short-lived ones are past their expiry now (expiries count whole seconds, so
        # one more); reading them on A expires them there, and their expirations go to B.
        time.sleep(max(0.0, ttl_written + SHORT_EXPIRY.seconds + 1 - time.monotonic()))
        eventually("the short-lived documents expired on A",
                   lambda: all([absent(col_a, k) for k in ttl]), timeout=10, diag=diag)

        # A holds what was written (checks the test, not the replication).
        want_a = {k: live_state(col_a, k) for k in live}
        problems = [p for k in live if (p := model_problem(k, model[k], want_a[k]))]
        assert not problems, "A itself:\n" + "\n".join(problems[:30])
        assert all(absent(col_a, k) for k in gone)
        eventually(f"A's {src} to hold its {len(live)} live documents (the expired ones out)",
                   lambda: a_items(a, src) == len(live), timeout=20,
                   diag=lambda: f"A: {a_items(a, src)} items, {len(live)} live\n{diag()}")
        tomb_a = {k: tombstone_state(col_a, k) for k in gone}
        tomb_ttl_a = {k: tombstone_state(col_a, k) for k in ttl}
        not_deleted = {k: t for k, t in tomb_ttl_a.items() if t is not None and not t["deleted"]}
        assert not not_deleted, f"expired on A but not deleted there: {not_deleted}"

        # B converges to A, key by key.
        pending = set(keys)
        last: Dict[str, str] = {}

        def converged() -> bool:
            for k in sorted(pending):
                if model[k].deleted:
                    if not absent(col_b, k):
                        last[k] = f"{k}: deleted on A, live on B ({model[k].history})"
                        continue
                    tb = tombstone_state(col_b, k)
                    if tb is not None and tb != tomb_a[k]:
                        last[k] = f"{k}: tombstone on B {tb} != A's {tomb_a[k]}"
                        continue
                else:
                    got = live_state(col_b, k)
                    if got != want_a[k]:
                        diff = {f: (want_a[k][f], None if got is None else got.get(f))
                                for f in want_a[k] if got is None or got.get(f) != want_a[k][f]}
                        last[k] = f"{k} ({model[k].history}): (A, B) differ in {diff}"
                        continue
                pending.discard(k)
                last.pop(k, None)
            return not pending

        def not_converged() -> str:
            return (f"{len(pending)} of {len(keys)} keys differ on B, e.g.:\n"
                    + "\n".join(list(last.values())[:20]) + "\n" + diag())

        eventually("B to hold A's documents with A's metadata", converged,
                   diag=not_converged, interval=0.5)
        # Nothing on B has read or paged the short-lived documents (its expiry pager waits an
        # hour), so only A's replicated expirations can take them out of B's count.
        eventually(f"B's {dst} to hold exactly {len(live)} items (the expired ones deleted "
                   "by A's expirations)",
                   lambda: b_items(b, dst) == len(live), timeout=30,
                   diag=lambda: f"B: {b_items(b, dst)} items, {len(live)} live on A\n{diag()}")
        tombstones_on_b = sum(tombstone_state(col_b, k) is not None for k in gone)
        print(f"B converged: {len(live)} live documents equal, {len(gone)} deleted absent "
              f"({tombstones_on_b} with a tombstone on B)")

        # The task counts what it wrote, and has nothing left to do.
        t = eventually("docsWritten > 0 in the task",
                       lambda: (lambda t: t if t and (t.get("docsWritten") or 0) > 0 else None)(
                           task_of(a.url, rid)), timeout=30, diag=diag)
        print(f"task: {json.dumps(t)}")
        assert t.get("status") == "running", t
        eventually("changesLeft 0 in the task",
                   lambda: (task_of(a.url, rid) or {}).get("changesLeft") == 0,
                   timeout=30, diag=diag)

        # The expired ones: absent on B, each tombstone B keeps A's (its CAS and revision,
        # so it is A's expiration, not one of B's own).
        shown = [k for k in ttl if not absent(col_b, k)]
        assert not shown, f"expired on A, still readable on B: {shown}\n{diag()}"
        tomb_ttl_b = {k: tombstone_state(col_b, k) for k in ttl}
        differ = {k: (tomb_ttl_a[k], t) for k, t in tomb_ttl_b.items()
                  if t is not None and t != tomb_ttl_a[k]}
        assert not differ, (
            f"{len(differ)} of {len(ttl)} expired documents' tombstones differ, (A, B): {differ}"
            f"\ndocsFailedCrTarget in the task (B refused a version A sent): "
            f"{(task_of(a.url, rid) or {}).get('docsFailedCrTarget')}\n{diag()}")
        print(f"{len(ttl)} expired documents absent on B "
              f"({sum(t is not None for t in tomb_ttl_b.values())} with A's tombstone)")
    finally:
        cancel(a.url, rid)


# ------------------------------------------------------------------ 5. filter

def test_filter_expression_replicates_matching_keys_only(cluster_a, cluster_b, sdk_a, sdk_b,
                                                         remote_b):
    a, b = cluster_a, cluster_b
    src, dst = "f_src", "f_dst"
    make_pair(a, src, b, dst)
    col_a = ready_collection(sdk_a, src)
    col_b = ready_collection(sdk_b, dst)
    rid = start_replication(a, src, remote_b, dst, filterExpression="^keep-")
    diag = lambda: diagnostics(a, b, rid, src, dst)  # noqa: E731
    try:
        s = settings(a.url, rid)
        assert s.status == 200 and s.body.get("filterExpression") == "^keep-", s
        t = eventually("the filtered task", lambda: task_of(a.url, rid), timeout=20, diag=diag)
        assert t.get("filterExpression") == "^keep-", t

        drops = [f"drop-{i}" for i in range(100)] + [f"x-keep-{i}" for i in range(20)]
        keeps = [f"keep-{i}" for i in range(100)]
        for k in drops:   # first, so they are ahead of the keeps in every vbucket
            col_a.upsert(k, {"k": k})
        for k in keeps:
            col_a.upsert(k, {"k": k})
        missing = set(keeps)

        def keeps_arrived() -> bool:
            for k in sorted(missing):
                try:
                    if col_b.get(k).content_as[dict] == {"k": k}:
                        missing.discard(k)
                except DocumentNotFoundException:
                    pass
            return not missing

        eventually("every keep-* on B", keeps_arrived,
                   diag=lambda: f"missing: {sorted(missing)[:20]}\n{diag()}")
        time.sleep(2)   # a little longer for anything that should not come
        leaked = [k for k in drops if not absent(col_b, k)]
        assert not leaked, f"keys the filter excludes reached B: {leaked[:20]}\n{diag()}"
        assert b_items(b, dst) == len(keeps), diag()
    finally:
        cancel(a.url, rid)


# ------------------------------------------------------------------ 6. pause and resume

def test_pause_holds_mutations_until_resume(cluster_a, cluster_b, sdk_a, sdk_b, remote_b):
    a, b = cluster_a, cluster_b
    src, dst = "p_src", "p_dst"
    make_pair(a, src, b, dst)
    col_a = ready_collection(sdk_a, src)
    col_b = ready_collection(sdk_b, dst)
    rid = start_replication(a, src, remote_b, dst)
    diag = lambda: diagnostics(a, b, rid, src, dst)  # noqa: E731
    try:
        first = [f"p-{i}" for i in range(50)]
        for k in first:
            col_a.upsert(k, {"k": k, "v": 1})
        eventually("the first 50 on B", lambda: all(not absent(col_b, k) for k in first),
                   diag=diag)

        r = set_paused(a.url, rid, True)
        assert r.status == 200, f"pause: {r}"
        eventually("the task paused", lambda: (task_of(a.url, rid) or {}).get("status")
                   == "paused", timeout=20, diag=diag)
        assert settings(a.url, rid).body.get("pauseRequested") is True

        later = [f"q-{i}" for i in range(200)]
        for k in later:
            col_a.upsert(k, {"k": k})
        for k in first[:10]:
            col_a.remove(k)
        for k in first[10:20]:
            col_a.upsert(k, {"k": k, "v": 2})
        time.sleep(5)
        arrived = [k for k in later if not absent(col_b, k)]
        assert not arrived, f"{len(arrived)} documents reached B while paused: {arrived[:10]}" \
                            f"\n{diag()}"
        assert all(not absent(col_b, k) for k in first[:10]), "a deletion reached B while paused"
        assert all(col_b.get(k).content_as[dict]["v"] == 1 for k in first[10:20]), \
            "an update reached B while paused"
        assert b_items(b, dst) == 50, diag()
        assert (task_of(a.url, rid) or {}).get("status") == "paused", diag()

        r = set_paused(a.url, rid, False)
        assert r.status == 200, f"resume: {r}"
        eventually("the task running again", lambda: (task_of(a.url, rid) or {}).get("status")
                   == "running", timeout=20, diag=diag)
        assert settings(a.url, rid).body.get("pauseRequested") is False

        def caught_up() -> bool:
            return (all(not absent(col_b, k) for k in later)
                    and all(absent(col_b, k) for k in first[:10])
                    and all(col_b.get(k).content_as[dict]["v"] == 2 for k in first[10:20]))

        eventually("what was written while paused, on B after resume", caught_up, diag=diag)
        eventually("B's item count after resume", lambda: b_items(b, dst) == 240, timeout=20,
                   diag=diag)
    finally:
        cancel(a.url, rid)
