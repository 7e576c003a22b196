"""XDCR filtering expressions and replication settings, end to end.

Two clusters of one node each, made by `sluice cluster up` and shared by the module: A is the
source and B the target. B's expiry pager runs once an hour, so a document B holds is only
removed by a change that A replicates. A has one remote reference to B. Each test makes its
own source bucket on A and its own target buckets on B. It cancels its replications and
deletes its buckets when it ends. Documents are written and read with the Python SDK, the
REST goes to A's admin port, and the counters come from A's `/pools/default/tasks`. Each
test first writes every key once per phase, so a key is one change in its stream and the
counters can be checked exactly.

* test_body_expressions_select_exactly_the_matching_documents: one source of 98
  documents in mixed shapes: hotels with `stars`, airlines, nested `geo.alt` (with one
  present but null), arrays (`schedule[0].flight`), a field with a space in its name, dates,
  non-JSON bodies, and documents with a user xattr (`color`) or a system xattr
  (`_sync.rev`), each written in one mutation. Half are written before the replications
  exist and half while they run. It goes to five targets through five expressions:
  `type = "hotel" AND stars >= 3`; an xattr filter; `EXISTS(geo.alt) AND geo.alt > 1000 OR
  REGEXP_CONTAINS(META().id, "^keep")`; a mix of array paths, a backticked name,
  arithmetic, POW/ABS, DATE(), `value = 7`, `order.total`, single quotes and `type IS
  MISSING` (which matches exactly the non-JSON bodies); and `IS NOT NULL` / `IS NOT MISSING`
  / `NOT ... IS NULL`, where `stars IS NOT NULL` holds for a document without `stars`
  (XDCR's meaning). Each target holds exactly the documents that a Python model of the
  expression selects, with A's bodies and xattrs, and nothing else. Each task shows
  received = N, docsWritten = selected and docsFiltered = N - selected, and settings and
  the task show the expression.
* test_deletions_follow_the_filter_kind: a key-only expression
  (`REGEXP_CONTAINS(META().id, "^k-")`), a legacy key regex (`^k-`) and a body expression
  (`keep = true`). B holds its own `x-*` documents, which no filter lets A's writes reach.
  After A deletes its `x-*`, the key filters drop the deletions and B keeps its `x-*`. The
  body filter sends them, and B's `x-*` are deleted. `k-*` documents that A updates so they
  no longer match stay on B's body target in their old form (Couchbase's behaviour). The
  key targets get the update. `k-*` deleted on A are deleted on all three. There are exact
  item counts and docsFiltered / docsWritten / docsReceivedFromDcp on each task. Markers in
  every vbucket prove that the pipelines passed the changes.
* test_filter_deletion_expiration_and_bypass_expiry: four targets of one source: no setting,
  filterDeletion, filterExpiration and filterBypassExpiry. A deletes 5 documents and lets 10
  short-TTL documents expire (read after their TTL). Once markers in every vbucket arrive:
  the filterDeletion target still has the deleted documents, the filterExpiration target
  still holds the expired ones (B's item count, as B does not expire them itself), and the
  others have neither. The bypass target holds its copies with `$document.exptime` 0, and
  the control target holds them with A's exptime. docsFiltered is exactly 5 and 10, and no
  target refuses anything (docsFailedCrTarget 0): where B's copies carry the past expiry,
  A's expiration is resolved against them as stored, not after B expired them itself, so
  the control target's tombstones are A's (CAS and revision).
* test_settings_rest: GET shows the defaults (threshold 256, the three flags false, the
  filter). A POST changes all four, and GET shows them. The pipeline restarts (`starts`
  grows) from its checkpoints: no replay, since docsReceivedFromDcp grows by the new writes
  only and nothing is refused by conflict resolution. Deletions are then dropped
  (filterDeletion). Malformed values (a filter that does not compile, a filterSkipRestream
  that is not a boolean) are 400 with errors.<field>, and nothing changes, not even the
  valid fields of the same request. The same filter is accepted. createReplication takes
  the settings, and refuses malformed ones without creating the replication.
* test_filter_change_restreams_unless_skipped: 30 `kind = "a"`, 20 `"b"` and 10 `"c"`
  documents replicate through `kind = "a"`. Changing the filter to `kind = "b"` re-streams:
  every change is received again (received 60 + 60), the b documents reach B and the a
  documents stay there (the target keeps what it has, as in Couchbase). Changing it to
  `kind = "c"` with filterSkipRestream=true goes on from the checkpoints: the old c
  documents stay behind, new ones cross (received grows by the new writes only). An empty
  filter (re-streaming) then sends everything: the old c documents arrive, and what B
  already holds loses to itself (docsFailedCrTarget). Counters are checked exactly at
  each step, and settings and the task show each filter.
* test_optimistic_threshold: B already holds winning versions (revision 5) of `big-*`
  (600-byte) and `small-*` (20-byte) documents. At the default threshold (256), the big ones
  are kept back at the source (docsFailedCrSource) and the small ones are refused by B
  (docsFailedCrTarget). At 0, every one is pre-checked (all in docsFailedCrSource). At
  20971520, none is (all in docsFailedCrTarget). Changing the running default replication
  to 0 moves a later losing small document into docsFailedCrSource.
* test_bad_filters_are_refused: `type = (`, `((`, a lookahead in REGEXP_CONTAINS, a bad
  pattern in REGEXP_CONTAINS and a filter over 4096 bytes are each 400
  errors.filterExpression, and no replication is made. A bare name (`orders`) is accepted
  as a key regex and selects by key, not by the body's `orders` field.

Run: cd tests/interop && python3 -m pytest test_xdcr_filters.py -q -p no:cacheprovider
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Callable, List, Optional, Sequence

import couchbase.subdocument as SD
import pytest
from couchbase.exceptions import DocumentNotFoundException
from couchbase.options import GetOptions, MutateInOptions, UpsertOptions

from conftest import HOST, PASSWORD, USERNAME
from test_cluster_up import free_base
from xdcr_helpers import (AUTH_A, RAW, VBS, ClusterA, Passthrough, absent, active_items,
                          add_remote_ref, cancel, connect, create_bucket, create_replication,
                          eventually, field_errors, http, live_state, probe_keys, quoted,
                          ready_collection, safe_diag, settings, start_cluster_a,
                          start_replication_at, stop_cluster, task_of, tasks_report,
                          tombstone_state)

pytestmark = pytest.mark.timeout(180)

SETTLE_S = 60.0
THRESHOLD_MAX = 20971520
DEFAULTS = {"filterDeletion": False, "filterExpiration": False, "filterBypassExpiry": False,
            "optimisticReplicationThreshold": 256, "pauseRequested": False}


# ------------------------------------------------------------------ clusters

@dataclass
class Pair:
    a: ClusterA
    b: ClusterA
    ref: dict
    sdk_a: object
    sdk_b: object


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A and B (one node each, B's expiry pager hourly), A's reference to B, SDKs on both."""
    root = tmp_path_factory.mktemp("xdcr-filters")
    (root / "a").mkdir()
    (root / "b").mkdir()
    a = start_cluster_a(root / "a", free_base(), nodes=1, replicas=0)
    try:
        b = start_cluster_a(root / "b", free_base(), nodes=1, replicas=0,
                            env={"SLUICE_EXPIRY_PAGER_INTERVAL_S": "3600"})
        try:
            ref = add_remote_ref(a.url, "b", f"{HOST}:{b.admin_ports[0]}", USERNAME,
                                 PASSWORD, auth=AUTH_A)
            sdk_a = connect(a.connstr, USERNAME, PASSWORD)
            sdk_b = connect(b.connstr, USERNAME, PASSWORD)
            try:
                yield Pair(a, b, ref, sdk_a, sdk_b)
            finally:
                sdk_a.close()
                sdk_b.close()
        finally:
            stop_cluster(b.proc)
    finally:
        stop_cluster(a.proc)


