"""The query and index services through the Couchbase Python SDK (4.6.x, C++ core), against a
one-node Sluice cluster: the SDK finds `n1ql` in the cluster map and POSTs to
`/query/service`.

- The query index manager creates, lists, builds and drops indexes.
- `cluster.query` with named parameters and REQUEST_PLUS returns exactly what a Python model of
  the data says, also for random documents and random queries with writes, deletes and
  expirations in between (seeded; `QUERY_SEED=<n>` replays).
- DML (INSERT / UPSERT / UPDATE / DELETE) writes through KV.
- Prepared statements: the SDK with `adhoc=False` (PREPARE with auto_execute, then the
  name), `prepared` and EXECUTE by hand, `system:prepareds`, and Couchbase's 4040 / 4060.
- Errors carry Couchbase's codes: 3000 syntax, 12003 unknown keyspace, 4000 no index,
  4300 duplicate index, 1065 unknown parameter.
- kill -9 and restart: every index resumes from its saved positions (the log and STAT
  `index` say so), and answers stay right.
- A lost tail of writes (kill -9 before the flusher persisted it) makes the KV vbuckets roll
  back on restart: the index clears and rebuilds only the vbuckets that rolled back.

The property test mixes statements the chosen index covers (rows built from its entries,
EXPLAIN lists `covers` and no Fetch) with statements that fetch every document, and checks
both kinds ran.

Clusters of three nodes: test_python_query_cluster.py. Not covered (not built): index
replicas.
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import time
import urllib.error
import urllib.request
import zlib
from datetime import timedelta

import pytest

from couchbase.auth import PasswordAuthenticator
from couchbase.cluster import Cluster
from couchbase.exceptions import (CouchbaseException, DocumentNotFoundException,
                                  ParsingFailedException,
                                  QueryIndexAlreadyExistsException,
                                  QueryIndexNotFoundException)
from couchbase.management.options import CreateQueryIndexOptions
from couchbase.n1ql import QueryScanConsistency
from couchbase.options import (ClusterOptions, ClusterTimeoutOptions, QueryOptions,
                               UpsertOptions)

from conftest import BUCKET, PASSWORD, USERNAME
import mcbin

pytestmark = pytest.mark.timeout(240)

VBUCKETS = 64
PLUS = QueryScanConsistency.REQUEST_PLUS


def connect(srv) -> Cluster:
    opts = ClusterOptions(
        PasswordAuthenticator(USERNAME, PASSWORD),
        timeout_options=ClusterTimeoutOptions(bootstrap_timeout=timedelta(seconds=10),
                                              kv_timeout=timedelta(seconds=5),
                                              query_timeout=timedelta(seconds=30),
                                              management_timeout=timedelta(seconds=30)),
        enable_dns_srv=False)
    c = Cluster(srv.connstr, opts)
    c.wait_until_ready(timedelta(seconds=20))
    return c


def rows(cluster: Cluster, statement: str, **params) -> list:
    opts = QueryOptions(named_parameters=params, scan_consistency=PLUS) if params \
        else QueryOptions(scan_consistency=PLUS)
    return list(cluster.query(statement, opts).rows())


def raw_query(srv, body: dict, user: str = USERNAME, password: str = PASSWORD) -> tuple:
    """POST /query/service by hand: (http status, parsed body)."""
    req = urllib.request.Request(f"{srv.admin_url}/query/service",
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        body = e.read()
        try:
            return e.code, json.loads(body or b"{}")
        except ValueError:
            return e.code, {"text": body.decode(errors="replace")}


def index_stats(srv) -> dict:
    """STAT `index` of the bucket, over the KV port."""
    c = mcbin.Conn(srv.kv_port)
    try:
        c.auth_plain(USERNAME, PASSWORD)
        c.select_bucket(BUCKET)
        return c.stat("index")
    finally:
        c.close()


def wait_persisted(srv, timeout: float) -> None:
    """Until every vbucket's persisted seqno reached its high seqno (STAT vbucket-seqno)."""
    with mcbin.Conn(srv.kv_port) as c:
        c.auth_plain(USERNAME, PASSWORD)
        c.select_bucket(BUCKET)
        deadline = time.time() + timeout
        while True:
            seqnos = c.stat("vbucket-seqno")
            behind = [k for k, v in seqnos.items() if k.endswith(":high_seqno")
                      and seqnos[k.replace(":high_seqno", ":last_persisted_seqno")] != v]
            if not behind:
                return
            assert time.time() < deadline, behind
            time.sleep(0.1)


