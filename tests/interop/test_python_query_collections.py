"""The query and index services on named collections, through the Couchbase Python SDK (4.6.x,
C++ core), as Couchbase Server 7.x behaves. Scope `inv` holds collections `hotel` and
`airline`; the default collection and `airline` hold documents under hotel's keys that match
the same predicates, so a leak between collections changes an answer.

- The collection-level query index manager (`collection.query_indexes()`) creates, lists,
  builds and drops one collection's indexes (one name per collection); `system:indexes` rows
  name bucket_id / scope_id / keyspace_id; dropping a collection drops its indexes.
- Scope-level queries (the SDK sends `query_context`) and full paths with REQUEST_PLUS answer
  what a Python model of hotel says, covered and fetching, across rounds of writes
  (`QUERY_SEED=<n>` replays); DML writes hotel only; an unknown collection is 12003.
- `sluice cluster up` (3 nodes, 1 replica): hotel's documents active on every node, each
  node's query service asked by hand.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from datetime import timedelta
from types import SimpleNamespace
from typing import Dict

import pytest
from couchbase.exceptions import (CouchbaseException, KeyspaceNotFoundException,
                                  QueryIndexAlreadyExistsException,
                                  QueryIndexNotFoundException)
from couchbase.management.options import CreateQueryIndexOptions
from couchbase.n1ql import QueryScanConsistency
from couchbase.options import QueryOptions

import admin_http
from conftest import BUCKET
from mcbin import vbucket_of
from test_buckets import eventually
from test_cluster_faults import vbucket_map
from test_cluster_up import free_base, stop, wait_up
from test_python_query import any_node, connect, node, raw_query  # noqa: F401 (fixtures)
from test_python_query_cluster import cluster_up, query_nodes
from test_python_query_cluster import connect as connect_cluster

pytestmark = pytest.mark.timeout(240)

VBUCKETS = 64
SCOPE = "inv"
PLUS = QueryScanConsistency.REQUEST_PLUS
CITIES = ["Oslo", "Lima", "Pune", "Kyiv", "Baku"]
TAGS = ["pool", "spa", "gym", "bar", "wifi"]


def seeded() -> random.Random:
    seed = int(os.environ.get("QUERY_SEED", random.randrange(1 << 30)))
    print(f"QUERY_SEED={seed}")
    return random.Random(seed)


def q(target, statement: str, **params) -> list:
    """A REQUEST_PLUS statement through `target.query` (a Cluster, or a Scope: query_context)."""
    opts = QueryOptions(named_parameters=params, scan_consistency=PLUS) if params \
        else QueryOptions(scan_consistency=PLUS)
    return list(target.query(statement, opts).rows())


def query_at(admin: int, statement: str, query_context: str = None, **params) -> list:
    """A REQUEST_PLUS statement on one node's query service, by hand: its results."""
    body = {"statement": statement, "scan_consistency": "request_plus",
            **{f"${k}": v for k, v in params.items()}}
    if query_context:
        body["query_context"] = query_context
    status, answer = raw_query(SimpleNamespace(admin_url=f"http://127.0.0.1:{admin}"), body)
    assert status == 200 and answer["status"] == "success", (admin, body, answer)
    return answer["results"]


def hotel_doc(rng: random.Random, i: int) -> dict:
    doc = {"name": f"{rng.choice(['Grand', 'Park', 'Royal'])} {i:04d}",
           "stars": rng.randint(1, 5), "tags": rng.sample(TAGS, rng.randint(0, 3))}
    if rng.random() < 0.9:
        doc["city"] = rng.choice(CITIES)
    return doc


def decoy(rng: random.Random, where: str, key: str) -> dict:
    """What another collection holds under one of hotel's keys."""
    return {"name": f"{where} {key}", "city": rng.choice(CITIES), "stars": rng.randint(1, 5),
            "tags": ["decoy"]}


def make_collections(cluster):
    """Scope inv with hotel and airline: (bucket, scope, hotel, airline, default collection)."""
    bucket = cluster.bucket(BUCKET)
    mgr = bucket.collections()
    mgr.create_scope(SCOPE)
    mgr.create_collection(SCOPE, "hotel")
    mgr.create_collection(SCOPE, "airline")
    scope = bucket.scope(SCOPE)
    hotel, airline = scope.collection("hotel"), scope.collection("airline")
    for c in (hotel, airline):
        eventually("the collection takes writes", lambda c=c: c.upsert("probe", {}) is not None)
        c.remove("probe")
    return bucket, scope, hotel, airline, bucket.default_collection()