class Scenario:
    """One test's buckets and replications, torn down at the end (replications cancelled,
    buckets deleted) so later tests do not share the machine with them."""

    def __init__(self, p: Pair):
        self.p = p
        self.a_buckets: List[str] = []
        self.b_buckets: List[str] = []
        self.rids: List[str] = []

    def source(self, name: str):
        create_bucket(self.p.a.url, AUTH_A, name, replicaNumber="0")
        self.a_buckets.append(name)
        return ready_collection(self.p.sdk_a, name)

    def target(self, name: str):
        create_bucket(self.p.b.url, AUTH_A, name, replicaNumber="0")
        self.b_buckets.append(name)
        return ready_collection(self.p.sdk_b, name)

    def replicate(self, src: str, dst: str, **extra: str) -> str:
        rid = start_replication_at(self.p.a.url, src, self.p.ref, dst, **extra)
        self.rids.append(rid)
        return rid

    def b_items(self, bucket: str) -> int:
        return active_items(self.p.b.kv_ports, USERNAME, PASSWORD, bucket)

    def diag(self) -> str:
        out = [tasks_report([self.p.a.url])]
        for rid in self.rids:
            out.append(f"settings {rid}: {settings(self.p.a.url, rid)}")
        for bucket in self.b_buckets:
            try:
                out.append(f"B {bucket}: {self.b_items(bucket)} items")
            except Exception as e:  # noqa: BLE001
                out.append(f"B {bucket}: {e!r}")
        out.append(self.p.a.log_tail(15))
        out.append(self.p.b.log_tail(8))
        return "\n".join(out)

    def close(self) -> None:
        for rid in self.rids:
            cancel(self.p.a.url, rid)
        for name in self.a_buckets:
            http("DELETE", f"{self.p.a.url}/pools/default/buckets/{name}")
        for name in self.b_buckets:
            http("DELETE", f"{self.p.b.url}/pools/default/buckets/{name}")


@pytest.fixture
def sc(pair):
    s = Scenario(pair)
    try:
        yield s
    finally:
        s.close()


# ------------------------------------------------------------------ counters

def counters(t: dict) -> dict:
    keys = ("docsReceivedFromDcp", "docsWritten", "docsFiltered", "docsFailedCrSource",
            "docsFailedCrTarget", "changesLeft", "starts")
    return {k: t.get(k) for k in keys}


def settle(sc: Scenario, rid: str, received: int, timeout: float = SETTLE_S) -> dict:
    """The task once it has received at least `received` changes, has nothing left and has
    accounted for every change it received (written, filtered or lost a conflict); then its
    received count must be exactly `received`."""
    def done():
        t = task_of(sc.p.a.url, rid)
        if not t or t.get("changesLeft") != 0 or t.get("docsReceivedFromDcp", 0) < received:
            return None
        accounted = (t["docsWritten"] + t["docsFiltered"] + t["docsFailedCrSource"]
                     + t["docsFailedCrTarget"])
        return t if accounted >= t["docsReceivedFromDcp"] else None

    t = eventually(f"{rid} settled at {received} received", done, timeout=timeout,
                   diag=sc.diag, interval=0.3)
    assert t["docsReceivedFromDcp"] == received, \
        f"{rid}: expected exactly {received} changes received: {counters(t)}{safe_diag(sc.diag)}"
    return t