@pytest.fixture
def node(sluice_factory):
    return sluice_factory(vbuckets=VBUCKETS, memcached=False)


@pytest.fixture(params=["couchbase", "ephemeral"])
def any_node(request, sluice_factory):
    """A node of each bucket type: the index feeds from DCP either way."""
    return sluice_factory(vbuckets=VBUCKETS, memcached=False, bucket_type=request.param)


# ------------------------------------------------------------------ index manager, queries

def test_index_manager_and_queries_match_a_model(any_node):
    cluster = connect(any_node)
    coll = cluster.bucket(BUCKET).default_collection()
    mgr = cluster.query_indexes()
    mgr.create_primary_index(BUCKET)
    mgr.create_index(BUCKET, "by_status", ["status", "n"])
    with pytest.raises(QueryIndexAlreadyExistsException):
        mgr.create_index(BUCKET, "by_status", ["status"])
    mgr.create_index(BUCKET, "by_status", ["status"], CreateQueryIndexOptions(ignore_if_exists=True))
    # The SDK backticks each field it is given whole (`address.city` would name one field
    # with a dot in its name), so a nested key is defined by statement.
    cluster.query('CREATE INDEX by_city ON default(address.city) WITH {"defer_build": true}').execute()
    listed = {i.name: i for i in mgr.get_all_indexes(BUCKET)}
    assert set(listed) == {"#primary", "by_status", "by_city"}, listed
    assert listed["#primary"].is_primary and not listed["by_status"].is_primary
    assert listed["by_status"].state == "online"
    assert listed["by_city"].state == "deferred"
    assert listed["by_status"].index_key == ["`status`", "`n`"]
    mgr.build_deferred_indexes(BUCKET)
    mgr.watch_indexes(BUCKET, ["by_city"], timeout=timedelta(seconds=30))

    model = {}
    statuses = ["open", "closed", "held"]
    cities = ["Oslo", "Lima", "Pune", None]
    for i in range(400):
        doc = {"status": statuses[i % 3], "n": i, "kind": "order"}
        if cities[i % 4] is not None:
            doc["address"] = {"city": cities[i % 4]}
        coll.upsert(f"order-{i:04d}", doc)
        model[f"order-{i:04d}"] = doc

    got = rows(cluster, "SELECT META().id AS id, n FROM default WHERE status = $s AND n >= $lo "
                        "ORDER BY n DESC LIMIT 7", s="open", lo=100)
    want = sorted(((k, d["n"]) for k, d in model.items()
                   if d["status"] == "open" and d["n"] >= 100), key=lambda x: -x[1])[:7]
    assert [(r["id"], r["n"]) for r in got] == want

    got = rows(cluster, "SELECT d.address.city AS city, COUNT(*) AS c FROM default d "
                        "WHERE d.address.city IS NOT MISSING GROUP BY d.address.city "
                        "ORDER BY city")
    counts = {}
    for d in model.values():
        if "address" in d:
            counts[d["address"]["city"]] = counts.get(d["address"]["city"], 0) + 1
    assert got == [{"city": c, "c": counts[c]} for c in sorted(counts)]

    # EXPLAIN names the index the planner chose.
    plan = rows(cluster, "EXPLAIN SELECT * FROM default WHERE address.city = 'Oslo'")[0]
    assert plan["plan"]["~children"][0]["index"] == "by_city", plan
    plan = rows(cluster, "EXPLAIN SELECT * FROM default WHERE kind = 'order'")[0]
    assert plan["plan"]["~children"][0]["#operator"] == "PrimaryScan3", plan

    mgr.drop_index(BUCKET, "by_city")
    with pytest.raises(QueryIndexNotFoundException):
        mgr.drop_index(BUCKET, "by_city")
    assert {i.name for i in mgr.get_all_indexes(BUCKET)} == {"#primary", "by_status"}
    cluster.close()


