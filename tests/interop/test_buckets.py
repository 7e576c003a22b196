"""Many buckets on one cluster (issue 24): the Python SDK's bucket manager creates a second
bucket on a three-node `sluice cluster up`, with its own quota and replica count, and edits
its quota; the SDK writes to both; each bucket's DCP streams carry only its own documents; deleting one leaves
the other intact, its files gone from every node."""

from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Dict, List, Set

import pytest
from couchbase.auth import PasswordAuthenticator
from couchbase.cluster import Cluster
from couchbase.durability import DurabilityLevel
from couchbase.exceptions import (BucketAlreadyExistsException, BucketNotFoundException,
                                  CouchbaseException, DocumentNotFoundException)
from couchbase.management.buckets import BucketSettings, BucketType, CreateBucketSettings
from couchbase.options import ClusterOptions

import mcbin
from conftest import HOST, PASSWORD, USERNAME
from mcbin import HEADER_LEN, SUCCESS, kv_connect
from test_cluster_up import NODES, cluster_up, free_base, stop, wait_up

DOCS = 200
OP_DCP_OPEN = 0x50
OP_DCP_STREAM_REQ = 0x53
OP_DCP_STREAM_END = 0x55
OP_DCP_MUTATION = 0x57


def kv_port(base: int, i: int) -> int:
    return base + 10 * i


def read_packet(conn: mcbin.Conn):
    """(magic, opcode, status or vbucket, key, value) of the next packet, request or
    response (a DCP producer sends both)."""
    while len(conn.buf) < HEADER_LEN:
        conn._fill()
    magic, op, klen, elen, _dt, vb_or_status, blen, _opaque, _cas = struct.unpack(
        ">BBHBBHIIQ", bytes(conn.buf[:HEADER_LEN]))
    assert magic in (0x80, 0x81), f"unexpected magic 0x{magic:02x}"
    while len(conn.buf) < HEADER_LEN + blen:
        conn._fill()
    body = bytes(conn.buf[HEADER_LEN:HEADER_LEN + blen])
    del conn.buf[:HEADER_LEN + blen]
    return magic, op, vb_or_status, body[elen:elen + klen], body[elen + klen:]


def streamed_keys(port: int, bucket: str) -> Set[str]:
    """Every key the node's DCP producer streams for `bucket`: each active vbucket from 0
    to its high seqno."""
    with kv_connect(port, USERNAME, PASSWORD, bucket=bucket) as c:
        r = c.call(mcbin.OP_GET_ALL_VB_SEQNOS, extras=struct.pack(">I", 1))
        assert r.status == SUCCESS, r
        highs = dict(struct.unpack(">HQ", r.value[i:i + 10]) for i in range(0, len(r.value), 10))
        r = c.call(OP_DCP_OPEN, key=f"buckets-test:{bucket}".encode(),
                   extras=struct.pack(">II", 0, 1))
        assert r.status == SUCCESS, r
        wanted = {vb: high for vb, high in highs.items() if high > 0}
        for vb, high in wanted.items():
            extras = struct.pack(">IIQQQQQ", 0, 0, 0, high, 0, 0, 0)
            c.send(mcbin.encode(OP_DCP_STREAM_REQ, extras=extras, vb=vb))
        keys: Set[str] = set()
        ended = 0
        while ended < len(wanted):
            magic, op, status, key, _ = read_packet(c)
            if magic == 0x81:
                assert op == OP_DCP_STREAM_REQ and status == SUCCESS, (op, status)
            elif op == OP_DCP_MUTATION:
                keys.add(key.decode())
            elif op == OP_DCP_STREAM_END:
                ended += 1
        return keys


def all_streamed(base: int, bucket: str, nodes=range(NODES)) -> Set[str]:
    keys: Set[str] = set()
    for i in nodes:
        keys |= streamed_keys(kv_port(base, i), bucket)
    return keys


def stat(port: int, bucket: str, group: str = "") -> Dict[str, str]:
    with kv_connect(port, USERNAME, PASSWORD, bucket=bucket) as c:
        return c.stat(group)