def assert_counts(t: dict, what: str, diag: Callable[[], str], **want: int) -> None:
    got = {k: t.get(k) for k in want}
    assert got == want, f"{what}: counters {got}, expected {want} (task {counters(t)})" \
                        f"{safe_diag(diag)}"


# ------------------------------------------------------------------ documents

def raw_body(col, key: str) -> Optional[bytes]:
    try:
        return col.get(key, GetOptions(transcoder=RAW)).value[0]
    except DocumentNotFoundException:
        return None


def wait_present(sc: Scenario, col, keys: Sequence[str], what: str,
                 timeout: float = SETTLE_S) -> None:
    pending = set(keys)

    def check():
        for k in sorted(pending):
            if not absent(col, k):
                pending.discard(k)
        return not pending

    eventually(what, check, timeout=timeout, interval=0.3,
               diag=lambda: f"still missing: {sorted(pending)[:10]}\n{sc.diag()}")


def write_markers(col, prefix: str, body: dict) -> List[str]:
    """One document in every vbucket of A's bucket: once all are on B, the pipeline has
    passed every change made before them."""
    keys = probe_keys(VBS, prefix)
    for k in keys:
        col.upsert(k, body)
    return keys


# ------------------------------------------------------------------ 1. body expressions

HOTEL = 'type = "hotel" AND stars >= 3'
XATTR = 'META().xattrs.color = "blue" OR META().xattrs._sync.rev >= 2'
GEO = 'EXISTS(geo.alt) AND geo.alt > 1000 OR REGEXP_CONTAINS(META().id, "^keep")'
MISC = ('schedule[0].flight = "AF1" OR `a b`.c % 5 = 3 '
        "OR (type = 'misc' AND order.total >= POW(2, 3)) "
        'OR DATE(opened) < DATE("2019-01-25") OR ABS(delta) = 4 OR value = 7 '
        "OR type IS MISSING")
# XDCR's meaning: `stars IS NOT NULL` is TRUE where there is no `stars` (SQL++ would say
# MISSING, which is not TRUE).
NULLS = ('type = "landmark" AND stars IS NOT NULL AND geo.alt IS NOT MISSING '
         "AND NOT geo.alt IS NULL")
BINARY = b"\x00\x01\x02 not json {\"type\": \"hotel\"}"


@dataclass
class Doc:
    key: str
    body: Optional[dict]          # None: a binary (non-JSON) body, BINARY
    xattrs: Optional[dict] = None


def num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def field(v, *path):
    """The value at `path` in a JSON value, None where there is none (MISSING)."""
    for name in path:
        if isinstance(name, int):
            v = v[name] if isinstance(v, list) and len(v) > name else None
        else:
            v = v.get(name) if isinstance(v, dict) else None
    return v


def sel_hotel(d: Doc) -> bool:
    b = d.body
    return b is not None and b.get("type") == "hotel" and num(b.get("stars")) and b["stars"] >= 3


def sel_xattr(d: Doc) -> bool:
    rev = field(d.xattrs, "_sync", "rev")
    return field(d.xattrs, "color") == "blue" or (num(rev) and rev >= 2)


def sel_geo(d: Doc) -> bool:
    alt = field(d.body, "geo", "alt")
    return (num(alt) and alt > 1000) or d.key.startswith("keep")


def sel_nulls(d: Doc) -> bool:
    geo = field(d.body, "geo")
    return (field(d.body, "type") == "landmark" and field(d.body, "stars") is None
            and isinstance(geo, dict) and "alt" in geo and geo["alt"] is not None)


def sel_misc(d: Doc) -> bool:
    if d.body is None:
        return True                                        # type IS MISSING
    b = d.body
    c = field(b, "a b", "c")
    total = field(b, "order", "total")
    opened = field(b, "opened")
    delta = field(b, "delta")
    return (field(b, "schedule", 0, "flight") == "AF1"
            or (num(c) and c % 5 == 3)
            or (b.get("type") == "misc" and num(total) and total >= 8)
            or (isinstance(opened, str) and opened[:10] < "2019-01-25")
            or (num(delta) and abs(delta) == 4)
            or field(b, "value") == 7)


def mixed_documents() -> List[Doc]:
    docs: List[Doc] = []
    for i in range(18):
        body = {"type": "hotel", "stars": i % 6, "name": f"Hotel {i}"}
        if i % 3 == 0:
            body["schedule"] = [{"flight": "AF1"}, {"flight": "LH3"}]
        elif i % 3 == 1:
            body["schedule"] = [{"flight": "BA2"}, {"flight": "AF1"}]
        docs.append(Doc(f"hotel-{i}", body))
    for i in range(6):
        docs.append(Doc(f"airline-{i}", {"type": "airline", "stars": 5, "value": i + 4}))
    for i in range(10):
        docs.append(Doc(f"land-{i}", {"type": "landmark", "geo": {"alt": 250 * i, "lat": 1.5}}))
    for i in range(3):
        docs.append(Doc(f"land-noalt-{i}", {"type": "landmark", "geo": {"lat": 2}}))
    docs.append(Doc("land-nullalt", {"type": "landmark", "geo": {"alt": None}}))
    for i in range(4):
        docs.append(Doc(f"keep-{i}", {"type": "airline", "stars": 1}))
    for i in range(5):
        docs.append(Doc(f"bin-{i}", None))
    for i in range(12):
        docs.append(Doc(f"xa-{i}", {"type": "hotel", "stars": 2 + i % 3},
                        {"color": "blue" if i % 2 == 0 else "red"}))
    for i in range(5):
        docs.append(Doc(f"xs-{i}", {"type": "sync", "n": i}, {"_sync": {"rev": i}}))
    for i in range(5):
        docs.append(Doc(f"sp-{i}", {"type": "misc", "a b": {"c": i}}))
    for i in range(6):
        docs.append(Doc(f"ord-{i}", {"type": "misc", "order": {"total": i * 2.5}}))
    for i, day in enumerate(["2019-01-24", "2019-01-25", "2019-01-26T00:00:00Z",
                             "2018-12-31", "2019-01-25T12:00:00Z"]):
        docs.append(Doc(f"date-{i}", {"type": "misc", "opened": day}))
    for i in range(10):
        docs.append(Doc(f"abs-{i}", {"type": "misc", "delta": i - 5}))
    for i in range(8):   # nothing selects these
        docs.append(Doc(f"other-{i}", {"type": "other", "stars": "5", "geo": "high"}))
    return docs


