"""Byte-level protocol checks against one server (couchbase bucket, --vbuckets 64).

Pipelining (100 mixed requests with random distinct opaques, answered in order with the
opaque echoed and the results a sequential model predicts), quiet commands (silent on
success / miss, answering errors), HELLO (acks a duplicate-free subset of the request,
only features Sluice implements, and the acked ones take effect), GET_ERROR_MAP v2,
GET_CLUSTER_CONFIG (real ports, 64 vbuckets), NOT_MY_VBUCKET with the config for vb >= 64,
GET_ALL_VB_SEQNOS, alt requests (magic 0x08) with a durability frame, unknown frame ids,
STAT vbucket-seqno and its terminator, VERSION. SCRAM is covered by the SDK tests.
"""

from __future__ import annotations

import json
import random
import re
import socket
import struct
import time
from typing import Dict, Optional, Tuple

import pytest

import mcbin
from conftest import BUCKET, PASSWORD, USERNAME
from mcbin import (ALT_REQ, ALT_RES, DELTA_BADVAL, EINVAL, KEY_EEXISTS, KEY_ENOENT,
                   NOT_MY_VBUCKET, NOT_STORED, RES, SUCCESS, UNKNOWN_FRAME_INFO, Conn, encode,
                   frame_info, kv_connect, set_extras, vbucket_of)

VBUCKETS = 64

# HELLO features Sluice implements (README "What a node does"); anything else must not be
# acknowledged.
# 0x0C duplex, 0x0D / 0x1F clustermap change notification (full / brief), 0x1D GET_CLUSTER_CONFIG
# with a known version, 0x1E NOT_MY_VBUCKET map dedup.
IMPLEMENTED_FEATURES = {0x03, 0x04, 0x06, 0x07, 0x08, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x10, 0x11,
                        0x12, 0x14, 0x17, 0x19, 0x1C, 0x1D, 0x1E, 0x1F}
# Features the protocol defines that Sluice does not implement (or that are retired).
NOT_IMPLEMENTED = {0x01, 0x02, 0x05, 0x09, 0x0F, 0x13, 0x16}


@pytest.fixture(scope="module")
def srv(sluice_module_factory):
    return sluice_module_factory(bucket_type="couchbase", vbuckets=VBUCKETS)


def vb(key: bytes) -> int:
    return vbucket_of(key, VBUCKETS)


def kv(srv, features=()) -> Conn:
    return kv_connect(srv.kv_port, USERNAME, PASSWORD, features=features)


def conn_for(srv, port: str) -> Conn:
    return kv(srv) if port == "kv" else Conn(srv.memcached_port)


# ------------------------------------------------------------------ pipelining

class KvModel:
    """What a sequential, correct server answers (values as bytes, counters as ASCII)."""

    def __init__(self):
        self.data: Dict[bytes, bytes] = {}

    def apply(self, op: int, key: bytes, value: bytes, extras: bytes) -> Tuple[int, Optional[bytes]]:
        d = self.data
        if op in (mcbin.OP_NOOP, mcbin.OP_VERSION):
            return SUCCESS, None
        if op in (mcbin.OP_GET, mcbin.OP_GETK):
            return (SUCCESS, d[key]) if key in d else (KEY_ENOENT, None)
        if op == mcbin.OP_TOUCH:
            return (SUCCESS, None) if key in d else (KEY_ENOENT, None)
        if op == mcbin.OP_SET:
            d[key] = value
            return SUCCESS, None
        if op == mcbin.OP_ADD:
            if key in d:
                return KEY_EEXISTS, None
            d[key] = value
            return SUCCESS, None
        if op == mcbin.OP_REPLACE:
            if key not in d:
                return KEY_ENOENT, None
            d[key] = value
            return SUCCESS, None
        if op == mcbin.OP_DELETE:
            if key not in d:
                return KEY_ENOENT, None
            del d[key]
            return SUCCESS, None
        if op in (mcbin.OP_APPEND, mcbin.OP_PREPEND):
            if key not in d:
                return NOT_STORED, None
            d[key] = d[key] + value if op == mcbin.OP_APPEND else value + d[key]
            return SUCCESS, None
        if op in (mcbin.OP_INCREMENT, mcbin.OP_DECREMENT):
            delta, initial, _exp = struct.unpack(">QQI", extras)
            if key not in d:
                d[key] = b"%d" % initial
                return SUCCESS, struct.pack(">Q", initial)
            cur = d[key]
            if not cur.isdigit() or int(cur) >= 2 ** 64:
                return DELTA_BADVAL, None
            n = int(cur)
            n = (n + delta) % 2 ** 64 if op == mcbin.OP_INCREMENT else max(0, n - delta)
            d[key] = b"%d" % n
            return SUCCESS, struct.pack(">Q", n)
        raise AssertionError(f"model has no opcode 0x{op:02x}")