def eventually(what: str, check, timeout_s: float = 20.0):
    deadline = time.time() + timeout_s
    while True:
        try:
            got = check()
            if got:
                return got
        except (CouchbaseException, mcbin.ProtocolError, OSError):
            pass
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.timeout(300)
def test_two_buckets_with_their_own_quota_replicas_and_streams(tmp_path):
    base = free_base()
    proc = cluster_up(tmp_path, base)
    try:
        info = wait_up(proc, tmp_path)
        cluster = Cluster(f"couchbase://{HOST}:{base}",
                          ClusterOptions(PasswordAuthenticator(USERNAME, PASSWORD)))
        manager = cluster.buckets()
        manager.create_bucket(CreateBucketSettings(
            name="orders", bucket_type=BucketType.COUCHBASE, ram_quota_mb=100,
            num_replicas=2, minimum_durability_level=DurabilityLevel.MAJORITY))
        with pytest.raises(BucketAlreadyExistsException):
            manager.create_bucket(CreateBucketSettings(
                name="orders", bucket_type=BucketType.COUCHBASE, ram_quota_mb=100))
        orders_settings = manager.get_bucket("orders")
        assert (orders_settings.ram_quota_mb, orders_settings.num_replicas) == (100, 2)
        assert orders_settings.minimum_durability_level == DurabilityLevel.MAJORITY
        default_settings = manager.get_bucket("default")
        assert (default_settings.ram_quota_mb, default_settings.num_replicas) == (128, 1)
        assert default_settings.minimum_durability_level == DurabilityLevel.NONE
        assert sorted(b.name for b in manager.get_all_buckets()) == ["default", "orders"]

        # Every node shows each bucket under the one uuid the cluster gave it (the map's
        # `uuid`, as the SDKs read it), the one REST describes.
        from admin_http import get_json
        for bucket in ("default", "orders"):
            uuid = get_json(f"http://{HOST}:{base + 1}/pools/default/buckets/{bucket}")["uuid"]
            eventually(f"{bucket}'s uuid in every node's map", lambda: all(
                get_json(f"http://{HOST}:{base + 10 * i + 1}/pools/default/b/{bucket}")["uuid"]
                == uuid for i in range(NODES)))

        # Each node runs the new bucket with its own quota.
        for i in range(NODES):
            port = kv_port(base, i)
            assert stat(port, "orders", "memory")["ep_max_size"] == str(100 << 20)
            assert stat(port, "default", "memory")["ep_max_size"] == str(128 << 20)

        # An edit of the quota applies on every node at once.
        manager.update_bucket(BucketSettings(name="orders", bucket_type=BucketType.COUCHBASE,
                                             ram_quota_mb=150, num_replicas=2,
                                             minimum_durability_level=DurabilityLevel.MAJORITY))
        assert manager.get_bucket("orders").ram_quota_mb == 150
        for i in range(NODES):
            eventually("the new quota on every node",
                       lambda: stat(kv_port(base, i), "orders", "memory")["ep_max_size"]
                       == str(150 << 20))

        # /metrics labels each bucket's engine figures with its name.
        import urllib.request

        from admin_http import request
        with urllib.request.urlopen(request(f"http://{HOST}:{base + 1}/metrics"),
                                    timeout=10) as r:
            metrics = r.read().decode()
        assert f'sluice_ep_max_size{{bucket="orders"}} {150 << 20}' in metrics, metrics[:2000]
        assert f'sluice_ep_max_size{{bucket="default"}} {128 << 20}' in metrics

        default = cluster.bucket("default").default_collection()
        orders = cluster.bucket("orders").default_collection()
        for i in range(DOCS):
            default.upsert(f"d{i}", {"bucket": "default", "i": i})
            orders.upsert(f"o{i}", {"bucket": "orders", "i": i})
        for i in range(DOCS):
            assert default.get(f"d{i}").content_as[dict]["bucket"] == "default"
            assert orders.get(f"o{i}").content_as[dict]["bucket"] == "orders"
        with pytest.raises(DocumentNotFoundException):
            orders.get("d0")
        with pytest.raises(DocumentNotFoundException):
            default.get("o0")
        # orders' durability minimum made each plain upsert a SyncWrite (prepared on its
        # active, committed once a majority held it); default's stayed plain.
        def sync_writes(bucket: str, what: str) -> int:
            return sum(int(stat(kv_port(base, i), bucket, "")
                           [f"vb_active_sync_write_{what}_count"]) for i in range(NODES))
        assert sync_writes("orders", "accepted") >= DOCS
        assert sync_writes("orders", "committed") >= DOCS
        assert sync_writes("default", "accepted") == 0
        # Two replicas of each orders document, one of each default document.
        for key, col, copies in (("o7", orders, 2), ("d7", default, 1)):
            eventually(f"{copies} replicas of {key}",
                       lambda: len([r for r in col.get_all_replicas(key) if r.is_replica])
                       == copies)

        # Each bucket's DCP carries its own documents, and only those.
        want_default = {f"d{i}" for i in range(DOCS)}
        want_orders = {f"o{i}" for i in range(DOCS)}
        assert all_streamed(base, "default") == want_default
        assert all_streamed(base, "orders") == want_orders

        # Deleting orders leaves default as it was, and takes orders' files off every node.
        manager.drop_bucket("orders")
        with pytest.raises(BucketNotFoundException):
            manager.get_bucket("orders")
        for n in info["nodes"]:
            orders_dir = Path(n["data_dir"]) / "orders"
            eventually(f"{orders_dir} removed", lambda: not orders_dir.exists())
        for i in range(NODES):
            with mcbin.Conn(kv_port(base, i)) as c:
                c.hello([])
                assert c.auth_plain(USERNAME, PASSWORD).status == SUCCESS
                assert c.select_bucket("orders").status == mcbin.KEY_ENOENT
        for i in range(DOCS):
            assert default.get(f"d{i}").content_as[dict] == {"bucket": "default", "i": i}
        assert all_streamed(base, "default") == want_default
        cluster.close()
    finally:
        err = stop(proc)
    assert err.count("stopped (exit status: 0)") == NODES, err