def store(col, d: Doc) -> None:
    """One mutation per document: a body with its xattrs in one sub-document write."""
    if d.body is None:
        col.upsert(d.key, BINARY, UpsertOptions(transcoder=Passthrough(0)))
    elif d.xattrs:
        specs = [SD.upsert(n, v, xattr=True) for n, v in d.xattrs.items()]
        specs += [SD.upsert(f, v) for f, v in d.body.items()]
        col.mutate_in(d.key, specs, MutateInOptions(store_semantics=SD.StoreSemantics.UPSERT))
    else:
        col.upsert(d.key, d.body)


def body_problem(col_b, d: Doc) -> Optional[str]:
    """Why B's copy of `d` differs from what A holds (None if it is the same)."""
    got = raw_body(col_b, d.key)
    if got is None:
        return f"{d.key}: absent on B"
    if d.body is None:
        return None if got == BINARY else f"{d.key}: B has {got!r}"
    if json.loads(got) != d.body:
        return f"{d.key}: B has {got!r}, A wrote {d.body}"
    for name, value in (d.xattrs or {}).items():
        got = col_b.lookup_in(d.key, [SD.get(name, xattr=True)]).content_as[lambda v: v](0)
        if got != value:
            return f"{d.key}: B's xattr {name} is {got!r}, A wrote {value!r}"
    return None


def test_body_expressions_select_exactly_the_matching_documents(sc):
    col_a = sc.source("expr_src")
    filters = {"expr_hotel": (HOTEL, sel_hotel), "expr_xattr": (XATTR, sel_xattr),
               "expr_geo": (GEO, sel_geo), "expr_misc": (MISC, sel_misc),
               "expr_nulls": (NULLS, sel_nulls)}
    cols_b = {name: sc.target(name) for name in filters}
    docs = mixed_documents()
    before, during = docs[0::2], docs[1::2]
    for d in before:
        store(col_a, d)
    rids = {name: sc.replicate("expr_src", name, filterExpression=text)
            for name, (text, _) in filters.items()}
    for name, rid in rids.items():
        s = settings(sc.p.a.url, rid)
        assert s.status == 200 and s.body.get("filterExpression") == filters[name][0], s
        t = task_of(sc.p.a.url, rid)
        assert t and t.get("filterExpression") == filters[name][0], t
    for d in during:
        store(col_a, d)

    for name, (text, sel) in filters.items():
        want = [d for d in docs if sel(d)]
        unwanted = [d for d in docs if not sel(d)]
        assert want and unwanted, f"the model selects all or nothing for {name}"
        t = settle(sc, rids[name], len(docs))
        print(f"{name} ({text}): {len(want)} of {len(docs)} selected; task {counters(t)}")
        assert_counts(t, name, sc.diag, docsWritten=len(want), docsFiltered=len(unwanted),
                      docsFailedCrSource=0, docsFailedCrTarget=0)
        col_b = cols_b[name]
        problems = [p for p in (body_problem(col_b, d) for d in want) if p]
        leaked = [d.key for d in unwanted if not absent(col_b, d.key)]
        assert not problems and not leaked, (
            f"{name} ({text}): wrong on B: {problems[:10]}; not selected but on B: "
            f"{leaked[:20]}{safe_diag(sc.diag)}")
        assert sc.b_items(name) == len(want), sc.diag()


# ------------------------------------------------------------------ 2. deletions by filter kind

