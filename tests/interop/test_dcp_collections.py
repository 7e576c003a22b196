"""Collection-aware DCP with a client written by others: gocbcore v10.8.1's DCP agent
(``dcp_gocbcore/bin/dcpstream --collections --filter-collection ID``) streams one collection
of a bucket that holds three (a filtered stream), across a server restart, and sees the
collection's creation and its drop in every vbucket.

Checked from the events file: every document event is of the filtered collection and the
keys are exactly its documents; each vbucket announces the collection's creation once and
its drop once, after every document of it, with the manifest uids and ids the REST API
gave; no other collection's or scope's event arrives; no (vb, seqno) twice; the resumed run
starts where the first stopped, without a rollback.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Dict, List

import pytest

from admin_http import basic
from conftest import BUCKET, PASSWORD, USERNAME
from mcbin import kv_connect
from sdk_node import connect
from test_dcp_gocbcore import Client, all_vb_seqnos, expect_ok

VBUCKETS = 64
DOCS = 300


def rest(srv, method: str, path: str, form: Dict[str, str] | None = None) -> dict:
    data = None if form is None else urllib.parse.urlencode(form).encode()
    req = urllib.request.Request(f"{srv.admin_url}{path}", data=data, method=method,
                                 headers={"authorization": basic(),
                                          "content-type": "application/x-www-form-urlencoded"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"{}")


def scopes_when_listed(srv) -> str:
    """The bucket's scopes path, once the admin port lists the bucket (a node answers its
    admin port before the cluster metadata lists its bucket)."""
    base = f"/pools/default/buckets/{BUCKET}/scopes"
    deadline = time.monotonic() + 30
    while True:
        try:
            rest(srv, "GET", base)
            return base
        except urllib.error.HTTPError:
            assert time.monotonic() < deadline, "the bucket never appeared on the admin port"
            time.sleep(0.1)


def ids(manifest: dict) -> Dict[str, int]:
    """`scope.collection` → id, and `scope` → id, from a manifest's JSON."""
    out = {}
    for s in manifest["scopes"]:
        out[s["name"]] = int(s["uid"], 16)
        for c in s["collections"]:
            out[f"{s['name']}.{c['name']}"] = int(c["uid"], 16)
    return out


def events(client: Client) -> List[dict]:
    return [json.loads(line) for line in client.events_path.read_text().splitlines() if line]