def load(rng, n: int, hotel, others: Dict[str, tuple]) -> Dict[str, dict]:
    """`n` documents into hotel; decoys under some of their keys in `others` (name ->
    (collection, its model))."""
    model = {}
    for i in range(n):
        k = f"h{i:03d}"
        model[k] = hotel_doc(rng, i)
        for name, (coll, m) in others.items():
            if rng.random() < 0.5:
                m[k] = decoy(rng, name, k)
    written = hotel.upsert_multi(model)
    assert written.all_ok, written.exceptions
    for coll, m in others.values():
        if m:
            assert coll.upsert_multi(m).all_ok
    return model


def by_name(d: dict) -> str:
    return d["name"]


def plan_of(target, statement: str) -> tuple:
    """(index, covered, fetched) of the statement's plan."""
    children = q(target, f"EXPLAIN {statement}")[0]["plan"]["~children"]
    ops = [op["#operator"] for op in children]
    return children[0].get("index"), "covers" in children[0], "Fetch" in ops


def check_model(cluster, scope, model: Dict[str, dict], others: Dict[str, tuple], where: str):
    """Every kind of statement on hotel answers what `model` says; the others theirs."""
    for c in CITIES:
        in_c = sorted((d for d in model.values() if d.get("city") == c), key=by_name)
        got = q(scope, "SELECT h.name, h.stars FROM hotel h WHERE h.city = $c "
                       "ORDER BY h.name LIMIT 10", c=c)
        assert got == [{"name": d["name"], "stars": d["stars"]} for d in in_c[:10]], (where, c)
        got = q(cluster, f"SELECT META(h).id FROM `{BUCKET}`.inv.hotel h WHERE h.city = $c", c=c)
        assert sorted(r["id"] for r in got) == \
            sorted(k for k, d in model.items() if d.get("city") == c), (where, c)
        # Fetching through ix_city: the documents' other fields.
        got = q(scope, "SELECT META(h).id AS id, h.stars, h.tags FROM hotel h "
                       "WHERE h.city = $c AND h.stars >= 3", c=c)
        assert sorted(got, key=lambda r: r["id"]) == [
            {"id": k, "stars": d["stars"], "tags": d["tags"]} for k, d in sorted(model.items())
            if d.get("city") == c and d["stars"] >= 3], (where, c)
    # Covered by ix_city: rows built from its entries.
    got = q(scope, "SELECT h.city FROM hotel h WHERE h.city >= $lo", lo="Lima")
    assert sorted(r["city"] for r in got) == \
        sorted(d["city"] for d in model.values() if d.get("city", "") >= "Lima"), where
    # SELECT *: each row is the document under the alias, here the collection's name.
    got = q(scope, "SELECT * FROM hotel WHERE stars >= $s", s=4)
    assert all(list(r) == ["hotel"] for r in got), got[:3]
    assert sorted((r["hotel"] for r in got), key=by_name) == \
        sorted((d for d in model.values() if d["stars"] >= 4), key=by_name), where
    got = q(cluster, f"SELECT RAW COUNT(*) FROM `{BUCKET}`.inv.hotel")
    assert got == [len(model)], where
    got = q(scope, "SELECT h.city, COUNT(*) AS n FROM hotel h WHERE h.city IS VALUED "
                   "GROUP BY h.city ORDER BY h.city")
    counts = Counter(d["city"] for d in model.values() if "city" in d)
    assert got == [{"city": c, "n": counts[c]} for c in sorted(counts)], where
    # The other collections answer their own documents (primary scans).
    assert q(cluster, f"SELECT RAW META().id FROM `{BUCKET}` ORDER BY META().id") == \
        sorted(others["default"][1]), where
    assert q(scope, "SELECT RAW META(a).id FROM airline a ORDER BY META(a).id") == \
        sorted(others["airline"][1]), where


# ------------------------------------------------------------------ index managers

def names(mgr, *args) -> Dict[str, tuple]:
    """name -> (bucket, scope, collection, state) as the SDK's manager lists them."""
    return {i.name: (i.bucket_name, i.scope_name, i.collection_name, i.state)
            for i in mgr.get_all_indexes(*args)}