def test_deletions_follow_the_filter_kind(sc):
    col_a = sc.source("del_src")
    filters = {"del_keyexpr": 'REGEXP_CONTAINS(META().id, "^k-")', "del_regex": "^k-",
               "del_body": "keep = true"}
    cols_b = {name: sc.target(name) for name in filters}
    ks = [f"k-{i}" for i in range(10)]
    xs = [f"x-{i}" for i in range(5)]
    for col_b in cols_b.values():   # B's own documents, which A's writes never reach
        for k in xs:
            col_b.upsert(k, {"owner": "B"})
    for k in ks:
        col_a.upsert(k, {"keep": True, "v": 1})
    for k in xs:
        col_a.upsert(k, {"keep": False, "v": 1})
    rids = {name: sc.replicate("del_src", name, filterExpression=text)
            for name, text in filters.items()}
    for name, rid in rids.items():
        settle(sc, rid, len(ks) + len(xs))
        assert sc.b_items(name) == len(ks) + len(xs), sc.diag()

    updated, deleted = ks[:3], ks[3:6]
    for k in updated:       # no longer matches the body filter
        col_a.upsert(k, {"keep": False, "v": 2})
    for k in deleted:
        col_a.remove(k)
    for k in xs:
        col_a.remove(k)
    markers = write_markers(col_a, "k-mark-", {"keep": True, "mark": True})
    for name, col_b in cols_b.items():
        wait_present(sc, col_b, markers, f"the markers on {name}")

    received = len(ks) + len(xs) + len(updated) + len(deleted) + len(xs) + len(markers)
    for name, col_b in cols_b.items():
        t = settle(sc, rids[name], received)
        print(f"{name} ({filters[name]}): task {counters(t)}")
        gone = [k for k in deleted if not absent(col_b, k)]
        assert not gone, f"{name}: deleted on A, still on B: {gone}{safe_diag(sc.diag)}"
        kept = [k for k in ks[6:] if raw_body(col_b, k) is None]
        assert not kept, f"{name}: missing on B: {kept}{safe_diag(sc.diag)}"
        if name == "del_body":
            # Body filter: the tombstones are sent (B's own x-* go), the updates that no
            # longer match are not (B keeps the old versions).
            stale = {k: json.loads(raw_body(col_b, k) or b"null") for k in updated}
            assert all(v == {"keep": True, "v": 1} for v in stale.values()), \
                f"{name}: updates that do not match reached B: {stale}{safe_diag(sc.diag)}"
            left = [k for k in xs if not absent(col_b, k)]
            assert not left, f"{name}: A's deletions of {left} did not reach B" \
                             f"{safe_diag(sc.diag)}"
            assert_counts(t, name, sc.diag, docsFiltered=len(xs) + len(updated),
                          docsWritten=len(ks) + len(deleted) + len(xs) + len(markers))
            want_items = len(ks) - len(deleted) + len(markers)
        else:
            # Key filters: the updates of k-* arrive, the deletions of x-* are filtered by
            # key, so B keeps its own x-*.
            new = {k: json.loads(raw_body(col_b, k) or b"null") for k in updated}
            assert all(v == {"keep": False, "v": 2} for v in new.values()), \
                f"{name}: updates missing on B: {new}{safe_diag(sc.diag)}"
            mine = {k: json.loads(raw_body(col_b, k) or b"null") for k in xs}
            assert all(v == {"owner": "B"} for v in mine.values()), \
                f"{name}: a deletion the key filter excludes reached B: {mine}" \
                f"{safe_diag(sc.diag)}"
            assert_counts(t, name, sc.diag, docsFiltered=2 * len(xs),
                          docsWritten=len(ks) + len(updated) + len(deleted) + len(markers))
            want_items = len(ks) - len(deleted) + len(xs) + len(markers)
        assert sc.b_items(name) == want_items, f"{name}{safe_diag(sc.diag)}"


# ------------------------------------------------------------------ 3. deletion/expiry settings

TTL = timedelta(seconds=6)
HOUR = timedelta(seconds=3600)


def test_filter_deletion_expiration_and_bypass_expiry(sc):
    col_a = sc.source("ttl_src")
    variants = {"ttl_all": {}, "ttl_nodel": {"filterDeletion": "true"},
                "ttl_noexp": {"filterExpiration": "true"},
                "ttl_bypass": {"filterBypassExpiry": "true"}}
    cols_b = {name: sc.target(name) for name in variants}
    rids = {name: sc.replicate("ttl_src", name, **extra) for name, extra in variants.items()}
    for name, extra in variants.items():
        body = settings(sc.p.a.url, rids[name]).body or {}
        want = {**DEFAULTS, **{k: True for k in extra}}
        assert {k: body.get(k) for k in DEFAULTS} == want, (name, body)

    ds = [f"d-{i}" for i in range(10)]
    ts = [f"t-{i}" for i in range(10)]
    fars = [f"far-{i}" for i in range(5)]
    for k in ds:
        col_a.upsert(k, {"d": k})
    ttl_written = time.monotonic()
    for k in ts:
        col_a.upsert(k, {"t": k}, UpsertOptions(expiry=TTL))
    for k in fars:
        col_a.upsert(k, {"far": k}, UpsertOptions(expiry=HOUR))
    first = len(ds) + len(ts) + len(fars)
    for name in variants:
        eventually(f"{first} documents on {name}", lambda n=name: sc.b_items(n) == first,
                   diag=sc.diag, interval=0.2)
    assert time.monotonic() - ttl_written < TTL.total_seconds(), \
        "the short-TTL documents took longer than their TTL to reach B: test too slow here"

    # Expiry as it arrived: kept with the control, dropped with filterBypassExpiry.
    # (Only B's bypass copies of the short-TTL documents are read: a read of an expired
    # document on another target would expire it there.)
    for k in fars:
        exp_a = live_state(col_a, k)["exptime"]
        all_b = live_state(cols_b["ttl_all"], k)
        bypass_b = live_state(cols_b["ttl_bypass"], k)
        assert exp_a and all_b["exptime"] == exp_a, (k, exp_a, all_b)
        assert bypass_b["exptime"] == 0, f"{k}: exptime {bypass_b['exptime']} on the " \
                                         f"bypass target (A: {exp_a}){safe_diag(sc.diag)}"
        assert json.loads(bypass_b["body"]) == json.loads(all_b["body"]), k
    for k in ts:
        st = live_state(cols_b["ttl_bypass"], k)
        assert st and st["exptime"] == 0, f"{k} on the bypass target: {st}"

    deleted = ds[:5]
    for k in deleted:
        col_a.remove(k)
    time.sleep(max(0.0, ttl_written + TTL.total_seconds() + 1 - time.monotonic()))
    # A read past the TTL expires them on A (if A's pager has not already).
    eventually("the short-TTL documents expired on A",
               lambda: all(absent(col_a, k) for k in ts), timeout=20, diag=sc.diag)
    markers = write_markers(col_a, "mk-", {"mark": True})
    for name, col_b in cols_b.items():
        wait_present(sc, col_b, markers, f"the markers on {name}")

    received = first + len(deleted) + len(ts) + len(markers)
    live_far = len(fars) + len(markers)
    want = {"ttl_all": (0, len(ds) - len(deleted) + live_far),
            "ttl_nodel": (len(deleted), len(ds) + live_far),
            "ttl_noexp": (len(ts), len(ds) - len(deleted) + len(ts) + live_far),
            "ttl_bypass": (0, len(ds) - len(deleted) + live_far)}
    tasks = {name: settle(sc, rids[name], received) for name in variants}
    for name, t in tasks.items():
        print(f"{name}: task {counters(t)}; B items {sc.b_items(name)}")
    for k in ts[:2]:
        print(f"{k}: A {tombstone_state(col_a, k)}; ttl_all "
              f"{tombstone_state(cols_b['ttl_all'], k)}; ttl_bypass "
              f"{tombstone_state(cols_b['ttl_bypass'], k)}")
    for name, (filtered, items) in want.items():
        # Where B's copies of t-* carry their (past) expiry, A's expiration is resolved
        # against them as stored (B does not expire them first, which would make A's lose
        # to a tombstone of B's own): nothing is refused.
        assert_counts(tasks[name], name, sc.diag, docsFiltered=filtered,
                      docsFailedCrSource=0, docsFailedCrTarget=0)
    for k in ts:
        a_t, b_t = tombstone_state(col_a, k), tombstone_state(cols_b["ttl_all"], k)
        assert a_t == b_t, f"{k}: A's tombstone {a_t}, the control target's {b_t}"
        got = sc.b_items(name)
        assert got == items, f"{name}: {got} items on B, expected {items}{safe_diag(sc.diag)}"
    # Deletions: dropped with filterDeletion only.
    still = [k for k in deleted if raw_body(cols_b["ttl_nodel"], k) is not None]
    assert still == deleted, f"filterDeletion: deleted on B anyway: " \
                             f"{sorted(set(deleted) - set(still))}{safe_diag(sc.diag)}"
    for name in ("ttl_all", "ttl_noexp", "ttl_bypass"):
        left = [k for k in deleted if not absent(cols_b[name], k)]
        assert not left, f"{name}: deletions did not arrive: {left}{safe_diag(sc.diag)}"
    # Expirations with filterBypassExpiry are still sent (the setting only drops expiries
    # from the documents sent): the bypass target's t-* (expiry 0 there) are gone.
    left = [k for k in ts if not absent(cols_b["ttl_bypass"], k)]
    assert not left, f"ttl_bypass: A's expirations did not arrive: {left}{safe_diag(sc.diag)}"
    for k in fars:
        assert live_state(cols_b["ttl_bypass"], k)["exptime"] == 0, k


