"""XDCR with collections: Couchbase's implicit mapping. A change of the source's collection
`scope.collection` goes to the target bucket's collection of the SAME scope and collection
names, whatever its collection id there; a change of a collection the target lacks is not
sent (counted in the task's `docsFiltered`, the task's `errors` naming the collection), and
the pipeline re-reads the target's collections at most once a second while that happens.

A is `sluice cluster up` (2 nodes, 1 replica, 64 vbuckets), B one `sluice server` with its
own administrator. One pair of buckets, `coll_src` on A and `coll_dst` on B, with:

    A: _default._default, inv.hotel (made first), inv.air, app.only_a
    B: _default._default, inv.air (made first), inv.hotel

so `inv.hotel` and `inv.air` have other ids on B than on A (checked from both manifests'
uids), and `app.only_a` is only on A. The module fixture `written` starts the replication
and writes every collection of A (some documents before the replication exists, the rest
while it runs): the same keys `k-0..k-59` in all four collections with a body of their
own, collection-only keys, binary bodies with custom flags, far expiries, user xattrs,
sub-doc updates, whole-body rewrites, deletions that differ per collection (so a key is
deleted in one collection and live in its namesake of another), a few recreations; in
`app.only_a` every key is written exactly once (so the filtered count is at least the
number of writes, whatever DCP deduplicates).

* test_collections_map_by_name_whatever_their_ids: B's `_default`, `inv.hotel` and
  `inv.air` converge to A's namesake key by key over the union of every key written
  anywhere (body bytes, flags, `$document` CAS / revid / exptime / datatype / size / crc,
  the user xattr; a key deleted or never written in a collection on A absent from that
  collection on B): nothing leaks across collections, and each of B's collections counts
  exactly A's live documents of its namesake (`sluice_collection_items`, B's only node).
  B is not given `app` (the pipeline creates nothing); the task counts at least the
  `app.only_a` writes in docsFiltered and its errors name `app.only_a`. Past the backfill
  (which also counts each vbucket's collection records as filtered) docsFiltered rises by
  exactly the `app.only_a` writes made since, when no pipeline restarted.
* test_collection_created_on_target_later_receives_later_changes: each of A's pipelines
  first filters an `app.only_a` change and re-reads B's collections after it (so none has a
  re-read pending); then `app.only_a` is made on B and, 1.5 s later (longer than the
  pipeline's once-a-second re-read of the target's collections), NEW documents written into
  A's `app.only_a`, one per vbucket, must ALL arrive on B, equal to A's, within 20 s, none
  counted in docsFiltered. The documents written there before B had the collection are NOT
  expected on B: the pipeline does not resend what it filtered (Couchbase would backfill a
  repaired mapping; Sluice, by design, does not), so B's `app.only_a` holds exactly the
  new documents.

Run: cd tests/interop && python3 -m pytest test_xdcr_collections.py -q -p no:cacheprovider
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Dict, List, Optional, Tuple

import couchbase.subdocument as SD
import pytest
from couchbase.options import MutateInOptions, UpsertOptions

from conftest import PASSWORD, USERNAME
from test_cluster_up import free_base
from xdcr_helpers import (AUTH_A, AUTH_B, B_PASS, B_USER, Passthrough, add_remote_ref, cancel,
                          connect, converge_equal, create_bucket, eventually, http,
                          live_state, probe_keys, ready_collection, recheck_equal, safe_diag,
                          start_cluster_a, start_cluster_b, start_replication_at, stop_cluster,
                          task_of, tasks_report)

pytestmark = pytest.mark.timeout(180)

SRC, DST = "coll_src", "coll_dst"
DEFAULT = ("_default", "_default")
HOTEL = ("inv", "hotel")
AIR = ("inv", "air")
ONLY_A = ("app", "only_a")
REPLICATED = (DEFAULT, HOTEL, AIR)          # on both sides
SHARED = [f"k-{i}" for i in range(60)]      # written into every collection of A
OWN = 30                                    # keys only one collection has
FAR_EXPIRY = timedelta(seconds=3600)
BIN_FLAGS = 0xBEEF0000


def name(path: Tuple[str, str]) -> str:
    return f"{path[0]}.{path[1]}"


# ------------------------------------------------------------------ clusters

@pytest.fixture(scope="module")
def cluster_a(tmp_path_factory):
    a = start_cluster_a(tmp_path_factory.mktemp("xdcr-coll-a"), free_base(), nodes=2,
                        replicas=1)
    try:
        yield a
    finally:
        stop_cluster(a.proc)


@pytest.fixture(scope="module")
def cluster_b(sluice_module_factory):
    return start_cluster_b(sluice_module_factory, nodes=1)


@pytest.fixture(scope="module")
def sdks(cluster_a, cluster_b):
    ca = connect(cluster_a.connstr, USERNAME, PASSWORD)
    cb = connect(cluster_b.connstr, B_USER, B_PASS)
    yield ca, cb
    ca.close()
    cb.close()


# ------------------------------------------------------------------ scopes and collections

def manifest(url: str, auth: str, bucket: str) -> dict:
    r = http("GET", f"{url}/pools/default/buckets/{bucket}/scopes", auth=auth)
    assert r.status == 200 and isinstance(r.body, dict), f"manifest of {bucket} at {url}: {r}"
    return r.body


def uids(m: dict) -> Dict[Tuple[str, str], int]:
    """(scope, collection) -> collection id, from a manifest's hex uids."""
    return {(s["name"], c["name"]): int(c["uid"], 16)
            for s in m.get("scopes", []) for c in s.get("collections", [])}