def test_collection_index_managers_and_system_indexes(node):
    cluster = connect(node)
    bucket, scope, hotel, airline, default = make_collections(cluster)
    hmgr, amgr = hotel.query_indexes(), airline.query_indexes()
    hmgr.create_index("ix_city", ["city"])
    hmgr.create_primary_index()
    # One name per collection: the same name on airline and the default collection is taken.
    amgr.create_index("ix_city", ["city"])
    cluster.query_indexes().create_index(BUCKET, "ix_city", ["city"])
    with pytest.raises(QueryIndexAlreadyExistsException):
        hmgr.create_index("ix_city", ["stars"])
    hmgr.create_index("ix_city", ["stars"], CreateQueryIndexOptions(ignore_if_exists=True))
    hmgr.create_index("ix_stars", ["stars"], CreateQueryIndexOptions(deferred=True))

    on_hotel = (BUCKET, SCOPE, "hotel")
    assert names(hmgr) == {"#primary": (*on_hotel, "online"), "ix_city": (*on_hotel, "online"),
                           "ix_stars": (*on_hotel, "deferred")}
    listed = {i.name: i for i in hmgr.get_all_indexes()}
    assert listed["#primary"].is_primary and not listed["ix_city"].is_primary
    assert listed["ix_city"].index_key == ["`city`"]
    assert names(amgr) == {"ix_city": (BUCKET, SCOPE, "airline", "online")}
    assert names(default.query_indexes()) == {"ix_city": (BUCKET, None, None, "online")}
    # The bucket-level manager lists every collection's indexes (bucket_id = the bucket, or
    # the default collection's keyspace_id).
    everything = {(i.scope_name, i.collection_name, i.name)
                  for i in cluster.query_indexes().get_all_indexes(BUCKET)}
    assert everything == {(SCOPE, "hotel", "#primary"), (SCOPE, "hotel", "ix_city"),
                          (SCOPE, "hotel", "ix_stars"), (SCOPE, "airline", "ix_city"),
                          (None, None, "ix_city")}, everything
    hmgr.build_deferred_indexes()
    hmgr.watch_indexes(["ix_stars"], timeout=timedelta(seconds=30))
    assert names(hmgr)["ix_stars"] == (*on_hotel, "online")

    got = q(cluster, "SELECT bucket_id, scope_id, keyspace_id, namespace_id, name "
                     "FROM system:indexes WHERE name = 'ix_city'")
    want = [{"bucket_id": BUCKET, "scope_id": SCOPE, "keyspace_id": c, "namespace_id": "default",
             "name": "ix_city"} for c in ("airline", "hotel")]
    want.append({"keyspace_id": BUCKET, "namespace_id": "default", "name": "ix_city"})
    assert sorted(got, key=repr) == sorted(want, key=repr), got

    # Dropping hotel's ix_city leaves airline's and the default collection's.
    hmgr.drop_index("ix_city")
    with pytest.raises(QueryIndexNotFoundException):
        hmgr.drop_index("ix_city")
    assert set(names(hmgr)) == {"#primary", "ix_stars"}
    assert set(names(amgr)) == {"ix_city"} and set(names(default.query_indexes())) == {"ix_city"}
    hmgr.drop_primary_index()
    assert set(names(hmgr)) == {"ix_stars"}

    # Dropping a collection drops its indexes (bounded wait).
    bucket.collections().drop_collection(SCOPE, "airline")
    statement = ("SELECT RAW name FROM system:indexes WHERE bucket_id = $b "
                 "AND scope_id = 'inv' AND keyspace_id = 'airline'")
    deadline = time.monotonic() + 30
    while (left := q(cluster, statement, b=BUCKET)) != []:
        assert time.monotonic() < deadline, f"airline's indexes outlived it: {left}"
        time.sleep(0.2)
    assert set(names(hmgr)) == {"ix_stars"}
    assert set(names(default.query_indexes())) == {"ix_city"}
    with pytest.raises(KeyspaceNotFoundException):  # and its name is unknown
        q(scope, "SELECT * FROM airline")
    cluster.close()


# ------------------------------------------------------------------ queries against a model

def random_writes(rng, hotel, model, others: Dict[str, tuple], next_i: int, n: int) -> int:
    """`n` upserts changing a city, removes and inserts into hotel, each followed by a decoy
    under the same key in another collection. Returns the next free document number."""
    for _ in range(n):
        r = rng.random()
        if r < 0.4 and model:
            k = rng.choice(sorted(model))
            model[k] = dict(model[k], city=rng.choice(CITIES))
            hotel.upsert(k, model[k])
        elif r < 0.6 and model:
            k = rng.choice(sorted(model))
            hotel.remove(k)
            del model[k]
        else:
            k = f"h{next_i:03d}"
            model[k] = hotel_doc(rng, next_i)
            hotel.insert(k, model[k])
            next_i += 1
        name = rng.choice(sorted(others))
        coll, m = others[name]
        m[k] = decoy(rng, name, k)
        coll.upsert(k, m[k])
    return next_i