# ------------------------------------------------------------------ 4. settings REST

def post_settings(url: str, rid: str, **form: str):
    return http("POST", f"{url}/settings/replications/{quoted(rid)}", form)


def shown(url: str, rid: str) -> dict:
    r = settings(url, rid)
    assert r.status == 200 and isinstance(r.body, dict), r
    return {k: r.body.get(k) for k in (*DEFAULTS, "filterExpression")}


def test_settings_rest(sc):
    url = sc.p.a.url
    col_a = sc.source("set_src")
    col_b = sc.target("set_dst")
    sc.target("set_dst2")
    flt = 'kind = "keep"'
    for i in range(100):
        col_a.upsert(f"s-{i}", {"kind": "keep", "i": i})
    for i in range(20):
        col_a.upsert(f"n-{i}", {"kind": "drop", "i": i})
    rid = sc.replicate("set_src", "set_dst", filterExpression=flt)
    assert shown(url, rid) == {**DEFAULTS, "filterExpression": flt}
    t0 = settle(sc, rid, 120)
    assert_counts(t0, "initial", sc.diag, docsWritten=100, docsFiltered=20,
                  docsFailedCrTarget=0, docsFailedCrSource=0)

    # Refusals change nothing, not even the request's valid fields.
    bad = [({"filterDeletion": "maybe"}, "filterDeletion"),
           ({"filterExpiration": "yes"}, "filterExpiration"),
           ({"filterBypassExpiry": "2"}, "filterBypassExpiry"),
           ({"optimisticReplicationThreshold": "-1"}, "optimisticReplicationThreshold"),
           ({"optimisticReplicationThreshold": str(THRESHOLD_MAX + 1)},
            "optimisticReplicationThreshold"),
           ({"optimisticReplicationThreshold": "1.5"}, "optimisticReplicationThreshold"),
           ({"optimisticReplicationThreshold": "abc"}, "optimisticReplicationThreshold"),
           ({"filterExpression": "kind = ("}, "filterExpression"),
           ({"filterExpression": 'kind = "other"', "filterSkipRestream": "maybe"},
            "filterSkipRestream"),
           ({"filterDeletion": "true", "optimisticReplicationThreshold": "x"},
            "optimisticReplicationThreshold"),
           ({"filterExpiration": "true", "filterExpression": "(("}, "filterExpression")]
    for form, field in bad:
        r = post_settings(url, rid, **form)
        errors = field_errors(r)
        assert r.status == 400 and isinstance(errors.get(field), str) and errors[field], \
            f"POST settings {form}: {r}"
        assert shown(url, rid) == {**DEFAULTS, "filterExpression": flt}, f"after {form}"
    # The same filter is fine.
    r = post_settings(url, rid, filterExpression=flt)
    assert r.status == 200, r
    assert shown(url, rid) == {**DEFAULTS, "filterExpression": flt}

    # A change of every setting: shown, and the pipeline restarts from its checkpoints.
    starts = task_of(url, rid)["starts"]
    r = post_settings(url, rid, filterDeletion="true", filterExpiration="1",
                      filterBypassExpiry="true", optimisticReplicationThreshold="1000",
                      filterExpression=flt)
    assert r.status == 200, r
    changed = {"filterDeletion": True, "filterExpiration": True, "filterBypassExpiry": True,
               "optimisticReplicationThreshold": 1000, "pauseRequested": False,
               "filterExpression": flt}
    assert shown(url, rid) == changed
    eventually("the pipeline restarted", lambda: task_of(url, rid)["starts"] > starts,
               timeout=30, diag=sc.diag)
    for i in range(100, 110):
        col_a.upsert(f"s-{i}", {"kind": "keep", "i": i})
    for i in range(5):
        col_a.remove(f"s-{i}")
    markers = write_markers(col_a, "s-mark-", {"kind": "keep"})
    wait_present(sc, col_b, markers, "the markers on set_dst")
    t1 = settle(sc, rid, 120 + 10 + 5 + len(markers))
    print(f"before the change: {counters(t0)}; after: {counters(t1)}")
    # No replay: only the new changes were received, nothing lost a conflict.
    assert_counts(t1, "after the settings change", sc.diag,
                  docsWritten=100 + 10 + len(markers), docsFiltered=20 + 5,
                  docsFailedCrTarget=0, docsFailedCrSource=0)
    still = [i for i in range(5) if raw_body(col_b, f"s-{i}") is None]
    assert not still, f"filterDeletion: deleted on B: {still}{safe_diag(sc.diag)}"
    assert sc.b_items("set_dst") == 110 + len(markers), sc.diag()
    # Back to a default: GET shows it.
    r = post_settings(url, rid, filterDeletion="false", optimisticReplicationThreshold="0")
    assert r.status == 200, r
    assert shown(url, rid) == {**changed, "filterDeletion": False,
                               "optimisticReplicationThreshold": 0}

    # createReplication takes the settings, and refuses malformed ones (creating nothing).
    for form, field in [({"filterDeletion": "maybe"}, "filterDeletion"),
                        ({"filterBypassExpiry": "yes"}, "filterBypassExpiry"),
                        ({"filterExpiration": "truthy"}, "filterExpiration"),
                        ({"optimisticReplicationThreshold": str(THRESHOLD_MAX + 1)},
                         "optimisticReplicationThreshold")]:
        r = create_replication(url, "set_src", sc.p.ref["name"], "set_dst2", **form)
        errors = field_errors(r)
        assert r.status == 400 and isinstance(errors.get(field), str), f"{form}: {r}"
    rid2 = f"{sc.p.ref['uuid']}/set_src/set_dst2"
    assert settings(url, rid2).status == 404, "a refused replication was created"
    assert task_of(url, rid2) is None
    rid2 = sc.replicate("set_src", "set_dst2", filterDeletion="true", filterExpiration="0",
                        filterBypassExpiry="1", optimisticReplicationThreshold=str(THRESHOLD_MAX))
    assert shown(url, rid2) == {"filterDeletion": True, "filterExpiration": False,
                                "filterBypassExpiry": True,
                                "optimisticReplicationThreshold": THRESHOLD_MAX,
                                "pauseRequested": False, "filterExpression": ""}