@pytest.mark.parametrize("port", ["kv", "memcached"])
def test_pipeline_100_mixed_requests_in_order(srv, port):
    rng = random.Random(4242)
    keys = [b"pipe-%s-%d" % (port.encode(), i) for i in range(6)]
    model = KvModel()
    ops = [mcbin.OP_SET, mcbin.OP_GET, mcbin.OP_GETK, mcbin.OP_ADD, mcbin.OP_REPLACE,
           mcbin.OP_DELETE, mcbin.OP_INCREMENT, mcbin.OP_DECREMENT, mcbin.OP_APPEND,
           mcbin.OP_PREPEND, mcbin.OP_NOOP, mcbin.OP_VERSION, mcbin.OP_TOUCH]
    opaques = rng.sample(range(1, 2 ** 32), 100)
    reqs = []
    for i in range(100):
        op = rng.choice(ops)
        key = rng.choice(keys)
        value, extras = b"", b""
        if op in (mcbin.OP_SET, mcbin.OP_ADD, mcbin.OP_REPLACE):
            value = rng.choice([b"%d" % rng.randrange(1000), b"text-%d" % i])
            extras = set_extras(i, 0)
        elif op in (mcbin.OP_APPEND, mcbin.OP_PREPEND):
            value = rng.choice([b"7", b"-x"])
        elif op in (mcbin.OP_INCREMENT, mcbin.OP_DECREMENT):
            extras = struct.pack(">QQI", rng.randrange(1, 50), rng.randrange(100), 0)
        elif op == mcbin.OP_TOUCH:
            extras = struct.pack(">I", 0)
        if op in (mcbin.OP_NOOP, mcbin.OP_VERSION):
            key = b""
        reqs.append((op, key, value, extras, opaques[i]))
    with conn_for(srv, port) as c:
        for k in keys:  # start from nothing
            c.call(mcbin.OP_DELETE, k, vb=vb(k))
        c.send(b"".join(encode(op, k, v, e, vb=vb(k) if k else 0, opaque=o)
                        for op, k, v, e, o in reqs))
        resps = [c.recv() for _ in reqs]
        # Nothing more: a NOOP is the very next answer.
        r = c.call(mcbin.OP_NOOP, opaque=0xABCDEF01)
        assert r.status == SUCCESS
    for i, ((op, k, v, e, o), r) in enumerate(zip(reqs, resps)):
        exp_status, exp_value = model.apply(op, k, v, e)
        where = f"request #{i} (op 0x{op:02x}, key {k!r}, opaque 0x{o:08x}): {r}"
        assert r.magic == RES, where
        assert r.opaque == o, f"opaque not echoed / out of order at {where}"
        assert r.opcode == op, f"opcode not echoed at {where}"
        assert r.status == exp_status, f"expected status 0x{exp_status:02x} at {where}"
        if op in (mcbin.OP_GET, mcbin.OP_GETK) and exp_status == SUCCESS:
            assert r.value == exp_value, where
            assert r.key == (k if op == mcbin.OP_GETK else b""), where
        if op in (mcbin.OP_INCREMENT, mcbin.OP_DECREMENT) and exp_status == SUCCESS:
            assert r.value == exp_value, where
        if op == mcbin.OP_VERSION:
            assert r.value[:1].isdigit(), where