def test_collection_queries_match_a_model(any_node):
    rng = seeded()
    cluster = connect(any_node)
    bucket, scope, hotel, airline, default = make_collections(cluster)
    hotel.query_indexes().create_primary_index()
    hotel.query_indexes().create_index("ix_city", ["city"])
    airline.query_indexes().create_primary_index()
    airline.query_indexes().create_index("ix_city", ["city"])
    cluster.query_indexes().create_primary_index(BUCKET)
    cluster.query_indexes().create_index(BUCKET, "ix_city", ["city"])
    others = {"default": (default, {}), "airline": (airline, {})}
    model = load(rng, 200, hotel, others)

    # The plans: ix_city covers a statement on city alone, fetches for the others.
    assert plan_of(scope, "SELECT h.city FROM hotel h WHERE h.city >= 'Lima'") == \
        ("ix_city", True, False)
    assert plan_of(scope, "SELECT h.stars FROM hotel h WHERE h.city = 'Oslo'") == \
        ("ix_city", False, True)
    check_model(cluster, scope, model, others, "after the load")
    next_i = 200
    for round_ in range(4):
        next_i = random_writes(rng, hotel, model, others, next_i, 40)
        check_model(cluster, scope, model, others, f"round {round_}")
    cluster.close()


# ------------------------------------------------------------------ DML

def test_dml_on_a_collection_writes_that_collection_only(node):
    rng = random.Random(11)
    cluster = connect(node)
    bucket, scope, hotel, airline, default = make_collections(cluster)
    hotel.query_indexes().create_primary_index()
    cluster.query_indexes().create_primary_index(BUCKET)
    others = {"default": (default, {}), "airline": (airline, {})}
    model = load(rng, 60, hotel, others)
    others["default"][1]["h-new"] = {"in": "default"}
    default.upsert("h-new", {"in": "default"})

    got = q(scope, "INSERT INTO hotel (KEY, VALUE) VALUES ('h-new', "
                   "{'name': 'New', 'city': 'Oslo', 'stars': 2}) RETURNING META().id AS id")
    assert got == [{"id": "h-new"}]
    model["h-new"] = {"name": "New", "city": "Oslo", "stars": 2}
    assert hotel.get("h-new").content_as[dict] == model["h-new"]
    with pytest.raises(CouchbaseException):  # the key exists in hotel
        q(scope, "INSERT INTO hotel (KEY, VALUE) VALUES ('h-new', {'n': 1})")

    got = q(scope, "UPDATE hotel SET stars = 5 WHERE city = $c RETURNING META().id AS id", c="Oslo")
    oslo = sorted(k for k, d in model.items() if d.get("city") == "Oslo")
    assert sorted(r["id"] for r in got) == oslo
    for k in oslo:
        model[k] = dict(model[k], stars=5)
        assert hotel.get(k).content_as[dict] == model[k], k

    got = q(scope, "DELETE FROM hotel WHERE city = $c RETURNING META().id AS id", c="Lima")
    lima = sorted(k for k, d in model.items() if d.get("city") == "Lima")
    assert lima and sorted(r["id"] for r in got) == lima
    for k in lima:
        del model[k]
        assert not hotel.exists(k).exists, k

    q(cluster, f"UPSERT INTO `{BUCKET}`.inv.hotel (KEY, VALUE) VALUES ('h-up', {{'stars': 1}})")
    model["h-up"] = {"stars": 1}
    assert hotel.get("h-up").content_as[dict] == {"stars": 1}

    # Every collection holds what it should, through KV and through the query service.
    for k, d in model.items():
        assert hotel.get(k).content_as[dict] == d, k
    for name, (coll, theirs) in others.items():
        for k, d in theirs.items():
            assert coll.get(k).content_as[dict] == d, (name, k)
    assert q(scope, "SELECT RAW META().id FROM hotel ORDER BY META().id") == sorted(model)
    assert q(cluster, f"SELECT RAW META().id FROM `{BUCKET}` ORDER BY META().id") == \
        sorted(others["default"][1])
    cluster.close()


# ------------------------------------------------------------------ errors