# ------------------------------------------------------------------ 5. optimistic threshold

BIG = "x" * 600      # above the default 256-byte threshold
SMALL = "y" * 20


def test_optimistic_threshold(sc):
    url = sc.p.a.url
    col_a = sc.source("ot_src")
    variants = {"ot_default": {}, "ot_zero": {"optimisticReplicationThreshold": "0"},
                "ot_max": {"optimisticReplicationThreshold": str(THRESHOLD_MAX)}}
    cols_b = {name: sc.target(name) for name in variants}
    n = 5
    bigs = [f"big-{i}" for i in range(n)]
    smalls = [f"small-{i}" for i in range(n)]
    fresh = [f"fresh-{i}" for i in range(n)]
    # B holds winning versions (revision 5) of big-* and small-*; A's are at revision 1.
    for col_b in cols_b.values():
        for rev in range(5):
            for k in bigs:
                col_b.upsert(k, {"side": "B", "rev": rev, "pad": BIG})
            for k in smalls:
                col_b.upsert(k, {"side": "B", "rev": rev, "pad": SMALL})
    for k in bigs + fresh:
        col_a.upsert(k, {"side": "A", "pad": BIG})
    for k in smalls:
        col_a.upsert(k, {"side": "A", "pad": SMALL})
    rids = {name: sc.replicate("ot_src", name, **extra) for name, extra in variants.items()}
    want = {"ot_default": dict(docsFailedCrSource=n, docsFailedCrTarget=n),
            "ot_zero": dict(docsFailedCrSource=2 * n, docsFailedCrTarget=0),
            "ot_max": dict(docsFailedCrSource=0, docsFailedCrTarget=2 * n)}
    for name, rid in rids.items():
        t = settle(sc, rid, 3 * n)
        print(f"{name} {variants[name]}: task {counters(t)}")
        assert_counts(t, name, sc.diag, docsWritten=n, docsFiltered=0, **want[name])
        col_b = cols_b[name]
        sides = {k: json.loads(raw_body(col_b, k))["side"] for k in bigs + smalls}
        assert set(sides.values()) == {"B"}, f"{name}: {sides}"
        assert all(json.loads(raw_body(col_b, k) or b"null") == {"side": "A", "pad": BIG}
                   for k in fresh), name

    # The running default replication changed to 0: a later small losing version is now
    # kept back at the source.
    rid = rids["ot_default"]
    starts = task_of(url, rid)["starts"]
    r = post_settings(url, rid, optimisticReplicationThreshold="0")
    assert r.status == 200, r
    assert shown(url, rid)["optimisticReplicationThreshold"] == 0
    eventually("the pipeline restarted", lambda: task_of(url, rid)["starts"] > starts,
               timeout=30, diag=sc.diag)
    late = [f"late-{i}" for i in range(3)]
    for rev in range(5):
        for k in late:
            cols_b["ot_default"].upsert(k, {"side": "B", "rev": rev, "pad": SMALL})
    for k in late:
        col_a.upsert(k, {"side": "A", "pad": SMALL})
    t = settle(sc, rid, 3 * n + len(late))
    print(f"ot_default at threshold 0: task {counters(t)}")
    assert_counts(t, "ot_default at threshold 0", sc.diag, docsWritten=n,
                  docsFailedCrSource=n + len(late), docsFailedCrTarget=n)
    assert all(json.loads(raw_body(cols_b["ot_default"], k))["side"] == "B" for k in late)