# ------------------------------------------------------------------ quiet commands

@pytest.mark.parametrize("port", ["kv", "memcached"])
def test_quiet_commands_silent_on_success_and_miss(srv, port):
    p = port.encode()
    k1, k2, k3, miss = (b"quiet-%s-%s" % (p, n) for n in (b"1", b"2", b"3", b"missing"))
    inc = struct.pack(">QQI", 5, 100, 0)
    # (opcode, key, value, extras, expected status or None when the server must be silent)
    script = [
        (mcbin.OP_SETQ, k1, b"one", set_extras(1), None),
        (mcbin.OP_SETQ, k3, b"not a number", set_extras(), None),
        (mcbin.OP_GETQ, miss, b"", b"", None),
        (mcbin.OP_GETQ, k1, b"", b"", SUCCESS),
        (mcbin.OP_GETKQ, miss, b"", b"", None),
        (mcbin.OP_GETKQ, k1, b"", b"", SUCCESS),
        (mcbin.OP_ADDQ, k1, b"x", set_extras(), KEY_EEXISTS),
        (mcbin.OP_ADDQ, k2, b"two", set_extras(), None),
        (mcbin.OP_REPLACEQ, miss, b"x", set_extras(), KEY_ENOENT),
        (mcbin.OP_REPLACEQ, k2, b"2", set_extras(), None),
        (mcbin.OP_APPENDQ, miss, b"x", b"", NOT_STORED),
        (mcbin.OP_APPENDQ, k1, b"+a", b"", None),
        (mcbin.OP_PREPENDQ, k1, b"p-", b"", None),
        (mcbin.OP_INCREMENTQ, k2, b"", inc, None),
        (mcbin.OP_INCREMENTQ, k3, b"", inc, DELTA_BADVAL),
        (mcbin.OP_DECREMENTQ, k2, b"", inc, None),
        (mcbin.OP_DELETEQ, miss, b"", b"", KEY_ENOENT),
        (mcbin.OP_DELETEQ, k3, b"", b"", None),
        (mcbin.OP_SETQ, k3, b"bad extras", b"\0" * 7, EINVAL),
        (mcbin.OP_NOOP, b"", b"", b"", SUCCESS),
    ]
    with conn_for(srv, port) as c:
        for k in (k1, k2, k3, miss):
            c.call(mcbin.OP_DELETE, k, vb=vb(k))
        c.send(b"".join(encode(op, k, v, e, vb=vb(k) if k else 0, opaque=1000 + i)
                        for i, (op, k, v, e, _) in enumerate(script)))
        got = []
        while True:
            r = c.recv()
            got.append(r)
            if r.opcode == mcbin.OP_NOOP:
                break
        expected = [(1000 + i, op, st) for i, (op, _, _, _, st) in enumerate(script)
                    if st is not None]
        assert [(r.opaque, r.opcode, r.status) for r in got] == expected, got
        by_opaque = {r.opaque: r for r in got}
        assert by_opaque[1003].value == b"one" and by_opaque[1003].key == b""
        assert by_opaque[1005].value == b"one" and by_opaque[1005].key == k1
        # The silent ones happened.
        assert c.get(k1, vb=vb(k1)).value == b"p-one+a"
        assert c.get(k2, vb=vb(k2)).value == b"2"  # 2 + 5 - 5
        assert c.get(k3, vb=vb(k3)).status == KEY_ENOENT


# ------------------------------------------------------------------ HELLO