def bucket_nodes(admin_port: int, bucket: str) -> List[str]:
    """The nodes (host:admin port) bucket `bucket`'s map lists, as REST describes it."""
    from admin_http import get_json
    doc = get_json(f"http://{HOST}:{admin_port}/pools/default/buckets/{bucket}")
    return sorted(n["hostname"] for n in doc["nodes"])


@pytest.mark.timeout(420)
def test_rebalance_and_failover_move_every_bucket(tmp_path):
    """A fourth node rebalanced in takes its share of both buckets (and builds the second
    replica an edit gave one), and a failover promotes replicas in both: every document
    stays readable and each bucket streams its own."""
    import subprocess

    from conftest import sluice_binary
    from test_cluster_faults import cluster_up as cluster_up_faults, cluster_view
    from test_cluster_rebalance import join_fourth, rebalance
    from test_cluster_up import terminate

    base = free_base()
    proc = cluster_up_faults(tmp_path, base, auto_failover_s=0)
    fourth = None
    try:
        wait_up(proc, tmp_path)
        cluster = Cluster(f"couchbase://{HOST}:{base}",
                          ClusterOptions(PasswordAuthenticator(USERNAME, PASSWORD)))
        cluster.buckets().create_bucket(CreateBucketSettings(
            name="orders", bucket_type=BucketType.COUCHBASE, ram_quota_mb=100,
            num_replicas=1))
        default = cluster.bucket("default").default_collection()
        orders = cluster.bucket("orders").default_collection()
        for i in range(DOCS):
            default.upsert(f"d{i}", {"i": i})
            orders.upsert(f"o{i}", {"i": i})
        # A second replica for orders: recorded now, built by the rebalance.
        cluster.buckets().update_bucket(BucketSettings(
            name="orders", bucket_type=BucketType.COUCHBASE, ram_quota_mb=100, num_replicas=2))
        assert cluster.buckets().get_bucket("orders").num_replicas == 2

        fourth = join_fourth(tmp_path, base, join_port=base + 1, vbuckets=64)
        print(rebalance(base + 1))
        for key, col, copies in (("o7", orders, 2), ("d7", default, 1)):
            eventually(f"{copies} replicas of {key} after the rebalance",
                       lambda: len([r for r in col.get_all_replicas(key) if r.is_replica])
                       == copies)
        four = sorted(f"{HOST}:{base + 10 * i + 1}" for i in range(4))
        assert bucket_nodes(base + 1, "default") == four
        assert bucket_nodes(base + 1, "orders") == four
        want_default = {f"d{i}" for i in range(DOCS)}
        want_orders = {f"o{i}" for i in range(DOCS)}
        assert all_streamed(base, "orders", range(4)) == want_orders
        assert all_streamed(base, "default", range(4)) == want_default
        # Node 3 holds actives of both buckets now.
        for bucket in ("default", "orders"):
            with kv_connect(kv_port(base, 3), USERNAME, PASSWORD, bucket=bucket) as c:
                r = c.call(mcbin.OP_GET_ALL_VB_SEQNOS, extras=struct.pack(">I", 1))
                assert r.status == SUCCESS and len(r.value) >= 10, (bucket, r)

        out = subprocess.run([str(sluice_binary()), "failover", "2",
                              "--admin", f"{HOST}:{base + 1}"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "bucket default:" in out.stdout and "bucket orders:" in out.stdout, out.stdout
        three = sorted(f"{HOST}:{base + 10 * i + 1}" for i in (0, 1, 3))
        assert bucket_nodes(base + 1, "default") == three
        assert bucket_nodes(base + 1, "orders") == three
        assert 2 not in cluster_view(base + 1)["map_nodes"]
        for i in range(DOCS):
            assert eventually(f"d{i} after the failover",
                              lambda: default.get(f"d{i}").content_as[dict] == {"i": i})
            assert eventually(f"o{i} after the failover",
                              lambda: orders.get(f"o{i}").content_as[dict] == {"i": i})
        assert all_streamed(base, "orders", (0, 1, 3)) == want_orders
        assert all_streamed(base, "default", (0, 1, 3)) == want_default
        cluster.close()
    finally:
        if fourth is not None:
            terminate(fourth)
        stop(proc)


def test_bucket_refusals_and_the_cli(tmp_path):
    """What Couchbase refuses, refused the same way: 400 with the reasons by field; and
    `sluice bucket create|list|delete`."""
    import subprocess

    from conftest import sluice_binary
    import json
    import urllib.error
    import urllib.parse
    import urllib.request

    from admin_http import basic

    base = free_base()
    proc = cluster_up(tmp_path, base)
    try:
        wait_up(proc, tmp_path)
        url = f"http://{HOST}:{base + 1}/pools/default/buckets"

        def create(fields: Dict[str, str], auth: str = basic(), to: str = url):
            data = urllib.parse.urlencode(fields).encode()
            req = urllib.request.Request(to, data=data, headers={
                "authorization": auth, "content-type": "application/x-www-form-urlencoded"})
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    return r.status, json.loads(r.read() or b"{}")
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read() or b"{}")

        status, body = create({"name": "x", "ramQuotaMB": "10", "bucketType": "memcached",
                               "replicaNumber": "9"})
        assert status == 400, body
        assert set(body["errors"]) == {"ramQuota", "bucketType", "replicaNumber"}, body
        status, body = create({"name": "default", "ramQuotaMB": "100"})
        assert status == 400 and "already exists" in body["errors"]["name"], body
        # An ephemeral bucket persists nothing, so its durability minimum cannot ask it to.
        status, body = create({"name": "e", "ramQuotaMB": "100", "bucketType": "ephemeral",
                               "durabilityMinLevel": "persistToMajority"})
        assert status == 400 and set(body["errors"]) == {"durabilityMinLevel"}, body
        status, _ = create({"name": "y", "ramQuotaMB": "100"}, auth=basic(USERNAME, "wrong"))
        assert status == 401
        # An edit cannot change the type, nor take the quota below the floor.
        status, body = create({"bucketType": "ephemeral", "ramQuotaMB": "50"},
                              to=f"{url}/default")
        assert status == 400 and set(body["errors"]) == {"bucketType", "ramQuota"}, body
        status, _ = create({"ramQuotaMB": "100"}, to=f"{url}/nope")
        assert status == 404
        status, body = create({"name": "eph", "ramQuotaMB": "100", "bucketType": "ephemeral",
                               "replicaNumber": "0"})
        assert status == 202, body
        listed: List[dict] = json.loads(urllib.request.urlopen(urllib.request.Request(
            url, headers={"authorization": basic()}), timeout=10).read())
        eph = next(b for b in listed if b["name"] == "eph")
        assert (eph["bucketType"], eph["replicaNumber"], eph["quota"]["rawRAM"]) == \
            ("ephemeral", 0, 100 << 20)

        def cli(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([str(sluice_binary()), "bucket", *args,
                                   "--admin", f"{HOST}:{base + 1}"],
                                  capture_output=True, text=True, timeout=90)
        out = cli("create", "cli-made", "--ram-quota-mb", "100", "--replicas", "2",
                  "--durability-min", "majority-and-persist-active",
                  "--conflict-resolution", "lww")
        assert out.returncode == 0 and "bucket cli-made created" in out.stdout, out
        out = cli("create", "cli-made", "--ram-quota-mb", "100")
        assert out.returncode != 0 and "already exists" in out.stderr, out
        out = cli("create", "tiny", "--ram-quota-mb", "10")
        assert out.returncode != 0 and "ramQuota" in out.stderr, out
        out = cli("list")
        rows = [line.split("\t") for line in out.stdout.splitlines()]
        assert ["cli-made", "membase", "100 MiB", "2 replicas",
                "durability majorityAndPersistActive", "conflicts lww"] in rows, out.stdout
        assert sorted(r[0] for r in rows) == ["cli-made", "default", "eph"], out.stdout
        with kv_connect(kv_port(base, 2), USERNAME, PASSWORD, bucket="cli-made") as c:
            assert c.set(b"k", b"v", vb=mcbin.vbucket_of(b"k", 64)).status in (
                SUCCESS, mcbin.NOT_MY_VBUCKET)
        out = cli("delete", "cli-made")
        assert out.returncode == 0 and "bucket cli-made deleted" in out.stdout, out
        out = cli("delete", "cli-made")
        assert out.returncode != 0 and "404" in out.stderr, out
    finally:
        stop(proc)
