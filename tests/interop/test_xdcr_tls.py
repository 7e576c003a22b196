"""XDCR over TLS (issue 28; the door): a remote cluster reference that carries the target's
CA certificate (`demandEncryption=1`, Couchbase's full encryption) is reached over TLS only.
Its REST goes to the target's TLS admin port, and the pipelines write over the KV TLS ports
that the target's map names (`kvSSL`), verifying every certificate against that CA.

Both clusters are made by `sluice cluster up`, and each has its own CA (`DIR/tls/ca.pem`).
That gives real negative cases. A reference that trusts the wrong CA is refused, and so is
one whose hostname is the cleartext port. Once the replication has copied the documents,
the source node's sockets (`ss -tnp`) show where the pipeline's traffic went: connections to
every target node's TLS KV port, and none to a cleartext KV port.
"""

from __future__ import annotations

import re
import subprocess
import time

import pytest

from conftest import HOST, PASSWORD, USERNAME
from xdcr_helpers import (active_items, connect, eventually, http, start_replication_at,
                          two_clusters)

pytestmark = pytest.mark.timeout(300)

DOCS = 400


def peers_of(pid: int) -> list[int]:
    """The remote ports of the established TCP connections of process `pid`."""
    out = subprocess.run(["ss", "-Htnp", "state", "established"], capture_output=True,
                         text=True, timeout=10, check=True).stdout
    ports = []
    for line in out.splitlines():
        if f"pid={pid}," not in line:
            continue
        addrs = [t for t in line.split() if re.fullmatch(r"[\d.\[\]:a-f]+:\d+", t)]
        if len(addrs) >= 2:
            ports.append(int(addrs[1].rsplit(":", 1)[1]))
    return ports


def remote_form(name: str, hostname: str, **extra: str) -> dict:
    return {"name": name, "hostname": hostname, "username": USERNAME,
            "password": PASSWORD, **extra}


def test_a_reference_with_a_ca_replicates_over_tls_only(tmp_path):
    with two_clusters(tmp_path, b_nodes=2, b_replicas=1) as (a, b):
        run_over_tls(a, b)


def run_over_tls(a, b):
    info_a, info_b = a.info(), b.info()
    ca_a = open(info_a["ca"]).read()
    ca_b = open(info_b["ca"]).read()
    assert ca_a != ca_b, "each cluster made its own CA"
    b_nodes = info_b["nodes"]
    tls_admin = f"{HOST}:{b_nodes[0]['admin_tls_port']}"
    plain_admin = f"{HOST}:{b_nodes[0]['admin_port']}"
    remotes = f"{a.url}/pools/default/remoteClusters"

    # Refused before anything is stored, each with the field at fault.
    cases = [
        (remote_form("x", tls_admin, demandEncryption="1"), "certificate"),
        (remote_form("x", tls_admin, certificate=ca_b), "demandEncryption"),
        (remote_form("x", tls_admin, secureType="half", certificate=ca_b), "secureType"),
        (remote_form("x", tls_admin, demandEncryption="1", certificate="not a PEM"),
         "certificate"),
    ]
    for form, field in cases:
        r = http("POST", remotes, form)
        assert r.status == 400 and field in (r.body or {}).get("errors", {}), (form, r)
    # The wrong CA: the target's certificate does not chain to it.
    r = http("POST", remotes, remote_form("x", tls_admin, demandEncryption="1",
                                          certificate=ca_a))
    assert r.status == 400 and "cannot reach" in r.text, r
    # The right CA, but the cleartext admin port: no TLS handshake there.
    r = http("POST", remotes, remote_form("x", plain_admin, demandEncryption="1",
                                          certificate=ca_b))
    assert r.status == 400 and "cannot reach" in r.text, r
    assert http("GET", remotes).body == [], "nothing was stored"

    # The right CA and the TLS admin port.
    r = http("POST", remotes, remote_form("b-tls", tls_admin, demandEncryption="1",
                                          certificate=ca_b))
    assert r.status == 200, r
    ref = r.body
    assert ref["demandEncryption"] is True and ref["secureType"] == "full", ref
    assert ref["hostname"] == tls_admin, ref
    assert ca_b not in r.text and PASSWORD not in r.text, "neither echoed"
    listed = http("GET", remotes).body
    assert [x["secureType"] for x in listed] == ["full"], listed

    rid = start_replication_at(a.url, "default", ref, "default")
    col_a = connect(a.connstr, USERNAME, PASSWORD).bucket("default").default_collection()
    for i in range(DOCS):
        col_a.upsert(f"tls-{i}", {"n": i, "pad": "x" * 200})
    b_kv = [n["kv_port"] for n in b_nodes]
    eventually(f"B holds the {DOCS} documents",
               lambda: active_items(b_kv, USERNAME, PASSWORD, "default") >= DOCS,
               diag=lambda: a.log_tail() + b.log_tail())
    col_b = connect(b.connstr, USERNAME, PASSWORD).bucket("default").default_collection()
    for i in (0, DOCS // 2, DOCS - 1):
        assert col_b.get(f"tls-{i}").content_as[dict] == {"n": i, "pad": "x" * 200}

    # Where the pipeline's connections go: every target node's TLS KV port, no cleartext
    # KV or admin port of the target.
    tls_kv = {n["kv_tls_port"] for n in b_nodes}
    plain = {n["kv_port"] for n in b_nodes} | {n["admin_port"] for n in b_nodes}
    pid = a.pid(0)
    deadline = time.monotonic() + 10
    while True:
        peers = set(peers_of(pid))
        if tls_kv <= peers or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    print(f"source node {pid}: peers {sorted(peers)}; target TLS KV {sorted(tls_kv)}, "
          f"cleartext {sorted(plain)}")
    assert tls_kv <= peers, f"source node {pid} peers {sorted(peers)}, TLS KV {tls_kv}"
    assert not peers & plain, f"cleartext connections to the target: {peers & plain}"
    task = next(t for t in http("GET", f"{a.url}/pools/default/tasks").body
                if t.get("type") == "xdcr")
    assert task["id"] == rid and task.get("errors") in (None, []), task
