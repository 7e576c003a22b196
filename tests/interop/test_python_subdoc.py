"""Sub-document operations through the Couchbase Python SDK 4.6.x: lookup_in, mutate_in,
get(with_expiry) and get(project), which the SDK builds from sub-document lookups.

One node per bucket type (couchbase and ephemeral), the default collection. Each test checks
what the server stored by reading the whole document back, not only the SDK's result.
Xattrs beyond the virtual `$document` are not built yet (see the README).
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest

import couchbase.subdocument as SD
from couchbase.durability import DurabilityLevel, ServerDurability
from couchbase.exceptions import (CasMismatchException, CouchbaseException,
                                  DocumentExistsException,
                                  DocumentNotFoundException, PathExistsException,
                                  PathMismatchException, PathNotFoundException)
from couchbase.options import GetOptions, MutateInOptions, UpsertOptions

from sdk_node import collection, sdk_cluster, sdk_server  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(120)


def new_key(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


DOC = {"name": "ada", "tags": ["a", "b"], "n": 41, "addr": {"city": "paris", "zip": "75001"}}


def test_lookup_in_get_exists_count(collection):
    key = new_key("look")
    up = collection.upsert(key, DOC)
    r = collection.lookup_in(key, [SD.get("addr.city"), SD.exists("n"), SD.exists("nope"),
                                   SD.count("tags"), SD.get("tags[-1]"), SD.get("missing")])
    assert r.cas == up.cas
    assert r.content_as[str](0) == "paris"
    assert r.exists(1) and not r.exists(2)
    assert r.content_as[int](3) == 2
    assert r.content_as[str](4) == "b"
    with pytest.raises(PathNotFoundException):
        r.content_as[str](5)
    # A single path goes out as a single-path command.
    assert collection.lookup_in(key, [SD.get("name")]).content_as[str](0) == "ada"
    with pytest.raises(PathMismatchException):
        collection.lookup_in(key, [SD.get("name.first")]).content_as[str](0)
    with pytest.raises(DocumentNotFoundException):
        collection.lookup_in(new_key("absent"), [SD.get("a")])


def test_mutate_in_changes_only_its_paths(collection):
    key = new_key("mut")
    collection.upsert(key, DOC)
    r = collection.mutate_in(key, [
        SD.upsert("addr.city", "lyon"),
        SD.insert("email", "ada@example.org"),
        SD.replace("n", 42),
        SD.remove("addr.zip"),
        SD.array_append("tags", "c"),
        SD.array_prepend("tags", "z"),
        SD.array_insert("tags[1]", "y"),
        SD.array_addunique("tags", "d"),
        SD.increment("visits", 5),
        SD.upsert("deep.er.path", True, create_parents=True),
    ])
    assert r.cas
    assert r.content_as[int](8) == 5
    got = collection.get(key).content_as[dict]
    assert got == {"name": "ada", "tags": ["z", "y", "a", "b", "c", "d"], "n": 42,
                   "addr": {"city": "lyon"}, "email": "ada@example.org", "visits": 5,
                   "deep": {"er": {"path": True}}}
    r = collection.mutate_in(key, [SD.decrement("visits", 7)])
    assert r.content_as[int](0) == -2


def test_mutate_in_failures_change_nothing(collection):
    key = new_key("fail")
    up = collection.upsert(key, DOC)
    with pytest.raises(PathExistsException):
        collection.mutate_in(key, [SD.upsert("a", 1), SD.insert("name", "x")])
    with pytest.raises(PathExistsException):
        collection.mutate_in(key, [SD.array_addunique("tags", "a")])
    with pytest.raises(PathNotFoundException):
        collection.mutate_in(key, [SD.replace("nope", 1)])
    with pytest.raises(PathMismatchException):
        collection.mutate_in(key, [SD.increment("name", 1)])
    g = collection.get(key)
    assert g.content_as[dict] == DOC and g.cas == up.cas
    with pytest.raises(DocumentNotFoundException):
        collection.mutate_in(new_key("absent"), [SD.upsert("a", 1)])


def test_mutate_in_cas_and_store_semantics(collection):
    key = new_key("cas")
    up = collection.upsert(key, DOC)
    collection.upsert(key, DOC)  # a new CAS
    with pytest.raises(CasMismatchException):
        collection.mutate_in(key, [SD.upsert("n", 1)], MutateInOptions(cas=up.cas))
    now = collection.get(key).cas
    r = collection.mutate_in(key, [SD.upsert("n", 1)], MutateInOptions(cas=now))
    assert r.cas != now
    fresh = new_key("mkdoc")
    collection.mutate_in(fresh, [SD.upsert("a.b", 1, create_parents=True)],
                         MutateInOptions(store_semantics=SD.StoreSemantics.UPSERT))
    assert collection.get(fresh).content_as[dict] == {"a": {"b": 1}}
    with pytest.raises(DocumentExistsException):
        collection.mutate_in(fresh, [SD.upsert("c", 1)],
                             MutateInOptions(store_semantics=SD.StoreSemantics.INSERT))
    other = new_key("insert")
    collection.mutate_in(other, [SD.upsert("c", 1)],
                         MutateInOptions(store_semantics=SD.StoreSemantics.INSERT))
    assert collection.get(other).content_as[dict] == {"c": 1}


def test_expiry_get_with_expiry_and_project(collection):
    key = new_key("exp")
    collection.upsert(key, DOC, UpsertOptions(expiry=timedelta(seconds=3600)))
    g = collection.get(key, GetOptions(with_expiry=True))
    assert g.content_as[dict] == DOC
    left = g.expiry_time.timestamp() - time.time()
    assert 3500 < left <= 3601, g.expiry_time
    p = collection.get(key, GetOptions(project=["name", "addr.city"]))
    assert p.content_as[dict] == {"name": "ada", "addr": {"city": "paris"}}
    # A mutation without an expiry clears it; with preserve_expiry it stays.
    collection.mutate_in(key, [SD.upsert("n", 1)], MutateInOptions(preserve_expiry=True))
    left = collection.get(key, GetOptions(with_expiry=True)).expiry_time.timestamp() - time.time()
    assert 3500 < left <= 3601
    collection.mutate_in(key, [SD.upsert("n", 2)], MutateInOptions(expiry=timedelta(seconds=60)))
    left = collection.get(key, GetOptions(with_expiry=True)).expiry_time.timestamp() - time.time()
    assert 0 < left <= 61
    collection.mutate_in(key, [SD.upsert("n", 3)])
    assert collection.get(key, GetOptions(with_expiry=True)).expiry_time is None


def test_document_virtual_xattr(collection):
    key = new_key("vattr")
    up = collection.upsert(key, DOC)
    r = collection.lookup_in(key, [SD.get("$document", xattr=True),
                                   SD.get("$document.CAS", xattr=True)])
    meta = r.content_as[dict](0)
    assert int(meta["CAS"], 16) == up.cas
    assert r.content_as[str](1) == meta["CAS"]
    assert meta["exptime"] == 0 and meta["deleted"] is False
    assert "json" in meta["datatype"]


def test_durable_mutate_in(collection):
    key = new_key("durable")
    collection.upsert(key, DOC)
    r = collection.mutate_in(key, [SD.increment("n", 1)], MutateInOptions(
        durability=ServerDurability(DurabilityLevel.MAJORITY)))
    assert r.content_as[int](0) == 42
    assert collection.get(key).content_as[dict]["n"] == 42


def test_xattrs_user_and_system_with_macros(collection):
    key = new_key("xattr")
    collection.upsert(key, DOC)
    r = collection.mutate_in(key, [
        SD.upsert("meta.owner", "ada", xattr=True, create_parents=True),
        SD.upsert("_sync.cas", SD.MutationMacro.cas(), xattr=True, create_parents=True),
        SD.upsert("_sync.seq", SD.MutationMacro.seq_no(), xattr=True, create_parents=True),
        SD.upsert("_sync.crc", SD.MutationMacro.value_crc32c(), xattr=True,
                  create_parents=True),
        SD.array_append("meta.log", 1, xattr=True, create_parents=True),
        SD.increment("meta.n", 3, xattr=True, create_parents=True),
        SD.upsert("n", 50),
    ])
    assert r.content_as[int](5) == 3
    # A plain get never shows xattrs; the body has the body path's change only.
    assert collection.get(key).content_as[dict] == dict(DOC, n=50)
    x = collection.lookup_in(key, [
        SD.get("meta", xattr=True), SD.get("_sync", xattr=True),
        SD.get("$document", xattr=True), SD.exists("nope", xattr=True),
        SD.get("$XTOC", xattr=True), SD.get("n")])
    assert x.content_as[dict](0) == {"owner": "ada", "log": [1], "n": 3}
    sync, doc = x.content_as[dict](1), x.content_as[dict](2)
    # The macros hold this very mutation's CAS (byte-reversed, as Couchbase writes it),
    # seqno and body checksum.
    assert SD.convert_macro_cas_to_cas(sync["cas"]) == r.cas == int(doc["CAS"], 16)
    assert sync["seq"] == doc["seqno"]
    assert sync["crc"] == doc["value_crc32c"]
    assert "xattr" in doc["datatype"]
    assert not x.exists(3)
    assert sorted(x.content_as[list](4)) == ["_sync", "meta"]
    assert x.content_as[int](5) == 50
    # Body mutations keep the xattrs; xattr removals leave the body.
    collection.mutate_in(key, [SD.upsert("name", "bob")])
    collection.mutate_in(key, [SD.remove("meta.owner", xattr=True)])
    x = collection.lookup_in(key, [SD.get("meta", xattr=True), SD.get("name")])
    assert x.content_as[dict](0) == {"log": [1], "n": 3}
    assert x.content_as[str](1) == "bob"
    # Virtual xattrs cannot be written.
    with pytest.raises(CouchbaseException):
        collection.mutate_in(key, [SD.upsert("$document.CAS", "x", xattr=True)])


def test_xattrs_on_a_new_document(collection):
    key = new_key("xnew")
    collection.mutate_in(key, [SD.upsert("txn.id", "t1", xattr=True, create_parents=True)],
                         MutateInOptions(store_semantics=SD.StoreSemantics.UPSERT))
    assert collection.get(key).content_as[dict] == {}
    r = collection.lookup_in(key, [SD.get("txn.id", xattr=True)])
    assert r.content_as[str](0) == "t1"


@pytest.mark.timeout(300)
def test_three_node_cluster_document_api(tmp_path):
    """The same calls on `sluice cluster up` (3 nodes, 1 replica): sub-document mutations
    with durability are acknowledged once the replica holds them, and replica reads then
    show the mutated bodies; locks, expiry reads and xattr lookups route to each key's
    active."""
    from test_cluster_up import cluster_up, collection as cluster_collection, free_base, stop, wait_up

    base = free_base()
    proc = cluster_up(tmp_path, base)
    try:
        wait_up(proc, tmp_path)
        cluster, col = cluster_collection(base)
        durable = MutateInOptions(durability=ServerDurability(DurabilityLevel.MAJORITY))
        for i in range(60):
            key = f"sd{i}"
            col.upsert(key, DOC)
            r = col.mutate_in(key, [SD.increment("n", i + 1), SD.array_append("tags", i),
                                    SD.upsert("meta.cas", SD.MutationMacro.cas(), xattr=True,
                                              create_parents=True)], durable)
            look = col.lookup_in(key, [SD.get("meta.cas", xattr=True), SD.get("n")])
            assert SD.convert_macro_cas_to_cas(look.content_as[str](0)) == r.cas
            assert look.content_as[int](1) == 42 + i
        want = {f"sd{i}": dict(DOC, n=42 + i, tags=["a", "b", i]) for i in range(60)}
        deadline = time.monotonic() + 20
        for key, body in want.items():
            while True:
                try:
                    if col.get_any_replica(key).content_as[dict] == body:
                        break
                except CouchbaseException:
                    pass
                assert time.monotonic() < deadline, f"replica of {key}"
                time.sleep(0.05)
        locked = col.get_and_lock("sd0", timedelta(seconds=10))
        with pytest.raises(CouchbaseException):
            col.upsert("sd0", DOC, UpsertOptions(timeout=timedelta(seconds=1)))
        col.unlock("sd0", locked.cas)
        col.upsert("sd1", DOC, UpsertOptions(expiry=timedelta(seconds=600)))
        assert col.get("sd1", GetOptions(with_expiry=True)).expiry_time is not None
        cluster.close()
    finally:
        stop(proc)