def test_hello_acks_implemented_subset(srv):
    requested = list(range(0x01, 0x27)) + [0x1234, 0xFFFF, 0x04, 0x07]  # dups too
    with Conn(srv.kv_port) as c:
        acked = c.hello(requested)
        assert len(acked) == len(set(acked)), f"duplicates in {acked}"
        assert set(acked) <= set(requested), f"acked unrequested features: {acked}"
        assert set(acked) <= IMPLEMENTED_FEATURES, (
            f"acked features Sluice does not implement: "
            f"{sorted(hex(f) for f in set(acked) - IMPLEMENTED_FEATURES)}")
        assert not set(acked) & NOT_IMPLEMENTED
        # Both clustermap notification forms asked for: only the brief one is enabled.
        assert 0x1F in acked and 0x0D not in acked
        assert {mcbin.FEATURE_MUTATION_SEQNO, mcbin.FEATURE_XERROR, mcbin.FEATURE_JSON,
                mcbin.FEATURE_ALT_REQUEST, mcbin.FEATURE_SELECT_BUCKET} <= set(acked)
        # Only what was asked for (and is implemented), in a narrower HELLO.
        assert c.hello([mcbin.FEATURE_MUTATION_SEQNO, 0x0F,  # tracing: not implemented
                        mcbin.FEATURE_UNORDERED]) == [mcbin.FEATURE_MUTATION_SEQNO,
                                                      mcbin.FEATURE_UNORDERED]


def test_hello_features_take_effect_and_reset(srv):
    key = b"hello-effect"
    with Conn(srv.kv_port) as c:
        assert c.hello([mcbin.FEATURE_MUTATION_SEQNO, mcbin.FEATURE_XERROR]) == [
            mcbin.FEATURE_MUTATION_SEQNO, mcbin.FEATURE_XERROR]
        assert c.auth_plain(USERNAME, PASSWORD).status == SUCCESS
        assert c.select_bucket(BUCKET).status == SUCCESS
        r = c.set(key, b"v", vb=vb(key))
        assert r.status == SUCCESS and len(r.extras) == 16, r
        uuid, seqno = r.seqno_extras()
        assert seqno > 0 and uuid != 0
        # XERROR: an error carries a JSON context.
        r = c.get(b"x" * 251)
        assert r.status == EINVAL
        assert "error" in json.loads(r.value), r
        # A new HELLO resets everything it does not ask for again.
        assert c.hello([]) == []
        r = c.set(key, b"v2", vb=vb(key))
        assert r.status == SUCCESS and r.extras == b"", r
        r = c.get(b"x" * 251)
        assert r.status == EINVAL and r.value == b"", r


# ------------------------------------------------------------------ error map, config

def test_get_error_map_v2(srv):
    with Conn(srv.kv_port) as c:  # allowed before authentication
        r = c.call(mcbin.OP_GET_ERROR_MAP, value=struct.pack(">H", 2))
        assert r.status == SUCCESS, r
        m = json.loads(r.value)
        assert m["version"] == 2, m.get("version")
        assert isinstance(m["revision"], int) and m["revision"] >= 1
        errors = m["errors"]
        assert isinstance(errors, dict) and len(errors) >= 20
        for code in ("0", "1", "7", "86", "24"):
            e = errors[code]
            assert e["name"] and isinstance(e["desc"], str) and isinstance(e["attrs"], list), e
        assert "temp" in errors["86"]["attrs"]
        assert "fetch-config" in errors["7"]["attrs"]
        for code, e in errors.items():
            int(code, 16)
            assert set(e) >= {"name", "desc", "attrs"}, (code, e)


def check_config(cfg: dict, srv) -> None:
    assert isinstance(cfg["rev"], int)
    assert cfg["name"] == BUCKET
    assert cfg["nodeLocator"] == "vbucket"
    assert isinstance(cfg["nodes"], list) and len(cfg["nodes"]) >= 1
    ext = cfg["nodesExt"]
    assert isinstance(ext, list) and len(ext) >= 1
    services = ext[0]["services"]
    assert services["kv"] == srv.kv_port, services
    assert services["mgmt"] == srv.admin_port, services
    vmap = cfg["vBucketServerMap"]
    assert len(vmap["vBucketMap"]) == VBUCKETS
    assert vmap["hashAlgorithm"] == "CRC"
    n = len(vmap["serverList"])
    assert all(0 <= chain[0] < n for chain in vmap["vBucketMap"])
    assert any(f":{srv.kv_port}" in s for s in vmap["serverList"]), vmap["serverList"]