def test_an_unknown_collection_is_keyspace_not_found(node):
    cluster = connect(node)
    _, scope, *_ = make_collections(cluster)
    with pytest.raises(KeyspaceNotFoundException):
        q(cluster, f"SELECT * FROM `{BUCKET}`.inv.nosuch")
    with pytest.raises(KeyspaceNotFoundException):
        q(scope, "SELECT * FROM nosuch")
    for body in ({"statement": f"SELECT * FROM `{BUCKET}`.inv.nosuch"},
                 {"statement": "SELECT * FROM nosuch", "query_context": f"default:{BUCKET}.inv"},
                 {"statement": f"CREATE INDEX ix ON `{BUCKET}`.inv.nosuch(a)"},
                 {"statement": f"INSERT INTO `{BUCKET}`.inv.nosuch (KEY, VALUE) VALUES ('k', 1)"}):
        status, answer = raw_query(node, body)
        assert status >= 400 and answer["errors"][0]["code"] == 12003, (body, answer)
    cluster.close()


# ------------------------------------------------------------------ three nodes

@pytest.mark.timeout(420)
def test_three_nodes_answer_a_collection_from_every_node(tmp_path):
    rng = seeded()
    base = free_base()
    proc = cluster_up(tmp_path, base, 1)
    try:
        wait_up(proc, tmp_path)
        admins = [base + 1, base + 11, base + 21]
        for admin in admins:
            eventually(f"node {admin} lists every query service",
                       lambda a=admin: query_nodes(a) == [f"127.0.0.1:{p}" for p in admins])
        cluster = connect_cluster(base)
        bucket, scope, hotel, airline, default = make_collections(cluster)
        for admin in admins:  # every node's manifest has hotel
            eventually(f"node {admin} knows hotel", lambda a=admin: "hotel" in json.dumps(
                admin_http.get_json(f"http://127.0.0.1:{a}/pools/default/buckets/{BUCKET}/scopes")))
        others = {"default": (default, {}), "airline": (airline, {})}
        model = load(rng, 300, hotel, others)
        # Hotel's documents are active on every node: a query node fetches some locally and
        # the others through KV, with the collection.
        chains = vbucket_map(base + 1)
        assert {chains[vbucket_of(k.encode(), VBUCKETS)][0] for k in model} == \
            {base, base + 10, base + 20}
        hotel.query_indexes().create_primary_index()
        hotel.query_indexes().create_index("ix_city", ["city"])
        cluster.query_indexes().create_index(BUCKET, "ix_city", ["city"])  # a decoy index
        assert names(hotel.query_indexes())["ix_city"] == (BUCKET, SCOPE, "hotel", "online")

        next_i = 300
        contexts = [f"`{BUCKET}`.`{SCOPE}`", f"default:{BUCKET}.{SCOPE}"]
        for round_ in range(3):
            for n, admin in enumerate(admins):
                where, qc = (round_, admin), contexts[n % 2]
                c = CITIES[(round_ + n) % len(CITIES)]
                in_c = sorted(k for k, d in model.items() if d.get("city") == c)
                got = query_at(admin, "SELECT RAW h.city FROM hotel h WHERE h.city = $c", qc, c=c)
                assert got == [c] * len(in_c), where  # covered
                got = query_at(admin, "SELECT META(h).id AS id, h.stars FROM hotel h "
                                      "WHERE h.city = $c ORDER BY META(h).id", qc, c=c)
                assert got == [{"id": k, "stars": model[k]["stars"]} for k in in_c], where
                got = query_at(admin, "SELECT RAW META(h).id FROM hotel h ORDER BY META(h).id", qc)
                assert got == sorted(model), where  # primary scan
                got = query_at(admin, f"SELECT h.name, h.tags FROM `{BUCKET}`.inv.hotel h "
                                      "WHERE h.stars >= 4 ORDER BY h.name")
                assert got == [{"name": d["name"], "tags": d["tags"]}
                               for d in sorted(model.values(), key=by_name)
                               if d["stars"] >= 4], where  # primary scan, fetched
            next_i = random_writes(rng, hotel, model, others, next_i, 30)

        # Dropping the collection drops its indexes on every node.
        bucket.collections().drop_collection(SCOPE, "hotel")
        for admin in admins:
            eventually(f"node {admin} drops hotel's indexes", lambda a=admin: query_at(
                a, "SELECT RAW name FROM system:indexes WHERE keyspace_id = 'hotel'") == [],
                timeout_s=30)
        cluster.close()
    finally:
        stop(proc)
