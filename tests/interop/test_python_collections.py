"""Scopes and collections through the Python SDK (couchbase from PyPI): the collection
manager over REST, documents in a created collection over the KV port (HELLO collections,
LEB128 key prefixes, COLLECTIONS_GET_ID), the same key in two collections, and a drop that
removes the collection's documents (the node's per-collection counts go to nothing)."""

from __future__ import annotations

import urllib.request
from datetime import timedelta

import pytest

from couchbase.exceptions import (CollectionAlreadyExistsException, CollectionNotFoundException,
                                  CouchbaseException, DocumentNotFoundException,
                                  ScopeAlreadyExistsException, ScopeNotFoundException)
from couchbase.options import GetOptions, UpsertOptions

from couchbase.management.collections import UpdateCollectionSettings

from admin_http import request
from conftest import BUCKET
from sdk_node import sdk_cluster, sdk_server  # noqa: F401 (fixtures)
from test_buckets import eventually

SCOPE = "inventory"


def collection_metric(admin_url: str, collection: str, metric: str) -> int | None:
    """The node's `sluice_<metric>` for `collection` of scope SCOPE, if listed."""
    with urllib.request.urlopen(request(f"{admin_url}/metrics"), timeout=10) as r:
        text = r.read().decode()
    label = f'bucket="{BUCKET}",scope="{SCOPE}",collection="{collection}"'
    for line in text.splitlines():
        if line.startswith(f"sluice_{metric}{{") and label in line:
            return int(line.rsplit(" ", 1)[1])
    return None


def collection_items(admin_url: str, collection: str) -> int | None:
    """The node's `sluice_collection_items` for `collection` of scope SCOPE, if listed."""
    return collection_metric(admin_url, collection, "collection_items")


def scope_names(mgr) -> dict:
    return {s.name: sorted(c.name for c in s.collections) for s in mgr.get_all_scopes()}


def test_collections_hold_their_own_documents_and_a_drop_removes_them(sdk_server, sdk_cluster):
    bucket = sdk_cluster.bucket(BUCKET)
    mgr = bucket.collections()
    assert scope_names(mgr) == {"_default": ["_default"]}
    mgr.create_scope(SCOPE)
    with pytest.raises(ScopeAlreadyExistsException):
        mgr.create_scope(SCOPE)
    mgr.create_collection(SCOPE, "airline")
    mgr.create_collection(SCOPE, "hotel")
    with pytest.raises(CollectionAlreadyExistsException):
        mgr.create_collection(SCOPE, "airline")
    with pytest.raises(ScopeNotFoundException):
        mgr.create_collection("nowhere", "c")
    assert scope_names(mgr) == {"_default": ["_default"], SCOPE: ["airline", "hotel"]}

    airline = bucket.scope(SCOPE).collection("airline")
    hotel = bucket.scope(SCOPE).collection("hotel")
    default = bucket.default_collection()
    # The same key in three collections: three documents.
    for i in range(100):
        airline.upsert(f"k{i}", {"in": "airline", "i": i})
        hotel.upsert(f"k{i}", {"in": "hotel", "i": i})
    default.upsert("k0", {"in": "default"})
    for i in range(100):
        assert airline.get(f"k{i}").content_as[dict] == {"in": "airline", "i": i}
        assert hotel.get(f"k{i}").content_as[dict] == {"in": "hotel", "i": i}
    assert default.get("k0").content_as[dict] == {"in": "default"}
    with pytest.raises(DocumentNotFoundException):
        default.get("k1")
    hotel.remove("k99")
    with pytest.raises(DocumentNotFoundException):
        hotel.get("k99")
    assert airline.get("k99").content_as[dict]["in"] == "airline"
    assert eventually("the node counts airline's documents",
                      lambda: collection_items(sdk_server.admin_url, "airline") == 100)
    assert collection_items(sdk_server.admin_url, "hotel") == 99
    # Their documents take memory, each collection its own share.
    mem = {c: collection_metric(sdk_server.admin_url, c, "collection_mem_used_bytes")
           for c in ("airline", "hotel")}
    assert all(m is not None and m > 100 * len('{"in":"airline","i":0}') for m in mem.values()), mem

    # The collection manager changes hotel's maxTTL (PATCH): later writes are capped by it.
    mgr.update_collection(SCOPE, "hotel", UpdateCollectionSettings(max_expiry=timedelta(seconds=60)))
    specs = {c.name: c for s in mgr.get_all_scopes() if s.name == SCOPE for c in s.collections}
    assert specs["hotel"].max_expiry == timedelta(seconds=60)
    assert specs["airline"].max_expiry in (None, timedelta(0))
    hotel.upsert("capped", {"in": "hotel"})
    expiry = hotel.get("capped", GetOptions(with_expiry=True)).expiry_time
    assert expiry is not None, "a write into hotel now expires"

    # Dropping airline: its documents go; hotel's and the default collection's stay.
    mgr.drop_collection(SCOPE, "airline")
    with pytest.raises(CollectionNotFoundException):
        mgr.drop_collection(SCOPE, "airline")
    assert scope_names(mgr) == {"_default": ["_default"], SCOPE: ["hotel"]}
    with pytest.raises(CouchbaseException):
        airline.get("k1", GetOptions(timeout=timedelta(seconds=2)))
    eventually("airline is no longer counted",
               lambda: collection_items(sdk_server.admin_url, "airline") is None)
    # A new collection of the same name is a new collection: empty.
    mgr.create_collection(SCOPE, "airline")
    again = bucket.scope(SCOPE).collection("airline")
    eventually("the new airline collection is usable",
               lambda: again.upsert("fresh", {"new": True}, UpsertOptions(
                   timeout=timedelta(seconds=2))) is not None)
    with pytest.raises(DocumentNotFoundException):
        again.get("k1")
    assert eventually("only the new document is counted",
                      lambda: collection_items(sdk_server.admin_url, "airline") == 1)
    assert hotel.get("k1").content_as[dict]["in"] == "hotel"

    # Dropping the scope drops its collections.
    mgr.drop_scope(SCOPE)
    with pytest.raises(ScopeNotFoundException):
        mgr.drop_scope(SCOPE)
    assert scope_names(mgr) == {"_default": ["_default"]}
    assert default.get("k0").content_as[dict] == {"in": "default"}


