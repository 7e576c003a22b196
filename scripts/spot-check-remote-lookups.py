#!/usr/bin/env python3
"""Spot check: a point lookup through an index copy on the queried node against one on
another node (issue 26's placement), on a 3-node `sluice cluster up` (its defaults:
cluster encryption `control`, so the nodes call each other over TLS).

One index `by_a` (no replica: one copy, on node 0 by placement) over 2,000 documents. One
client at a time sends `SELECT META().id FROM default WHERE a = $v` (not_bounded, random v)
over a kept-alive HTTP connection, alternately to node 0 (holder) and node 1 (no copy: it
scans node 0's), 1,000 lookups per run after 100 of warm-up, 3 runs each. Prints each
run's p50 / p99 and their medians. Uses target/release/sluice.

    python3 scripts/spot-check-remote-lookups.py
"""
import base64
import http.client
import json
import pathlib
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "interop"))
from test_cluster_up import free_base, stop, wait_up  # noqa: E402
from test_python_query_cluster import cluster_up, connect  # noqa: E402

AUTH = "Basic " + base64.b64encode(b"Administrator:password").decode()
LOOKUP = "SELECT META().id FROM default WHERE a = $v"


def query(conn, body):
    conn.request("POST", "/query/service", json.dumps(body),
                 {"Authorization": AUTH, "Content-Type": "application/json"})
    r = conn.getresponse()
    answer = json.loads(r.read())
    assert r.status == 200, answer
    return answer["results"]


def run(conn, n):
    took = []
    for _ in range(n):
        t = time.perf_counter()
        rows = query(conn, {"statement": LOOKUP, "$v": random.randrange(2000)})
        took.append(time.perf_counter() - t)
        assert len(rows) == 1, rows
    took.sort()
    return took[len(took) // 2], took[int(len(took) * 0.99)]


def main():
    data = pathlib.Path(tempfile.mkdtemp())
    base = free_base()
    proc = cluster_up(data, base, 1)
    try:
        wait_up(proc, data)
        cluster = connect(base)
        cluster.bucket("default").default_collection().upsert_multi(
            {f"k{i}": {"a": i} for i in range(2000)})
        node0 = http.client.HTTPConnection("127.0.0.1", base + 1)
        query(node0, {"statement": "CREATE INDEX by_a ON default(a)"})
        conns = {"holder (node 0)": node0,
                 "no copy (node 1)": http.client.HTTPConnection("127.0.0.1", base + 11)}
        results = {name: [] for name in conns}
        for _ in range(3):
            for name, conn in conns.items():
                run(conn, 100)
                p50, p99 = run(conn, 1000)
                results[name].append((p50, p99))
                print(f"{name}: p50 {p50 * 1e3:.3f} ms, p99 {p99 * 1e3:.3f} ms")
        for name, runs in results.items():
            print(f"median {name}: p50 {statistics.median(r[0] for r in runs) * 1e3:.3f} ms, "
                  f"p99 {statistics.median(r[1] for r in runs) * 1e3:.3f} ms")
        cluster.close()
    finally:
        stop(proc)


if __name__ == "__main__":
    main()