def test_get_cluster_config(srv):
    with kv(srv, features=[mcbin.FEATURE_JSON]) as c:
        r = c.call(mcbin.OP_GET_CLUSTER_CONFIG)
        assert r.status == SUCCESS, r
        assert r.datatype & 0x01, "config should be flagged JSON when JSON was negotiated"
        check_config(json.loads(r.value), srv)


@pytest.mark.parametrize("bad_vb", [VBUCKETS, VBUCKETS + 1, 1023, 0xFFFF])
def test_wrong_vbucket_not_my_vbucket_with_config(srv, bad_vb):
    key = b"nmvb-key"
    with kv(srv) as c:
        r = c.get(key, vb=bad_vb)
        assert r.status == NOT_MY_VBUCKET, r
        check_config(json.loads(r.value), srv)
        r = c.set(key, b"never stored", vb=bad_vb)
        assert r.status == NOT_MY_VBUCKET, r
        assert c.get(key, vb=vb(key)).status == KEY_ENOENT
        assert c.call(mcbin.OP_NOOP).status == SUCCESS


def test_get_all_vb_seqnos(srv):
    key = b"all-vb-seqnos"
    with kv(srv, features=[mcbin.FEATURE_MUTATION_SEQNO]) as c:
        _, seqno = c.set(key, b"x", vb=vb(key)).seqno_extras()
        r = c.call(mcbin.OP_GET_ALL_VB_SEQNOS)
        assert r.status == SUCCESS, r
        assert len(r.value) == VBUCKETS * 10, len(r.value)
        pairs = [struct.unpack(">HQ", r.value[i:i + 10]) for i in range(0, len(r.value), 10)]
        assert [p[0] for p in pairs] == list(range(VBUCKETS))
        assert dict(pairs)[vb(key)] == seqno
        stats = c.stat("vbucket-seqno")
        for v, s in pairs:
            assert int(stats[f"vb_{v}:high_seqno"]) == s
        # State filter 1 (active): all 64 here too.
        r = c.call(mcbin.OP_GET_ALL_VB_SEQNOS, extras=struct.pack(">I", 1))
        assert r.status == SUCCESS and len(r.value) == VBUCKETS * 10


# ------------------------------------------------------------------ alt requests / frames

def alt_set(key: bytes, value: bytes, framing: bytes, opaque: int = 7) -> bytes:
    return encode(mcbin.OP_SET, key, value, set_extras(), vb=vb(key), opaque=opaque,
                  magic=ALT_REQ, framing=framing)


@pytest.mark.parametrize("frame", [
    frame_info(1, b"\x01"),              # level 1 (majority)
    frame_info(1, b"\x01\x03\xe8"),      # level 1, timeout 1000 ms
    frame_info(1, b"\x02"),              # majority and persist on master
    frame_info(1, b"\x03\x13\x88"),      # persist to majority, 5000 ms
], ids=["majority", "majority+timeout", "persist-master", "persist-majority+timeout"])
def test_alt_request_durable_set(srv, frame):
    key = b"durable-" + frame.hex().encode()
    with kv(srv, features=[mcbin.FEATURE_ALT_REQUEST, mcbin.FEATURE_SYNC_REPLICATION,
                           mcbin.FEATURE_MUTATION_SEQNO]) as c:
        c.send(alt_set(key, b"durable value", frame))
        r = c.recv()
        assert r.magic in (RES, ALT_RES) and r.opaque == 7, r
        assert r.status == SUCCESS, r
        _uuid, seqno = r.seqno_extras()
        g = c.get(key, vb=vb(key))
        assert (g.status, g.value) == (SUCCESS, b"durable value")
        if frame[1] in (2, 3):  # the persist levels answer only once persisted
            status, obs = c.observe_seqno(vb(key), _uuid)
            assert status == SUCCESS and obs.persisted >= seqno, obs


@pytest.mark.parametrize("frame", [frame_info(14), frame_info(15), frame_info(40, b"ab")],
                         ids=["id14", "id15-escaped", "id40-escaped"])
