"""Partition: three `sluice server` processes (one replica, auto-failover after 2 s), each on
its own loopback address behind a fault-injecting proxy (fault_proxy.py). Node 2 is cut off
from the other two, not from clients.

* The majority side carries on: its leader fails node 2 over, and the SDK keeps writing at
  durability majority through nodes 0 and 1; every write it saw acknowledged is read back.
* The minority node does not acknowledge durable writes: writes sent straight to node 2 for
  vbuckets it still believes it owns (its replicas cannot reach it) all end ambiguous or
  refused, never SUCCESS. Within the fencing bound it refuses plain writes and reads on them
  too (NOT_MY_VBUCKET), before the majority fails it over.
"""

from __future__ import annotations

import struct
import subprocess
import time
import urllib.error
from pathlib import Path

import pytest

import mcbin
from conftest import PASSWORD, USERNAME, sluice_binary
from fault_proxy import FaultProxy
from nemesis import http, node_ip, proxy_ip
from test_cluster_faults import SdkWriter, read_back, wait_failed_over
from test_cluster_up import collection, free_base
from test_dcp_gocbcore import fail_if

NODES = 3
VBS = 64


def start_node(tmp: Path, i: int, base: int) -> subprocess.Popen:
    d = tmp / f"node-{i}"
    d.mkdir()
    args = [str(sluice_binary()), "server", "--data-dir", str(d),
            "--bind", node_ip(i), "--advertise-host", proxy_ip(i), "--source-ip", node_ip(i),
            "--kv-port", str(base + 10 * i), "--admin-port", str(base + 10 * i + 1),
            "--replicas", "1", "--vbuckets", str(VBS), "--memory-quota-mb", "128",
            "--auto-failover-timeout", "2"]
    if i > 0:
        args += ["--join", f"{proxy_ip(0)}:{base + 1}"]
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=open(d / "server.log", "w"))
    deadline = time.monotonic() + 60
    while True:
        assert p.poll() is None, f"node {i} exited: {(d / 'server.log').read_text()[-3000:]}"
        try:
            http(proxy_ip(i), base + 10 * i + 1, "/health")
            return p
        except OSError:
            assert time.monotonic() < deadline, f"node {i} did not come up"
            time.sleep(0.2)


def durable_set(conn: mcbin.Conn, key: bytes, vb: int) -> int:
    """SET at durability majority (1.5 s), straight to this node; the status."""
    framing = mcbin.frame_info(1, bytes([1]) + struct.pack(">H", 1500))
    r = conn.call(mcbin.OP_SET, key, b'{"p":1}', mcbin.set_extras(), vb=vb,
                  magic=mcbin.ALT_REQ, framing=framing)
    return r.status


@pytest.mark.timeout(300)
def test_partitioned_node_is_failed_over_and_never_acknowledges_durable_writes(tmp_path):
    base = free_base()
    ports = [(base + 10 * i, base + 10 * i + 1) for i in range(NODES)]
    proxies = [FaultProxy([(proxy_ip(i), p) for p in ports[i]], node_ip(i))
               for i in range(NODES)]
    procs = []
    try:
        for i in range(NODES):
            procs.append(start_node(tmp_path, i, base))
        deadline = time.monotonic() + 60
        while True:
            try:
                http(proxy_ip(0), base + 1, "/api/v1/cluster/place", {"nodes": NODES})
                break
            except urllib.error.HTTPError as e:
                assert e.code == 409 and time.monotonic() < deadline, e.read()
                time.sleep(0.2)
        cluster, col = collection(base, host=proxy_ip(0))
        writer = SdkWriter(col, "p", durable=True)
        writer.start()
        writer.wait_acked(200)

        # Vbuckets node 2 owns (its own map, which it keeps while cut off).
        raw = http(proxy_ip(2), base + 21, "/pools/default/b/default")["vBucketServerMap"]
        me = raw["serverList"].index(f"{proxy_ip(2)}:{base + 20}")
        owned = [vb for vb, chain in enumerate(raw["vBucketMap"]) if chain[0] == me]
        assert owned

        # Cut node 2 off from its peers (both ways), not from clients.
        proxies[2].block({node_ip(0), node_ip(1)})
        proxies[0].block({node_ip(2)})
        proxies[1].block({node_ip(2)})

        # The minority acknowledges no durable write.
        conn = mcbin.Conn(ports[2][0], host=proxy_ip(2), timeout=10)
        conn.hello([mcbin.FEATURE_MUTATION_SEQNO, 0x10, 0x11])
        assert conn.auth_plain(USERNAME, PASSWORD).status == mcbin.SUCCESS
        assert conn.select_bucket("default").status == mcbin.SUCCESS
        statuses = {}
        for n, vb in enumerate(owned[:8]):
            key = next(f"m{n}-{j}".encode() for j in range(100000)
                       if mcbin.vbucket_of(f"m{n}-{j}".encode(), VBS) == vb)
            statuses[key] = durable_set(conn, key, vb)
        assert mcbin.SUCCESS not in statuses.values(), statuses
        # Fencing: within its bound (1.5 s) the cut-off node refuses even plain writes and
        # reads on the vbuckets it believes it owns, so nothing is written there that the
        # majority's promoted copies never see.
        key = next(f"f-{j}".encode() for j in range(100000)
                   if mcbin.vbucket_of(f"f-{j}".encode(), VBS) == owned[0])
        deadline = time.monotonic() + 10
        while True:
            r = conn.call(mcbin.OP_SET, key, b'{"f":1}', mcbin.set_extras(), vb=owned[0])
            if r.status == mcbin.NOT_MY_VBUCKET:
                break
            assert time.monotonic() < deadline, f"never fenced: SET answered {r.status:#x}"
            time.sleep(0.05)
        r = conn.call(mcbin.OP_GET, key, vb=owned[0])
        assert r.status == mcbin.NOT_MY_VBUCKET, f"a fenced node's GET answered {r.status:#x}"
        conn.close()

        # The majority fails node 2 over and carries on.
        view = wait_failed_over(base + 1, 2, host=proxy_ip(0))
        assert view["map_nodes"] == [0, 1], view
        acked = len(writer.acked)
        writer.wait_acked(acked + 100)
        writer.finish()
        time.sleep(3)  # the SDK's config poll: no read goes to the cut-off node's old map
        fail_if(read_back(col, writer.acked), "acknowledged durable writes after the partition")
        print(f"partition: minority statuses {sorted(set(statuses.values()))}; majority "
              f"{len(writer.acked)} durable writes acknowledged; errors {dict(writer.errors)}")
        cluster.close()
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        for px in proxies:
            px.close()