def test_dml_writes_through_kv(node):
    cluster = connect(node)
    coll = cluster.bucket(BUCKET).default_collection()
    cluster.query_indexes().create_primary_index(BUCKET)
    got = rows(cluster, "INSERT INTO default (KEY, VALUE) VALUES ('a', {'n': 1}), "
                        "('b', {'n': 2}) RETURNING META().id AS id, n")
    assert sorted((r["id"], r["n"]) for r in got) == [("a", 1), ("b", 2)]
    with pytest.raises(CouchbaseException):
        rows(cluster, "INSERT INTO default (KEY, VALUE) VALUES ('a', {'n': 9})")
    rows(cluster, "UPSERT INTO default (KEY, VALUE) VALUES ('c', {'n': 3})")
    got = rows(cluster, "UPDATE default SET n = n * 10, tag = 'big' WHERE n >= 2 "
                        "RETURNING META().id AS id, n")
    assert sorted((r["id"], r["n"]) for r in got) == [("b", 20), ("c", 30)]
    # What the statements wrote is what KV reads.
    assert coll.get("b").content_as[dict] == {"n": 20, "tag": "big"}
    assert coll.get("a").content_as[dict] == {"n": 1}
    rows(cluster, "UPDATE default USE KEYS 'a' SET m = 5 UNSET n")
    assert coll.get("a").content_as[dict] == {"m": 5}
    got = rows(cluster, "DELETE FROM default WHERE n = 30 RETURNING META().id AS id")
    assert got == [{"id": "c"}]
    assert not coll.exists("c").exists
    assert rows(cluster, "SELECT RAW META().id FROM default ORDER BY META().id") == ["a", "b"]
    cluster.close()