def test_alt_request_unknown_frame_id(srv, frame):
    key = b"unknown-frame"
    with kv(srv, features=[mcbin.FEATURE_ALT_REQUEST]) as c:
        c.send(alt_set(key, b"v", frame))
        r = c.recv()
        assert r.status == UNKNOWN_FRAME_INFO, r
        assert c.get(key, vb=vb(key)).status == KEY_ENOENT
        assert c.call(mcbin.OP_NOOP).status == SUCCESS


# ------------------------------------------------------------------ STAT, VERSION

def test_stat_vbucket_seqno_then_terminator(srv):
    with kv(srv) as c:
        c.send(encode(mcbin.OP_STAT, b"vbucket-seqno", opaque=0x5555)
               + encode(mcbin.OP_NOOP, opaque=0x6666))
        pairs = {}
        while True:
            r = c.recv()
            assert r.opcode == mcbin.OP_STAT and r.opaque == 0x5555 and r.status == SUCCESS, r
            if not r.key:
                assert r.value == b"" and r.extras == b"", f"terminator carries data: {r}"
                break
            assert r.value, f"stat {r.key!r} without a value"
            pairs[r.key.decode()] = r.value.decode()
        r = c.recv()
        assert (r.opcode, r.opaque) == (mcbin.OP_NOOP, 0x6666), f"after the terminator: {r}"
    for v in range(VBUCKETS):
        assert int(pairs[f"vb_{v}:high_seqno"]) >= 0
    assert not any(k.startswith(f"vb_{VBUCKETS}:") for k in pairs)
    # One vbucket only.
    with kv(srv) as c:
        one = c.stat("vbucket-seqno 5")
        assert one and all(k.startswith("vb_5:") for k in one), one


@pytest.mark.parametrize("port", ["kv-before-auth", "memcached"])
def test_version(srv, port):
    with Conn(srv.kv_port if port == "kv-before-auth" else srv.memcached_port) as c:
        r = c.call(mcbin.OP_VERSION)
        assert r.status == SUCCESS
        assert re.match(rb"^\d+\.\d+\.\d+", r.value), r.value


# ------------------------------------------------------------------ stream handling

@pytest.mark.parametrize("port", ["kv", "memcached"])
def test_request_dribbled_byte_by_byte(srv, port):
    key = b"dribble-" + port.encode()
    pkt = (encode(mcbin.OP_SET, key, b"dribbled value", set_extras(9), vb=vb(key), opaque=77)
           + encode(mcbin.OP_GET, key, vb=vb(key), opaque=78))
    with conn_for(srv, port) as c:
        for i in range(len(pkt)):
            c.send(pkt[i:i + 1])
            if i % 8 == 0:
                time.sleep(0.001)
        r1, r2 = c.recv(), c.recv()
        assert (r1.opaque, r1.status) == (77, SUCCESS), r1
        assert (r2.opaque, r2.status, r2.value, r2.flags()) == (78, SUCCESS, b"dribbled value", 9)


@pytest.mark.parametrize("port", ["kv", "memcached"])
def test_half_close_still_answers_every_request(srv, port):
    """A client that sends its requests and then shuts down its sending side (as `nc -q`
    and many scripts do) still gets every answer, then EOF."""
    keys = [b"halfclose-%s-%d" % (port.encode(), i) for i in range(50)]
    with conn_for(srv, port) as c:
        c.send(b"".join(encode(mcbin.OP_SET, k, b"v%d" % i, set_extras(), vb=vb(k), opaque=i)
                        + encode(mcbin.OP_GET, k, vb=vb(k), opaque=1000 + i)
                        for i, k in enumerate(keys)))
        c.sock.shutdown(socket.SHUT_WR)
        resps, closed = c.recv_until_closed(timeout=10)
    assert closed, "the server did not close after the client's FIN"
    assert [(r.opaque, r.status) for r in resps] == [
        x for i in range(len(keys)) for x in ((i, SUCCESS), (1000 + i, SUCCESS))], resps
    assert [r.value for r in resps[1::2]] == [b"v%d" % i for i in range(len(keys))]