# ------------------------------------------------------------------ 6. refusals

def test_bad_filters_are_refused(sc):
    url = sc.p.a.url
    col_a = sc.source("bf_src")
    col_b = sc.target("bf_dst")
    refused = ["type = (", "((", 'REGEXP_CONTAINS(META().id, "^a(?!l)")',
               'REGEXP_CONTAINS(country, "(")', 'META().id = "' + "k" * 4100 + '"']
    for text in refused:
        r = create_replication(url, "bf_src", sc.p.ref["name"], "bf_dst", filterExpression=text)
        errors = field_errors(r)
        print(f"{text[:60]!r}: {r.status} {str(errors)[:300]}")
        assert r.status == 400 and isinstance(errors.get("filterExpression"), str) \
            and errors["filterExpression"], f"filter {text[:80]!r}: {r}"
    rid = f"{sc.p.ref['uuid']}/bf_src/bf_dst"
    assert settings(url, rid).status == 404, "a refused filter made a replication"
    assert task_of(url, rid) is None

    # A bare name is a key regex: it selects by key, not by the body's `orders` field.
    docs = {"my-orders-1": {"orders": False}, "orders": {"orders": False},
            "plain-1": {"orders": True}, "order-1": {"orders": True}}
    for k, v in docs.items():
        col_a.upsert(k, v)
    rid = sc.replicate("bf_src", "bf_dst", filterExpression="orders")
    t = settle(sc, rid, len(docs))
    assert_counts(t, "orders", sc.diag, docsWritten=2, docsFiltered=2)
    on_b = sorted(k for k in docs if not absent(col_b, k))
    assert on_b == ["my-orders-1", "orders"], f"{on_b}{safe_diag(sc.diag)}"


# ------------------------------------------------------------------ 7. changing the filter

def test_filter_change_restreams_unless_skipped(sc):
    url = sc.p.a.url
    col_a = sc.source("fc_src")
    col_b = sc.target("fc_dst")
    kinds = {"a": 30, "b": 20, "c": 10}
    for kind, n in kinds.items():
        for i in range(n):
            col_a.upsert(f"{kind}-{i}", {"kind": kind, "i": i})
    total = sum(kinds.values())
    rid = sc.replicate("fc_src", "fc_dst", filterExpression='kind = "a"')
    t0 = settle(sc, rid, total)
    assert_counts(t0, "through kind = a", sc.diag, docsWritten=30, docsFiltered=30,
                  docsFailedCrTarget=0)

    def change(**form: str) -> None:
        starts = task_of(url, rid)["starts"]
        r = post_settings(url, rid, **form)
        assert r.status == 200, r
        assert shown(url, rid)["filterExpression"] == form["filterExpression"], r
        eventually("the pipeline restarted", lambda: task_of(url, rid)["starts"] > starts,
                   timeout=30, diag=sc.diag)

    # A new filter re-streams from zero: every change is received again.
    change(filterExpression='kind = "b"')
    t1 = settle(sc, rid, 2 * total)
    assert_counts(t1, "re-streamed through kind = b", sc.diag,
                  docsWritten=30 + 20, docsFiltered=30 + 40, docsFailedCrTarget=0)
    assert task_of(url, rid)["filterExpression"] == 'kind = "b"'
    wait_present(sc, col_b, [f"b-{i}" for i in range(20)], "the b documents on B")
    assert sc.b_items("fc_dst") == 50, sc.diag()

    # Skipping the re-stream: the old c documents stay behind, new ones cross.
    change(filterExpression='kind = "c"', filterSkipRestream="true")
    for i in range(10):
        col_a.upsert(f"c-new-{i}", {"kind": "c", "i": i})
    markers = write_markers(col_a, "fc-mark-", {"kind": "c"})
    wait_present(sc, col_b, markers, "the markers on fc_dst")
    fresh = 10 + len(markers)
    t2 = settle(sc, rid, 2 * total + fresh)
    assert_counts(t2, "kind = c without a re-stream", sc.diag,
                  docsWritten=50 + fresh, docsFiltered=70, docsFailedCrTarget=0)
    old_c = [k for k in (f"c-{i}" for i in range(10)) if not absent(col_b, k)]
    assert not old_c, f"old c documents crossed without a re-stream: {old_c}"
    assert sc.b_items("fc_dst") == 50 + fresh, sc.diag()

    # No filter, re-streaming: the old c documents arrive; the rest B holds already.
    change(filterExpression="")
    on_a = total + fresh
    t3 = settle(sc, rid, 2 * total + fresh + on_a)
    assert_counts(t3, "no filter, re-streamed", sc.diag,
                  docsWritten=50 + fresh + 10, docsFiltered=70,
                  docsFailedCrTarget=on_a - 10, docsFailedCrSource=0)
    wait_present(sc, col_b, [f"c-{i}" for i in range(10)], "the old c documents on B")
    assert sc.b_items("fc_dst") == on_a, sc.diag()
    print(f"counters: {counters(t0)} -> {counters(t1)} -> {counters(t2)} -> {counters(t3)}")