def test_a_large_result_streams(node):
    cluster = connect(node)
    coll = cluster.bucket(BUCKET).default_collection()
    cluster.query_indexes().create_primary_index(BUCKET)
    pad = "x" * 1000
    for i in range(1500):
        coll.upsert(f"big{i:05d}", {"i": i, "pad": pad})
    assert sorted(rows(cluster, "SELECT RAW i FROM default WHERE i >= 0")) == list(range(1500))
    # By hand: ~1.5 MB of results come chunked, not as one body with a length.
    body = {"statement": "SELECT d.* FROM default d", "scan_consistency": "request_plus"}
    req = urllib.request.Request(f"{node.admin_url}/query/service",
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    token = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
    req.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.headers.get("Transfer-Encoding") == "chunked", dict(resp.headers)
        answer = json.loads(resp.read())
    assert answer["status"] == "success"
    assert answer["metrics"]["resultCount"] == 1500 == len(answer["results"])
    assert sorted(r["i"] for r in answer["results"]) == list(range(1500))
    # A small result is one body with its length.
    req = urllib.request.Request(f"{node.admin_url}/query/service",
                                 data=b'{"statement": "SELECT 1"}', method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Basic {token}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.headers.get("Content-Length") is not None
        assert json.loads(resp.read())["results"] == [{"$1": 1}]
    cluster.close()


def test_errors_carry_couchbases_codes(node):
    cluster = connect(node)
    cluster.query_indexes().create_index(BUCKET, "by_a", ["a"])
    with pytest.raises(ParsingFailedException):
        rows(cluster, "SELEC 1")
    cases = [
        ({"statement": "SELEC 1"}, 3000),
        ({"statement": "SELECT * FROM nosuchbucket"}, 12003),
        ({"statement": "SELECT * FROM default WHERE b = 1"}, 4000),
        ({"statement": "CREATE INDEX by_a ON default(a)"}, 4300),
        ({"statement": "DROP INDEX default.nosuch"}, 12004),
        ({"statement": "SELECT 1", "no_such_parameter": 1}, 1065),
    ]
    for body, code in cases:
        status, answer = raw_query(node, body)
        assert answer["status"] in ("errors", "fatal"), (body, answer)
        assert answer["errors"][0]["code"] == code, (body, answer)
        assert status >= 400, (body, status)
    # The syntax error says where.
    _, answer = raw_query(node, {"statement": "SELECT * FROM default WHERE WHERE"})
    assert "line 1, column" in answer["errors"][0]["msg"], answer
    # Hostile bodies: too deep, too large, not JSON, empty; the node answers and stays up.
    status, answer = raw_query(node, {"statement": "SELECT " + "(" * 5000 + "1" + ")" * 5000})
    assert status == 400 and answer["errors"][0]["code"] == 3000, answer
    try:
        status, _ = raw_query(node, {"statement": "SELECT 1", "pad": "x" * (5 << 20)})
        assert status == 413, status
    except (ConnectionError, urllib.error.URLError):
        pass  # refused before the whole body was sent: a clean disconnect
    req = urllib.request.Request(f"{node.admin_url}/query/service", data=b"{not json",
                                 method="POST", headers={"Content-Type": "application/json"})
    req.add_header("Authorization", "Basic " + base64.b64encode(
        f"{USERNAME}:{PASSWORD}".encode()).decode())
    with pytest.raises(urllib.error.HTTPError) as bad:
        urllib.request.urlopen(req, timeout=10)
    assert json.loads(bad.value.read())["errors"][0]["code"] == 1100
    assert raw_query(node, {})[1]["errors"][0]["code"] == 1050
    assert node.health() == 200
    # Wrong password: 401 and nothing runs; a reader may not create an index.
    status, _ = raw_query(node, {"statement": "CREATE PRIMARY INDEX ON default"},
                          password="wrong")
    assert status == 401
    assert not any(r.get("is_primary") for r in
                   raw_query(node, {"statement": "SELECT RAW i FROM system:indexes i"})[1]["results"])
    cluster.close()


def test_prepared_statements_run_by_name_through_the_sdk_and_by_hand(node):
    cluster = connect(node)
    coll = cluster.bucket(BUCKET).default_collection()
    for i in range(20):
        coll.upsert(f"p{i:02d}", {"n": i})
    mgr = cluster.query_indexes()
    mgr.create_index(BUCKET, "by_n", ["n"])
    statement = "SELECT RAW META().id FROM default WHERE n >= $lo AND n < $hi ORDER BY n"
    # The SDK with adhoc=False: PREPARE with auto_execute once, then only the name.
    for lo in range(0, 15, 3):
        opts = QueryOptions(adhoc=False, named_parameters={"lo": lo, "hi": lo + 3},
                            scan_consistency=PLUS)
        got = list(cluster.query(statement, opts).rows())
        assert got == [f"p{i:02d}" for i in range(lo, lo + 3)], lo
    listed = rows(cluster, "SELECT name, statement, uses FROM system:prepareds")
    mine = [p for p in listed if "$lo" in p["statement"]]
    assert len(mine) == 1 and mine[0]["uses"] == 5, listed
    name = mine[0]["name"]

    # By hand: the name with other parameters, EXECUTE ... USING, auto_execute's answer.
    status, body = raw_query(node, {"prepared": name, "$lo": 4, "$hi": 6})
    assert (status, body["results"]) == (200, ["p04", "p05"]), body
    status, body = raw_query(node, {"statement": f"EXECUTE `{name}` USING {{'lo': 1, 'hi': 3}}"})
    assert (status, body["results"]) == (200, ["p01", "p02"]), body
    status, body = raw_query(node, {"statement": "PREPARE SELECT COUNT(*) AS c FROM default "
                                                 "WHERE n >= 10", "auto_execute": True})
    assert body["results"] == [{"c": 10}] and len(body["prepared"]) == 36, body

    # A PREPARE alone describes the statement and the plan it would run now.
    status, body = raw_query(node, {"statement": "PREPARE p_named FROM SELECT META().id "
                                                 "FROM default WHERE n = $n"})
    assert status == 200, body
    row = body["results"][0]
    assert row["name"] == "p_named" and row["encoded_plan"], row
    status, body = raw_query(node, {"statement": "PREPARE SELECT META().id FROM default "
                                                 "WHERE n = 3"})
    assert body["results"][0]["operator"]["~children"][0]["index"] == "by_n", body
    status, body = raw_query(node, {"prepared": "p_named", "$n": 7})
    assert body["results"] == [{"id": "p07"}], body

    # Couchbase's errors: a name taken by another statement, a name unknown here (on which
    # the SDKs prepare again), a name under another query context.
    status, body = raw_query(node, {"statement": "PREPARE p_named AS SELECT 1"})
    assert body["errors"][0]["code"] == 4060, body
    status, body = raw_query(node, {"prepared": "no-such-name"})
    assert body["errors"][0]["code"] == 4040, body
    status, body = raw_query(node, {"prepared": "p_named", "$n": 7,
                                    "query_context": "default:default._default"})
    assert body["errors"][0]["code"] == 4040, body

    # Planned over the indexes there are at each run: with its index gone, the statement
    # has none to use (4000); with a primary index built since, it reads that one.
    mgr.drop_index(BUCKET, "by_n")
    status, body = raw_query(node, {"prepared": "p_named", "$n": 7})
    assert body["errors"][0]["code"] == 4000, body
    mgr.create_primary_index(BUCKET)
    status, body = raw_query(node, {"prepared": "p_named", "$n": 7,
                                    "scan_consistency": "request_plus"})
    assert (status, body["results"]) == (200, [{"id": "p07"}]), body
    mgr.drop_primary_index(BUCKET)
    cluster.close()


# ------------------------------------------------------------------ the property test

FIELDS = ("n", "s")


def model_value(doc: dict, field: str):
    return doc.get(field, MISSING)


class _Missing:
    def __repr__(self):
        return "MISSING"


MISSING = _Missing()


def random_doc(rng: random.Random) -> dict:
    d = {"g": rng.randrange(3)}
    if rng.random() < 0.85:
        d["n"] = rng.randrange(-20, 20)
    if rng.random() < 0.85:
        d["s"] = rng.choice(["apple", "apricot", "banana", "blueberry", "cherry", "date"])
    return d


def random_predicate(rng: random.Random, depth: int = 0):
    """(SQL++ text, model function doc -> True/False/None). None is MISSING/NULL."""
    if depth < 2 and rng.random() < 0.35:
        op = rng.choice(["AND", "OR", "NOT"])
        if op == "NOT":
            text, f = random_predicate(rng, depth + 1)
            return f"NOT ({text})", lambda d, f=f: None if f(d) is None else not f(d)
        (lt, lf), (rt, rf) = random_predicate(rng, depth + 1), random_predicate(rng, depth + 1)
        if op == "AND":
            def g(d, lf=lf, rf=rf):
                a, b = lf(d), rf(d)
                if a is False or b is False:
                    return False
                return None if a is None or b is None else True
        else:
            def g(d, lf=lf, rf=rf):
                a, b = lf(d), rf(d)
                if a is True or b is True:
                    return True
                return None if a is None or b is None else False
        return f"({lt}) {op} ({rt})", g
    field = rng.choice(FIELDS)
    if field == "n":
        c = rng.randrange(-20, 20)
        form = rng.choice(["=", "<", ">=", "between", "in", "missing", "valued"])
        if form == "between":
            hi = c + rng.randrange(0, 10)
            return f"n BETWEEN {c} AND {hi}", lambda d: None if "n" not in d else c <= d["n"] <= hi
        if form == "in":
            vals = sorted({rng.randrange(-20, 20) for _ in range(3)})
            return f"n IN {vals}", lambda d: None if "n" not in d else d["n"] in vals
        if form == "missing":
            return "n IS MISSING", lambda d: "n" not in d
        if form == "valued":
            return "n IS VALUED", lambda d: "n" in d
        ops = {"=": lambda a, b: a == b, "<": lambda a, b: a < b, ">=": lambda a, b: a >= b}
        return f"n {form} {c}", lambda d: None if "n" not in d else ops[form](d["n"], c)
    c = rng.choice(["a", "ap", "b", "banana", "c", "d", "z"])
    form = rng.choice(["=", ">", "like"])
    if form == "like":
        return f"s LIKE '{c}%'", lambda d: None if "s" not in d else d["s"].startswith(c)
    ops = {"=": lambda a, b: a == b, ">": lambda a, b: a > b}
    return f"s {form} '{c}'", lambda d: None if "s" not in d else ops[form](d["s"], c)


def random_writes(rng: random.Random, coll, model: dict, expiring: dict, writes: int,
                  keys: int) -> None:
    """`writes` random upserts, deletes and upserts that expire in 1 s, over keys k0..k<keys>,
    applied to `model` too (`expiring`: key -> when it expires)."""
    for _ in range(writes):
        key = f"k{rng.randrange(keys)}"
        r = rng.random()
        if r < 0.15:
            if key in model:
                try:
                    coll.remove(key)
                except DocumentNotFoundException:
                    assert key in expiring, key  # only one written to expire may be gone
                model.pop(key)
                expiring.pop(key, None)
        elif r < 0.22:
            doc = random_doc(rng)
            coll.upsert(key, doc, UpsertOptions(expiry=timedelta(seconds=1)))
            model[key] = doc
            expiring[key] = time.time() + 1
        else:
            doc = random_doc(rng)
            coll.upsert(key, doc)
            model[key] = doc
            expiring.pop(key, None)


def drop_expired(model: dict, expiring: dict) -> None:
    """Waits until what expired is gone (fetched or paged away), and drops it from `model`."""
    time.sleep(2.2)
    for k in [k for k, t in expiring.items() if t < time.time() - 0.5]:
        model.pop(k, None)
        expiring.pop(k)


# What a random query reads: (projection, model of one result row). The first two can be
# covered by by_n / by_s_n (n and s are their keys); g is in no index the planner can use
# here, so the last fetches every document.
PROJECTIONS = [
    ("RAW META().id", lambda k, d: k),
    ("META().id AS id, n, s",
     lambda k, d: {"id": k, **{f: d[f] for f in ("n", "s") if f in d}}),
    ("META().id AS id, g", lambda k, d: {"id": k, "g": d["g"]}),
]


def is_covered(cluster: Cluster, statement: str) -> bool:
    """Whether EXPLAIN shows the statement's scan covering it (and, then, no Fetch)."""
    plan = rows(cluster, f"EXPLAIN {statement}")[0]["plan"]["~children"]
    ops = [op["#operator"] for op in plan]
    covered = "covers" in plan[0]
    assert covered != ("Fetch" in ops), plan
    return covered


def check_random_queries(cluster: Cluster, rng: random.Random, model: dict, expiring: dict,
                         where: str, kinds: dict = None, n: int = 8) -> set:
    """`n` random REQUEST_PLUS queries, each answered as the model says. Documents written
    to expire and not yet gone are uncertain: the checks ask only about the others, which
    are returned. `kinds` counts covered and fetching statements."""
    uncertain = set(expiring)
    kinds = {"covered": 0, "fetched": 0} if kinds is None else kinds
    for _ in range(n):
        text, pred = random_predicate(rng)
        projection, result = rng.choice(PROJECTIONS)
        statement = f"SELECT {projection} FROM default WHERE {text}"
        kinds["covered" if is_covered(cluster, statement) else "fetched"] += 1
        key_of = (lambda r: r) if projection.startswith("RAW") else (lambda r: r["id"])
        got = sorted((r for r in rows(cluster, statement) if key_of(r) not in uncertain),
                     key=key_of)
        want = [result(k, d) for k, d in sorted(model.items())
                if pred(d) is True and k not in uncertain]
        assert got == want, f"{where}: {statement}\n" \
                            f"got {got[:10]}\nwant {want[:10]}"
    return uncertain


def test_random_queries_match_a_model_with_writes_deletes_and_expirations(any_node):
    node = any_node
    seed = int(os.environ.get("QUERY_SEED", random.randrange(1 << 30)))
    print(f"QUERY_SEED={seed}")
    rng = random.Random(seed)
    cluster = connect(node)
    coll = cluster.bucket(BUCKET).default_collection()
    mgr = cluster.query_indexes()
    mgr.create_primary_index(BUCKET)
    mgr.create_index(BUCKET, "by_n", ["n"])
    mgr.create_index(BUCKET, "by_s_n", ["s", "n"])
    mgr.create_index(BUCKET, "by_g_partial", ["g"], CreateQueryIndexOptions(condition="n > 0"))
    model = {}
    expiring = {}
    kinds = {"covered": 0, "fetched": 0}
    for round_ in range(12):
        random_writes(rng, coll, model, expiring, writes=60, keys=150)
        if round_ % 4 == 3:
            drop_expired(model, expiring)
        uncertain = check_random_queries(cluster, rng, model, expiring, f"QUERY_SEED={seed} "
                                         f"round {round_}", kinds)
        # A grouped query over the partial index's keyspace slice.
        got = rows(cluster, "SELECT g, COUNT(*) AS c FROM default WHERE n > 0 AND g IS VALUED "
                            "GROUP BY g ORDER BY g")
        if not uncertain:
            want = {}
            for d in model.values():
                if d.get("n", -1) > 0:
                    want[d["g"]] = want.get(d["g"], 0) + 1
            assert got == [{"g": g, "c": want[g]} for g in sorted(want)], f"QUERY_SEED={seed}"
    print(f"statements: {kinds}")
    assert kinds["covered"] > 0 and kinds["fetched"] > 0, f"QUERY_SEED={seed} {kinds}"
    cluster.close()


# ------------------------------------------------------------------ restart and rollback

def test_kill9_restart_resumes_from_saved_positions(node):
    cluster = connect(node)
    coll = cluster.bucket(BUCKET).default_collection()
    cluster.query_indexes().create_index(BUCKET, "by_v", ["v"])
    for i in range(300):
        coll.upsert(f"d{i}", {"v": i % 17})
    assert len(rows(cluster, "SELECT RAW META().id FROM default WHERE v = 3")) == \
        len([i for i in range(300) if i % 17 == 3])
    wait_persisted(node, 20)  # so nothing is lost to the kill: no vbucket rolls back
    cluster.close()
    node.kill9()
    node.start()
    # The feeders start once the node serves: wait for the line.
    pattern = r"index feeder starts index=by_v .*resumed_vbuckets=(\d+) from_zero=(\d+)"
    deadline = time.time() + 20
    while not (m := re.search(pattern, node.log_path.read_text())):
        assert time.time() < deadline, node.log_path.read_text()[-3000:]
        time.sleep(0.1)
    resumed, from_zero = int(m.group(1)), int(m.group(2))
    # Every vbucket that held a document resumes; only empty ones start from zero.
    holding = {(zlib.crc32(f"d{i}".encode()) >> 16 & 0x7FFF) % VBUCKETS for i in range(300)}
    assert resumed >= len(holding) and resumed + from_zero == VBUCKETS, (resumed, from_zero)
    stats = index_stats(node)
    assert int(stats["index_resumed_vbuckets"]) >= len(holding), stats
    assert int(stats["index_rebuilt_vbuckets"]) == 0, stats
    cluster = connect(node)
    coll = cluster.bucket(BUCKET).default_collection()
    coll.upsert("d0", {"v": 100})
    assert rows(cluster, "SELECT RAW META().id FROM default WHERE v = 100") == ["d0"]
    assert len(rows(cluster, "SELECT RAW META().id FROM default WHERE v = 3")) == \
        len([i for i in range(300) if i % 17 == 3])
    assert int(index_stats(node)["index:by_v:items_remaining"]) == 0
    cluster.close()


def test_a_lost_tail_rolls_back_only_the_vbuckets_that_lost_it(sluice_factory):
    # A long flush interval keeps the second batch of writes in memory only.
    srv = sluice_factory(vbuckets=VBUCKETS, memcached=False,
                         extra_args=("--flush-interval-ms", "30000"))
    cluster = connect(srv)
    coll = cluster.bucket(BUCKET).default_collection()
    cluster.query_indexes().create_index(BUCKET, "by_v", ["v"])
    kept = [f"kept{i}" for i in range(40)]
    for k in kept:
        coll.upsert(k, {"v": 1})
    # Wait until a commit has persisted the first batch (at most one interval away); the
    # next commit is then an interval away, time enough to lose the second batch.
    wait_persisted(srv, 45)
    c = mcbin.Conn(srv.kv_port)
    c.auth_plain(USERNAME, PASSWORD)
    c.select_bucket(BUCKET)
    lost = ["lost1", "lost2", "lost3"]
    for k in lost:
        coll.upsert(k, {"v": 1})
    assert len(rows(cluster, "SELECT RAW META().id FROM default WHERE v = 1")) == len(kept) + 3
    # Shown: the lost writes are in memory only (their vbuckets' persisted seqno lags).
    seqnos = c.stat("vbucket-seqno")
    lost_vbs = {(zlib.crc32(k.encode()) >> 16 & 0x7FFF) % VBUCKETS for k in lost}
    for vb in lost_vbs:
        assert seqnos[f"vb_{vb}:last_persisted_seqno"] != seqnos[f"vb_{vb}:high_seqno"], vb
    c.close()
    cluster.close()
    srv.kill9()
    srv.extra_args = ()
    srv.start()
    cluster = connect(srv)
    coll = cluster.bucket(BUCKET).default_collection()
    assert not any(coll.exists(k).exists for k in lost), "the tail was lost"
    got = sorted(rows(cluster, "SELECT RAW META().id FROM default WHERE v = 1"))
    assert got == sorted(kept)
    stats = index_stats(srv)
    rebuilt = int(stats["index_rebuilt_vbuckets"])
    assert 1 <= rebuilt <= len(lost_vbs), stats
    log = srv.log_path.read_text()
    rolled = {int(v) for v in re.findall(r"index vbucket rolled back.* vb=(\d+)", log)}
    assert rolled and rolled <= lost_vbs, (rolled, lost_vbs)
    cluster.close()