@pytest.mark.timeout(300)
def test_collections_on_a_three_node_cluster(tmp_path):
    """On `sluice cluster up` (3 nodes, 1 replica): a collection made through one node is
    usable through every node's vbuckets, its documents reach their replicas, and its drop
    takes them on every node."""
    from test_cluster_up import cluster_up, free_base, stop, wait_up
    from sdk_node import connect

    base = free_base()
    proc = cluster_up(tmp_path, base)
    try:
        wait_up(proc, tmp_path)
        cluster = connect(f"couchbase://127.0.0.1:{base}")
        bucket = cluster.bucket(BUCKET)
        mgr = bucket.collections()
        mgr.create_scope(SCOPE)
        mgr.create_collection(SCOPE, "airline")
        airline = bucket.scope(SCOPE).collection("airline")
        for i in range(200):
            eventually(f"upsert k{i}", lambda i=i: airline.upsert(f"k{i}", {"i": i}) is not None)
        for i in range(200):
            assert airline.get(f"k{i}").content_as[dict] == {"i": i}
            eventually(f"replica of k{i}",
                       lambda i=i: airline.get_any_replica(f"k{i}").content_as[dict] == {"i": i})
        with pytest.raises(DocumentNotFoundException):
            bucket.default_collection().get("k1")
        # Every node counts its share (actives and replicas: 400 copies in all).
        def counts():
            return [collection_items(f"http://127.0.0.1:{base + 10 * n + 1}", "airline") or 0
                    for n in range(3)]
        eventually("400 copies counted over the nodes",
                   lambda: sum(counts()) == 400 and all(c > 0 for c in counts()))
        mgr.drop_collection(SCOPE, "airline")
        for n in range(3):
            eventually(f"node {n} forgets airline",
                       lambda n=n: collection_items(f"http://127.0.0.1:{base + 10 * n + 1}",
                                                    "airline") is None)
        cluster.close()
    finally:
        stop(proc)