@pytest.mark.timeout(400)
def test_gocbcore_streams_one_collection_across_a_restart_and_sees_it_made_and_dropped(
        sluice_factory, tmp_path):
    srv = sluice_factory(bucket_type="couchbase", vbuckets=VBUCKETS, memory_quota_mb=256)
    base = scopes_when_listed(srv)
    rest(srv, "POST", base, {"name": "inventory"})
    rest(srv, "POST", f"{base}/inventory/collections", {"name": "airline"})
    made = rest(srv, "POST", f"{base}/inventory/collections", {"name": "hotel"})
    manifest = rest(srv, "GET", base)
    known = ids(manifest)
    airline, hotel, scope = known["inventory.airline"], known["inventory.hotel"], known["inventory"]
    assert int(made["uid"], 16) == int(manifest["uid"], 16)
    uid_made_airline = int(manifest["uid"], 16) - 1

    cluster = connect(srv.connstr)
    try:
        b = cluster.bucket(BUCKET)
        a_col = b.scope("inventory").collection("airline")
        h_col = b.scope("inventory").collection("hotel")
        for i in range(DOCS):
            a_col.upsert(f"k{i}", {"in": "airline", "i": i})
            h_col.upsert(f"k{i}", {"in": "hotel", "i": i})
            b.default_collection().upsert(f"k{i}", {"in": "default"})
        for i in range(0, DOCS, 10):
            a_col.remove(f"k{i}")
    finally:
        cluster.close()
    with kv_connect(srv.kv_port, USERNAME, PASSWORD) as conn:
        targets = all_vb_seqnos(conn)

    flags = ["--collections", "--filter-collection", str(airline)]
    client = Client(tmp_path / "client", srv.kv_port)
    r1 = client.run(stop_after=DOCS // 2, until=targets, timeout_s=120, extra=flags)
    expect_ok(r1, "first run")
    srv.restart()
    r2 = client.run(until=targets, timeout_s=120, extra=flags)
    expect_ok(r2, "resumed run after the restart")

    # The drop: one more record per vbucket, streamed by a third run started before it.
    after_drop = {vb: s + 1 for vb, s in targets.items()}
    opened_before = sum(1 for e in events(client) if e["type"] == "open")
    p3 = client.start(until=after_drop, timeout_s=120, extra=flags)
    deadline = time.monotonic() + 60
    while sum(1 for e in events(client) if e["type"] == "open") < opened_before + VBUCKETS:
        assert p3.poll() is None and time.monotonic() < deadline, "the third run's streams"
        time.sleep(0.1)
    dropped = rest(srv, "DELETE", f"{base}/inventory/collections/airline")
    r3 = client.finish(p3, 180)
    expect_ok(r3, "run across the drop")
    with kv_connect(srv.kv_port, USERNAME, PASSWORD) as conn:
        assert all_vb_seqnos(conn) == after_drop, "the drop wrote one record per vbucket"

    evs = events(client)
    problems: List[str] = []
    seen = set()
    last_doc: Dict[str, str] = {}
    made_in: Dict[int, int] = defaultdict(int)
    dropped_in: Dict[int, int] = defaultdict(int)
    last_doc_seqno: Dict[int, int] = {}
    for e in evs:
        t = e["type"]
        if t in ("mutation", "deletion", "expiration", "create_collection", "delete_collection",
                 "create_scope", "delete_scope"):
            at = (e["vb"], e["seqno"])
            if at in seen:
                problems.append(f"{at} received twice")
            seen.add(at)
        if t in ("mutation", "deletion"):
            if e.get("collection") != airline:
                problems.append(f"{t} of collection {e.get('collection')}: {e}")
            last_doc[e["key"]] = t
            last_doc_seqno[e["vb"]] = max(last_doc_seqno.get(e["vb"], 0), e["seqno"])
        elif t == "create_collection":
            if (e["collection_id"], e["scope_id"], e["name"]) != (airline, scope, "airline"):
                problems.append(f"create of another collection: {e}")
            if e["manifest_uid"] != uid_made_airline:
                problems.append(f"create with manifest uid {e['manifest_uid']}: {e}")
            made_in[e["vb"]] += 1
        elif t == "delete_collection":
            if (e["collection_id"], e["scope_id"]) != (airline, scope):
                problems.append(f"drop of another collection: {e}")
            if e["manifest_uid"] != int(dropped["uid"], 16):
                problems.append(f"drop with manifest uid {e['manifest_uid']}: {e}")
            if e["seqno"] <= last_doc_seqno.get(e["vb"], 0):
                problems.append(f"drop before the collection's last document: {e}")
            dropped_in[e["vb"]] += 1
        elif t in ("create_scope", "delete_scope", "rollback"):
            problems.append(f"unexpected {t}: {e}")
    want = {f"k{i}": ("deletion" if i % 10 == 0 else "mutation") for i in range(DOCS)}
    if last_doc != want:
        missing = sorted(set(want) - set(last_doc))[:5]
        wrong = sorted(k for k in want if k in last_doc and last_doc[k] != want[k])[:5]
        problems.append(f"airline's documents differ: missing {missing}, wrong {wrong}")
    if dict(made_in) != {vb: 1 for vb in range(VBUCKETS)}:
        problems.append(f"creation events per vbucket: {dict(made_in)}")
    if dict(dropped_in) != {vb: 1 for vb in range(VBUCKETS)}:
        problems.append(f"drop events per vbucket: {dict(dropped_in)}")
    starts = [e for e in evs if e["type"] == "start"]
    if [s["resumed"] for s in starts] != [False, True, True]:
        problems.append(f"runs: {starts}")
    assert not problems, "\n".join(problems[:20])