def make_collections(urls: List[str], auth: str, bucket: str,
                     paths: List[Tuple[str, str]]) -> None:
    """Creates the scopes and collections over REST at urls[0], in the order given, then
    waits until every node's manifest lists them all."""
    url = urls[0]
    scopes_made = set()
    for scope, coll in paths:
        if scope not in scopes_made:
            r = http("POST", f"{url}/pools/default/buckets/{bucket}/scopes", {"name": scope},
                     auth=auth)
            assert r.status == 200, f"create scope {scope} in {bucket} at {url}: {r}"
            scopes_made.add(scope)
        r = http("POST", f"{url}/pools/default/buckets/{bucket}/scopes/{scope}/collections",
                 {"name": coll}, auth=auth)
        assert r.status == 200, f"create collection {scope}.{coll} in {bucket} at {url}: {r}"
    for u in urls:
        eventually(f"{bucket}'s manifest at {u} lists {[name(p) for p in paths]}",
                   lambda u=u: set(paths) <= set(uids(manifest(u, auth, bucket))),
                   timeout=20)


def collection_counts(url: str, auth: str, bucket: str) -> Dict[str, int]:
    """`sluice_collection_items` of every collection of `bucket` on one node (replicas
    included), by "scope.collection"."""
    r = http("GET", f"{url}/metrics", auth=auth, timeout=10)
    assert r.status == 200, f"GET {url}/metrics: {r}"
    out = {}
    pat = re.compile(r'^sluice_collection_items\{([^}]*)\} (\d+)$')
    for line in r.text.splitlines():
        m = pat.match(line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if labels.get("bucket") == bucket:
            out[f"{labels['scope']}.{labels['collection']}"] = int(m.group(2))
    return out


# ------------------------------------------------------------------ what is written

@dataclass
class Doc:
    kind: str                  # "json" | "bin"
    value: object              # dict for json, bytes for bin
    flags: int = 0
    expiry: Optional[timedelta] = None
    owner: Optional[str] = None
    deleted: bool = False
    history: List[str] = field(default_factory=list)


def put(col, key: str, d: Doc) -> None:
    """Stores `d` whole (upsert), then its user xattr if it has one (keeping the expiry)."""
    opts = {} if d.expiry is None else {"expiry": d.expiry}
    if d.kind == "json":
        col.upsert(key, d.value, UpsertOptions(**opts))
    else:
        col.upsert(key, d.value, UpsertOptions(transcoder=Passthrough(d.flags), **opts))
    if d.owner is not None:
        col.mutate_in(key, [SD.upsert("meta.owner", d.owner, xattr=True, create_parents=True)],
                      MutateInOptions(preserve_expiry=True))


@dataclass
class World:
    a: object
    b: object
    rid: str
    cols_a: Dict[Tuple[str, str], object]
    cols_b: Dict[Tuple[str, str], object]
    model: Dict[Tuple[str, str], Dict[str, Doc]]
    only_a_early: List[str]          # keys written into A's app.only_a before B had it
    union: List[str]                 # every key written into any collection
    base: dict                       # the task once the backfill was done
    only_a_running: int = 0          # app.only_a writes after `base`

    def live(self, path) -> List[str]:
        return sorted(k for k, d in self.model[path].items() if not d.deleted)

    def diag(self) -> str:
        out = [tasks_report(self.a.urls)]
        for what, url, auth, bucket in (("B", self.b.url, AUTH_B, DST),
                                        *((f"A node {i}", u, AUTH_A, SRC)
                                          for i, u in enumerate(self.a.urls))):
            try:
                out.append(f"{what} {bucket} per-collection items: "
                           f"{collection_counts(url, auth, bucket)}")
            except Exception as e:  # noqa: BLE001
                out.append(f"{what} {bucket} per-collection items: {e!r}")
        out.append("A live documents per collection (model): " + json.dumps(
            {name(p): len(self.live(p)) for p in self.model}))
        for what, url, auth, bucket in (("A", self.a.url, AUTH_A, SRC),
                                        ("B", self.b.url, AUTH_B, DST)):
            try:
                out.append(f"{what} manifest: {json.dumps(manifest(url, auth, bucket))}")
            except Exception as e:  # noqa: BLE001
                out.append(f"{what} manifest: {e!r}")
        out.append(self.a.log_tail(15))
        out.append(self.b.log_tail(15))
        return "\n".join(out)


def first_write(col, key: str, d: Doc, what: str) -> None:
    """The first write into a collection just made: retried until every node of A takes it
    (the SDK learns the collection's id from whichever node it asks)."""
    eventually(what, lambda: put(col, key, d) is None, timeout=20)


@pytest.fixture(scope="module")
def written(cluster_a, cluster_b, sdks):
    a, b = cluster_a, cluster_b
    sdk_a, sdk_b = sdks
    create_bucket(a.url, AUTH_A, SRC)
    create_bucket(b.url, AUTH_B, DST)
    ready_collection(sdk_a, SRC)
    ready_collection(sdk_b, DST)
    make_collections(a.urls, AUTH_A, SRC, [HOTEL, AIR, ONLY_A])
    make_collections(b.urls, AUTH_B, DST, [AIR, HOTEL])

    cols_a = {p: sdk_a.bucket(SRC).scope(p[0]).collection(p[1]) for p in REPLICATED + (ONLY_A,)}
    cols_b = {p: sdk_b.bucket(DST).scope(p[0]).collection(p[1]) for p in REPLICATED + (ONLY_A,)}
    model: Dict[Tuple[str, str], Dict[str, Doc]] = {p: {} for p in cols_a}

    def shared_doc(p, ci: int, i: int) -> Doc:
        d = Doc("json", {"coll": name(p), "i": i, "v": 1, "pad": "x" * (i % 17)})
        if (i + ci) % 7 == 2:
            d.expiry = FAR_EXPIRY
        if p != ONLY_A and (i + ci) % 5 == 1:   # app.only_a: one write per key
            d.owner = f"{name(p)}-owner-{i}"
        d.history.append("create")
        return d

    def own_doc(p, i: int) -> Doc:
        if i % 10 == 5:
            d = Doc("bin", f"{name(p)} binary {i}".encode() + bytes([0, 255, i]),
                    flags=BIN_FLAGS | i)
        else:
            d = Doc("json", {"own": name(p), "i": i})
        if i % 8 == 3:
            d.expiry = FAR_EXPIRY
        if p != ONLY_A and i % 6 == 1:
            d.owner = f"own-{i}"
        d.history.append("create")
        return d

    # Before the replication: the shared keys' first versions in every collection, A's
    # new collections first written one document each (retried until the nodes know them).
    for ci, p in enumerate(cols_a):
        for i, k in enumerate(SHARED[:30]):
            d = shared_doc(p, ci, i)
            model[p][k] = d
            if i == 0:
                first_write(cols_a[p], k, d, f"the first write into A's {name(p)}")
            else:
                put(cols_a[p], k, d)

    ref = add_remote_ref(a.url, "clusterB", b.hostname, B_USER, B_PASS)
    rid = start_replication_at(a.url, SRC, ref, DST)
    world = World(a, b, rid, cols_a, cols_b, model, [], [], {})
    try:
        # The backfill done (every vbucket has a change: 5 collection records each, if
        # nothing else): what the task counts from here on is what the writes below make.
        world.base = eventually("the backfill done (changesLeft 0)",
                                lambda: (lambda t: t if t and t.get("changesLeft") == 0
                                         else None)(
                                    task_of(a.url, rid)), timeout=30, diag=world.diag)
        print(f"task after the backfill: {json.dumps(world.base)}")
        only_a_before = len(model[ONLY_A])
        # While it runs: the other shared keys and every collection's own keys, the
        # collections interleaved so app.only_a's changes sit among the others' in the
        # stream.
        for i, k in enumerate(SHARED[30:], start=30):
            for ci, p in enumerate(cols_a):
                model[p][k] = shared_doc(p, ci, i)
                put(cols_a[p], k, model[p][k])
        for i in range(OWN):
            for p in cols_a:
                k = f"{p[1]}-own-{i}"
                model[p][k] = own_doc(p, i)
                put(cols_a[p], k, model[p][k])

        # Updates, deletions and recreations of the replicated collections only (each key of
        # app.only_a is written once).
        for ci, p in enumerate(REPLICATED):
            col, docs = cols_a[p], model[p]
            for n, k in enumerate(sorted(docs)):
                d = docs[k]
                if d.kind == "json" and n % 4 == 0:    # a body field and the xattr, sub-doc
                    col.mutate_in(k, [SD.upsert("v", 2),
                                      SD.upsert("meta.owner", f"sub-{ci}", xattr=True,
                                                create_parents=True)],
                                  MutateInOptions(preserve_expiry=True))
                    d.value = {**d.value, "v": 2}
                    d.owner = f"sub-{ci}"
                    d.history.append("mutate_in")
                elif n % 4 == 2:                       # a whole new version
                    if d.kind == "json":
                        d.value = {**d.value, "v": 3, "rewritten": name(p)}
                    else:
                        d.value = d.value + b"-v3"
                    d.history.append("rewrite")
                    put(col, k, d)
            # Deletions differ per collection: k-N deleted here is live in the others.
            for n, k in enumerate(sorted(docs)):
                if (n + 2 * ci) % 6 == 3:
                    col.remove(k)
                    docs[k].deleted = True
                    docs[k].history.append("remove")
            for n, k in enumerate(sorted(docs)):
                if docs[k].deleted and n % 5 == 0:     # back after its deletion
                    docs[k] = Doc("json", {"again": name(p), "n": n},
                                  history=docs[k].history + ["recreate"])
                    put(col, k, docs[k])

        world.only_a_early = sorted(model[ONLY_A])
        world.only_a_running = len(model[ONLY_A]) - only_a_before
        world.union = sorted(set().union(*(set(d) for d in model.values())))

        # A holds what the test wrote (a check of the test, not of the replication).
        problems = []
        for p, docs in model.items():
            for k, d in docs.items():
                st = live_state(cols_a[p], k)
                if d.deleted:
                    if st is not None:
                        problems.append(f"{name(p)} {k}: deleted, live on A ({d.history})")
                    continue
                if st is None:
                    problems.append(f"{name(p)} {k}: missing on A ({d.history})")
                    continue
                body = json.loads(st["body"]) if d.kind == "json" else st["body"]
                if body != d.value:
                    problems.append(f"{name(p)} {k}: A has {st['body'][:100]!r}, wrote "
                                    f"{d.value!r}")
                if d.kind == "bin" and st["get_flags"] != d.flags:
                    problems.append(f"{name(p)} {k}: A's flags {st['get_flags']:#x}")
                if (st["exptime"] != 0) != (d.expiry is not None):
                    problems.append(f"{name(p)} {k}: A's exptime {st['exptime']} ({d.history})")
                if d.owner is not None and st["meta_xattr"] != {"owner": d.owner}:
                    problems.append(f"{name(p)} {k}: A's xattr {st['meta_xattr']}, wrote "
                                    f"{d.owner}")
        assert not problems, "A itself:\n" + "\n".join(problems[:30])
        print("written on A: " + json.dumps(
            {name(p): {"live": len(world.live(p)), "deleted": len(docs) - len(world.live(p))}
             for p, docs in model.items()}))
        yield world
    finally:
        cancel(a.url, rid)


# ------------------------------------------------------------------ 1. mapping by name

def test_collections_map_by_name_whatever_their_ids(written):
    w = written
    a, b = w.a, w.b
    diag = w.diag

    # The same names, other ids: the implicit mapping has to go by name.
    ua, ub = uids(manifest(a.url, AUTH_A, SRC)), uids(manifest(b.url, AUTH_B, DST))
    ids = {name(p): (ua.get(p), ub.get(p)) for p in (HOTEL, AIR)}
    print(f"collection ids (A, B): {ids}")
    assert all(x is not None and y is not None for x, y in ids.values()), ids
    assert any(x != y for x, y in ids.values()), \
        f"inv.hotel and inv.air have the same ids on both sides, the test proves nothing: {ids}"
    assert ua[HOTEL] == ub[AIR] and ua[AIR] == ub[HOTEL], \
        f"expected the ids crossed (A's hotel id is B's air id): {ids}"

    # Key by key, over every key written anywhere: a collection on B is its namesake on A.
    started = time.monotonic()
    for p in REPLICATED:
        converge_equal(w.cols_a[p], w.cols_b[p], w.union, f"B's {name(p)} equal to A's",
                       diag=diag, timeout=45)
    eventually("changesLeft 0 in the task",
               lambda: (task_of(a.url, w.rid) or {}).get("changesLeft") == 0, timeout=20,
               diag=diag)
    # Once more, now that nothing is left to send: nothing came late into a wrong place.
    for p in REPLICATED:
        recheck_equal(w.cols_a[p], w.cols_b[p], w.union, f"B's {name(p)} after changesLeft 0",
                      diag=diag)
    print(f"B's collections equal A's after {time.monotonic() - started:.1f}s")

    # Each collection on B holds exactly its namesake's live documents (B's only node holds
    # every copy), and B got no app scope.
    want = {name(p): len(w.live(p)) for p in REPLICATED}
    got: Dict[str, int] = {}

    def counts_match() -> bool:
        got.clear()
        got.update(collection_counts(b.url, AUTH_B, DST))
        return got == want

    eventually(f"B's per-collection items {want}", counts_match, timeout=20,
               diag=lambda: f"B counts {got}\n{diag()}")
    assert "app" not in {s["name"] for s in manifest(b.url, AUTH_B, DST)["scopes"]}, \
        f"B got a scope app: {manifest(b.url, AUTH_B, DST)}"

    # What was not sent is counted, and the task says why.
    n_only = len(w.only_a_early)

    def filtered_and_named() -> Optional[dict]:
        t = task_of(a.url, w.rid)
        if not t or (t.get("docsFiltered") or 0) < n_only:
            return None
        if not any("app.only_a" in str(e) for e in t.get("errors") or []):
            return None
        return t

    t = eventually(f"docsFiltered >= {n_only} and an error naming app.only_a",
                   filtered_and_named, timeout=20, diag=diag)
    print(f"task: {json.dumps(t)}")
    assert t.get("status") == "running", f"{t}{safe_diag(diag)}"
    errors = [e for e in t["errors"] if "app.only_a" in str(e)]
    assert all("no collection" in e for e in errors), t
    # Since the backfill, nothing but app.only_a's writes (one per key, distinct keys, so
    # DCP cannot merge two) was filtered: exactly that many, if no pipeline restarted (a
    # restart streams again from the checkpoints and may count some twice).
    delta = t["docsFiltered"] - w.base["docsFiltered"]
    print(f"docsFiltered {t['docsFiltered']} in all, {w.base['docsFiltered']} after the "
          f"backfill ({n_only - w.only_a_running} app.only_a documents in it), +{delta} since "
          f"for {w.only_a_running} app.only_a writes")
    if t.get("starts") == w.base.get("starts"):
        assert delta == w.only_a_running, \
            (f"docsFiltered rose by {delta} while {w.only_a_running} app.only_a documents were "
             f"written (and nothing else should be filtered){safe_diag(diag)}")
    else:
        assert delta >= w.only_a_running, f"{t}{safe_diag(diag)}"


# ------------------------------------------------------------------ 2. created later

def test_collection_created_on_target_later_receives_later_changes(written):
    """B gets `app.only_a` after A wrote documents there (filtered): documents written into
    A's `app.only_a` afterwards (1.5 s after B has it: more than the pipeline's
    once-a-second re-read of the target's collections) must ALL arrive on B within 20 s,
    equal to A's, none of them counted in docsFiltered. The ones written before B had the
    collection must NOT arrive: the pipeline does not resend what it filtered (no backfill
    of a repaired mapping), so B's `app.only_a` holds exactly the new documents.

    Before B makes the collection, each of A's pipelines is brought to the state a quiet
    replication ends in: it filtered an app.only_a change (primer-*, in every vbucket), and
    read B's collections again since (a `_default` change, tick-* in every vbucket, 1.2 s
    later, is the occasion), so it has no re-read pending and its view of B, taken before
    B had app.only_a, lacks it."""
    w = written
    a, b = w.a, w.b
    col_a, col_b = w.cols_a[ONLY_A], w.cols_b[ONLY_A]

    def left_zero(what: str, diag) -> dict:
        return eventually(what, lambda: (lambda t: t if t and t.get("changesLeft") == 0
                                         else None)(task_of(a.url, w.rid)),
                          timeout=30, diag=diag)

    left_zero("changesLeft 0 before the primer", w.diag)
    primers = probe_keys(prefix="primer-")
    for k in primers:
        col_a.upsert(k, {"primer": k})
        w.model[ONLY_A][k] = Doc("json", {"primer": k}, history=["create"])
    w.only_a_early = sorted(w.model[ONLY_A])
    time.sleep(1.2)
    ticks = probe_keys(prefix="tick-")
    for k in ticks:
        col = w.cols_a[DEFAULT]
        col.upsert(k, {"tick": k})
        w.model[DEFAULT][k] = Doc("json", {"tick": k}, history=["create"])
    before = left_zero("changesLeft 0 after the primer and ticks", w.diag)
    n_early = len(w.only_a_early)

    make_collections(b.urls, AUTH_B, DST, [ONLY_A])
    eventually("B's app.only_a usable (a read answers)",
               lambda: col_b.exists("no-such-key").exists is False, timeout=20, diag=w.diag)
    made_at = time.monotonic()
    time.sleep(1.5)

    late = probe_keys(prefix="late-")          # one in every vbucket: both of A's nodes
    written_at: Dict[str, float] = {}
    for i, k in enumerate(late):
        d = Doc("json", {"late": i, "coll": "app.only_a"})
        if i % 4 == 1:
            d.expiry = FAR_EXPIRY
        if i >= 8 and i % 3 == 0:   # the first ones one mutation each: a loss shows
            d.owner = f"late-owner-{i}"
        put(col_a, k, d)
        w.model[ONLY_A][k] = d
        written_at[k] = time.monotonic() - made_at

    def diag() -> str:
        t = task_of(a.url, w.rid) or {}
        missing = [k for k in late if not col_b.exists(k).exists]
        return (f"late keys missing on B (written this many seconds after B made "
                f"app.only_a): {[(k, round(written_at[k], 2)) for k in missing][:10]} "
                f"({len(missing)} of {len(late)}; the first written: {late[0]})\n"
                f"docsFiltered {before.get('docsFiltered')} before B made app.only_a, "
                f"{t.get('docsFiltered')} now (+{(t.get('docsFiltered') or 0) - before['docsFiltered']}"
                f" since, while only {len(late)} new app.only_a documents were written); "
                f"starts {before.get('starts')} -> {t.get('starts')}\n{w.diag()}")

    converge_equal(col_a, col_b, late, "the new app.only_a documents on B", diag=diag,
                   timeout=20)
    t = left_zero("changesLeft 0 after the new documents", diag)
    assert t["docsFiltered"] == before["docsFiltered"], \
        f"a new app.only_a document was filtered\n{diag()}"
    time.sleep(1.0)   # anything resent would have come with the new ones

    # The early ones (written before B had the collection) are not resent.
    arrived = [k for k in w.only_a_early if col_b.exists(k).exists]
    assert not arrived, (f"{len(arrived)} of {n_early} documents written into app.only_a "
                         f"before B had it reached B: {arrived[:10]}\n{diag()}")
    recheck_equal(col_a, col_b, late, "the new app.only_a documents", diag=diag)
    recheck_equal(w.cols_a[DEFAULT], w.cols_b[DEFAULT], ticks, "the ticks in _default",
                  diag=diag)
    got = collection_counts(b.url, AUTH_B, DST)
    want = {name(p): len(w.live(p)) for p in REPLICATED + (ONLY_A,)}
    want["app.only_a"] = len(late)
    assert got == want, f"B's per-collection items {got}, want {want}\n{diag()}"
