"""DCP stream ids (``enable_stream_id``) and SEQNO_ADVANCED with a client written by others.

gocbcore v10.8.1's DCP agent (``dcp_gocbcore/bin/sidstream``, source in
dcp_gocbcore/sidstream/main.go) opens a collection-aware connection with stream ids and, on
every vbucket of a bucket holding two collections with the same keys, two streams side by
side: sid 1 filtered to ``inventory.airline``, sid 2 to ``inventory.hotel``, each from 0 to
the vbucket's high seqno. Checked from its summary: each sid saw exactly its collection's
documents in their final state (the removed airline documents as deletions) and its
collection's creation in every vbucket, and nothing of another collection; every message
carried its stream's vbucket and sid, inside its snapshot, with increasing seqnos; every
stream ended OK at its vbucket's high seqno, the streams whose last shown seqno is below it
through a SEQNO_ADVANCED at the end of the snapshot; a second stream request for a live
(vb, sid) was refused with KEY_EEXISTS; CLOSE_STREAM naming the sid closed it (a STREAM_END
"closed" followed) and freed the sid.

test_raw_stream_ids checks what gocbcore does not show: the wire encoding (alt-request
magic, stream-id frame info) and the refusals of a request or close without a sid.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

import mcbin
from conftest import BUCKET, PASSWORD, USERNAME
from mcbin import KEY_EEXISTS, SUCCESS, frame_info, kv_connect, vbucket_of
from sdk_node import connect
from test_dcp_collections import ids, rest, scopes_when_listed
from test_dcp_gocbcore import GO_DIR, all_vb_seqnos

SIDSTREAM = Path(os.environ.get("SIDSTREAM_BIN", GO_DIR / "bin" / "sidstream"))
VBUCKETS = 64
DOCS = 200
REMOVED = {f"k{i}" for i in range(0, DOCS, 10)}     # removed from airline after the writes
DEFAULT_DOCS = 100                                  # default-collection docs, written last

OP_DCP_OPEN = 0x50
OP_DCP_CLOSE_STREAM = 0x52
OP_DCP_STREAM_REQ = 0x53
OP_DCP_STREAM_END = 0x55
OP_DCP_MUTATION = 0x57
OP_DCP_DELETION = 0x58
OP_DCP_CONTROL = 0x5E
OP_DCP_SYSTEM_EVENT = 0x5F
OP_DCP_SEQNO_ADVANCED = 0x64
OP_DCP_NOOP = 0x5C
DCP_STREAM_ID_INVALID = 0x8D
FRAME_STREAM_ID = 2
FOREVER = 0xFFFF_FFFF_FFFF_FFFF


def sidstream_binary() -> Path:
    if not (SIDSTREAM.is_file() and os.access(SIDSTREAM, os.X_OK)):
        pytest.fail(f"{SIDSTREAM} not found: run scripts/install-test-deps (it builds the gocbcore "
                    "clients with Go), or set SIDSTREAM_BIN=/path/to/sidstream", pytrace=False)
    return SIDSTREAM


def bucket_with_two_collections(sluice_factory) -> Tuple[object, int, int]:
    """A couchbase bucket with inventory.airline and inventory.hotel holding k0..k{DOCS-1}
    each (airline without REMOVED), then DEFAULT_DOCS default-collection documents:
    (server, airline id, hotel id)."""
    srv = sluice_factory(bucket_type="couchbase", vbuckets=VBUCKETS, memory_quota_mb=256)
    base = scopes_when_listed(srv)
    rest(srv, "POST", base, {"name": "inventory"})
    rest(srv, "POST", f"{base}/inventory/collections", {"name": "airline"})
    rest(srv, "POST", f"{base}/inventory/collections", {"name": "hotel"})
    known = ids(rest(srv, "GET", base))
    cluster = connect(srv.connstr)
    try:
        b = cluster.bucket(BUCKET)
        a_col = b.scope("inventory").collection("airline")
        h_col = b.scope("inventory").collection("hotel")
        for i in range(DOCS):
            a_col.upsert(f"k{i}", {"in": "airline", "i": i})
            h_col.upsert(f"k{i}", {"in": "hotel", "i": i})
        for k in sorted(REMOVED):
            a_col.remove(k)
        for i in range(DEFAULT_DOCS):
            b.default_collection().upsert(f"k{i}", {"in": "default", "i": i})
    finally:
        cluster.close()
    return srv, known["inventory.airline"], known["inventory.hotel"]


def doc(value: str):
    try:
        return json.loads(value)
    except ValueError:
        return value


@pytest.mark.timeout(300)
def test_gocbcore_streams_two_collections_per_vbucket_by_stream_id(sluice_factory, tmp_path):
    srv, airline, hotel = bucket_with_two_collections(sluice_factory)
    with kv_connect(srv.kv_port, USERNAME, PASSWORD) as conn:
        targets = all_vb_seqnos(conn)

    out = tmp_path / "summary.json"
    args = [str(sidstream_binary()), "--addr", f"127.0.0.1:{srv.kv_port}", "--bucket", BUCKET,
            "--user", USERNAME, "--password", PASSWORD, "--collections", f"{airline},{hotel}",
            "--timeout", "120", "--out", str(out)]
    p = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=200)
    tail = "\n".join(p.stderr.splitlines()[-40:])
    if p.returncode != 0 or not out.is_file():
        pytest.fail(f"sidstream exited {p.returncode}\n--- stderr (tail) ---\n{tail}", pytrace=False)
    s = json.loads(out.read_text())

    problems: List[str] = []
    if s["open_errors"]:
        problems.append(f"stream requests refused: {s['open_errors'][:10]}")
    if s["violation_count"]:
        problems.append(f"{s['violation_count']} protocol violations: {s['violations'][:20]}")
    # Every vbucket holds both collections' creations: all 64 are streamed, by both sids.
    if {int(vb): n for vb, n in s["targets"].items()} != targets or s["vbuckets"] != VBUCKETS:
        problems.append(f"streamed {s['vbuckets']} vbuckets, targets {s['targets']} vs {targets}")
    streams = {(st["vb"], st["sid"]): st for st in s["streams"]}
    if set(streams) != {(vb, sid) for vb in range(VBUCKETS) for sid in (1, 2)}:
        problems.append(f"streams opened: {sorted(streams)}")
    for (vb, sid), st in sorted(streams.items()):
        # The position (last item or SEQNO_ADVANCED) must reach the end seqno: a stream whose
        # last shown seqno is below it learns it has everything only from a SEQNO_ADVANCED.
        if st["end"] != "ok" or st["position"] != st["target"]:
            problems.append(f"vb {vb} sid {sid}: ended {st['end']!r} at position "
                            f"{st['position']}, target {st['target']}")
        if st["last_shown"] < st["target"] and st["seqno_advanced"] == 0:
            problems.append(f"vb {vb} sid {sid}: last shown seqno {st['last_shown']} < "
                            f"{st['target']} and no SEQNO_ADVANCED")
    # A vbucket's high seqno is one record, shown by at most one of its two streams: the
    # other must end its last snapshot with a SEQNO_ADVANCED, so there are at least 64.
    total_sa = sum(st["seqno_advanced"] for st in s["streams"])
    if total_sa < VBUCKETS:
        problems.append(f"{total_sa} SEQNO_ADVANCED in all, want >= {VBUCKETS} (one per vbucket)")

    for sid, cid, name, removed in (("1", airline, "airline", REMOVED), ("2", hotel, "hotel", set())):
        got = s["sids"][sid]
        if got["collection"] != cid or got["collections_seen"] != [cid]:
            problems.append(f"sid {sid}: collection {got['collection']}, saw {got['collections_seen']}")
        want = {f"k{i}": ("deletion" if f"k{i}" in removed else "mutation") for i in range(DOCS)}
        last = {k: e["kind"] for k, e in got["keys"].items()}
        if last != want:
            diff = sorted(k for k in set(want) | set(last) if want.get(k) != last.get(k))
            problems.append(f"sid {sid} ({name}): keys differ: "
                            f"{[(k, want.get(k), last.get(k)) for k in diff[:8]]}")
        for k, e in sorted(got["keys"].items()):
            if e["vb"] != vbucket_of(k.encode(), VBUCKETS):
                problems.append(f"sid {sid}: {k} streamed on vb {e['vb']}")
            if e["kind"] == "mutation" and doc(e["value"]) != {"in": name, "i": int(k[1:])}:
                problems.append(f"sid {sid}: {k} has value {e['value']!r}")
        if got["counts"].get("create_collection") != VBUCKETS:
            problems.append(f"sid {sid}: {got['counts'].get('create_collection')} creations "
                            f"of its collection, want one per vbucket")
        if got["ends"] != {"ok": VBUCKETS}:
            problems.append(f"sid {sid}: stream ends {got['ends']}")
        if got["seqno_advanced_not_at_marker_end"]:
            problems.append(f"sid {sid}: {got['seqno_advanced_not_at_marker_end']} SEQNO_ADVANCED "
                            f"not at their snapshot marker's end")

    d = s["duplicate"]
    if d.get("open_error") != "":
        problems.append(f"the endless stream (vb {d.get('vb')}, sid 1) was refused: {d}")
    elif not d.get("duplicate_error") or d.get("duplicate_status") != KEY_EEXISTS:
        problems.append(f"a second request for a live (vb, sid) was not refused with KEY_EEXISTS: {d}")
    elif d.get("close_error") != "":
        problems.append(f"CLOSE_STREAM with the sid failed: {d}")
    elif d.get("end_after_close") != "closed":
        problems.append(f"no STREAM_END 'closed' after CLOSE_STREAM with the sid: {d}")
    elif d.get("reopen_error") != "":
        problems.append(f"the closed (vb, sid) could not be opened again: {d}")
    assert not problems, "\n".join(problems[:30]) + f"\n--- sidstream stderr (tail) ---\n{tail}"


# ================================================================== raw

def read_msg(conn: mcbin.Conn) -> Tuple[int, int, int, bytes, bytes, bytes, bytes, int]:
    """(magic, opcode, status or vbucket, framing, extras, key, value, opaque) of the next
    packet: a response (0x81/0x18) or a producer message (0x80, or 0x08 with frame infos).
    DCP_NOOPs are skipped (none is due within the 180 s interval anyway)."""
    while True:
        msg = read_packet(conn)
        if not (msg[0] in (mcbin.REQ, mcbin.ALT_REQ) and msg[1] == OP_DCP_NOOP):
            return msg


def read_packet(conn: mcbin.Conn) -> Tuple[int, int, int, bytes, bytes, bytes, bytes, int]:
    while len(conn.buf) < mcbin.HEADER_LEN:
        conn._fill()
    h = bytes(conn.buf[:mcbin.HEADER_LEN])
    magic = h[0]
    if magic in (mcbin.REQ, mcbin.RES):
        _, op, klen, elen, _dt, word, blen, opaque, _cas = struct.unpack(">BBHBBHIIQ", h)
        flen = 0
    elif magic in (mcbin.ALT_REQ, mcbin.ALT_RES):
        _, op, flen, klen, elen, _dt, word, blen, opaque, _cas = struct.unpack(">BBBBBBHIIQ", h)
    else:
        raise mcbin.ProtocolError(f"bad magic in {h.hex()}")
    while len(conn.buf) < mcbin.HEADER_LEN + blen:
        conn._fill()
    body = bytes(conn.buf[mcbin.HEADER_LEN:mcbin.HEADER_LEN + blen])
    del conn.buf[:mcbin.HEADER_LEN + blen]
    a, b, c = flen, flen + elen, flen + elen + klen
    return magic, op, word, body[:a], body[a:b], body[b:c], body[c:], opaque


def leb128(key: bytes) -> Tuple[int, bytes]:
    """(collection id, key) of a collection-prefixed key."""
    cid, shift = 0, 0
    for i, byte in enumerate(key):
        cid |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return cid, key[i + 1:]
    raise mcbin.ProtocolError(f"unterminated leb128 prefix in {key!r}")


def answer(conn: mcbin.Conn, opaque: int, op: int) -> int:
    """The status of the response to (op, opaque), skipping producer messages before it."""
    while True:
        magic, got, word, *_rest, o = read_msg(conn)
        if magic in (mcbin.RES, mcbin.ALT_RES) and got == op and o == opaque:
            return word


def stream_req(conn: mcbin.Conn, vb: int, value: dict, *, start: int = 0, end: int = FOREVER) -> int:
    opaque = conn.next_opaque()
    extras = struct.pack(">IIQQQQQ", 0, 0, start, end, 0, 0, 0)
    conn.send(mcbin.encode(OP_DCP_STREAM_REQ, value=json.dumps(value).encode() if value else b"",
                           extras=extras, vb=vb, opaque=opaque))
    return opaque


def dcp_producer(port: int, name: str, *, stream_ids: bool) -> mcbin.Conn:
    conn = kv_connect(port, USERNAME, PASSWORD, features=(
        mcbin.FEATURE_ALT_REQUEST, mcbin.FEATURE_COLLECTIONS))
    r = conn.call(OP_DCP_OPEN, key=name.encode(), extras=struct.pack(">II", 0, 1))
    assert r.status == SUCCESS, r
    # Noops are required for stream filters (as on Couchbase); gocbcore sends the same.
    controls = [("enable_noop", "true"), ("set_noop_interval", "180"),
                ("send_stream_end_on_client_close_stream", "true")]
    if stream_ids:
        controls.append(("enable_stream_id", "true"))
    for k, v in controls:
        r = conn.call(OP_DCP_CONTROL, key=k.encode(), value=v.encode())
        assert r.status == SUCCESS, (k, r)
    return conn


@pytest.mark.timeout(120)
def test_raw_stream_ids(sluice_factory):
    srv, airline, hotel = bucket_with_two_collections(sluice_factory)
    with kv_connect(srv.kv_port, USERNAME, PASSWORD) as conn:
        high = all_vb_seqnos(conn)
    vb = vbucket_of(b"k1", VBUCKETS)        # holds k1 of both collections
    sid_frame = {sid: frame_info(FRAME_STREAM_ID, struct.pack(">H", sid)) for sid in (7, 300)}

    with dcp_producer(srv.kv_port, "sid-raw:on", stream_ids=True) as c:
        # With stream ids on, a request must name one (DCP_STREAM_ID_INVALID, as Couchbase
        # answers; gocbcore maps it to ErrDCPStreamIDInvalid).
        st = answer(c, stream_req(c, vb, {"collections": [f"{airline:x}"]}), OP_DCP_STREAM_REQ)
        assert st == DCP_STREAM_ID_INVALID, f"stream request without a sid: status 0x{st:02x}"
        # Two streams of one vbucket (up to its high seqno), told apart by their sid.
        o7 = stream_req(c, vb, {"sid": 7, "collections": [f"{airline:x}"]}, end=high[vb])
        o300 = stream_req(c, vb, {"sid": 300, "collections": [f"{hotel:x}"]}, end=high[vb])
        sids = {o7: 7, o300: 300}
        ended: Dict[int, int] = {}
        keys: Dict[int, set] = {7: set(), 300: set()}
        position = {7: 0, 300: 0}       # the seqno of the last item, event or SEQNO_ADVANCED
        deadline = time.monotonic() + 30
        while len(ended) < 2:
            assert time.monotonic() < deadline, f"streams not ended: {ended}"
            magic, op, word, framing, extras, key, _v, opaque = read_msg(c)
            if magic in (mcbin.RES, mcbin.ALT_RES):
                assert op == OP_DCP_STREAM_REQ and word == SUCCESS, (op, word, opaque)
                continue
            sid = sids.get(opaque)
            assert sid is not None, f"message 0x{op:02x} with an unknown opaque {opaque}"
            # Every message of a sid stream is an alt request with exactly the sid frame.
            assert (magic, framing) == (mcbin.ALT_REQ, sid_frame[sid]), \
                f"sid {sid}: message 0x{op:02x} magic 0x{magic:02x} framing {framing.hex()}"
            assert word == vb, (op, word)
            if op in (OP_DCP_MUTATION, OP_DCP_DELETION, OP_DCP_SYSTEM_EVENT, OP_DCP_SEQNO_ADVANCED):
                # Their extras start with the seqno (a SEQNO_ADVANCED's are only that).
                assert op != OP_DCP_SEQNO_ADVANCED or len(extras) == 8, extras.hex()
                seqno = struct.unpack(">Q", extras[:8])[0]
                assert seqno > position[sid], f"sid {sid}: 0x{op:02x} seqno {seqno} after {position[sid]}"
                position[sid] = seqno
            if op in (OP_DCP_MUTATION, OP_DCP_DELETION):
                keys[sid].add(key)
            elif op == OP_DCP_STREAM_END:
                assert struct.unpack(">I", extras) == (0,), f"sid {sid}: end reason {extras.hex()}"
                ended[sid] = 1
        # Both reached the end seqno: the one whose last seqno is not its own through a
        # SEQNO_ADVANCED (the vbucket's last write is a default-collection document or one of
        # the two collections').
        assert position == {7: high[vb], 300: high[vb]}, (position, high[vb])
        # Keys carry their collection as a leb128 prefix: each stream only its own, k1 in both.
        assert {leb128(k)[0] for k in keys[7]} == {airline}, keys[7]
        assert {leb128(k)[0] for k in keys[300]} == {hotel}, keys[300]
        assert b"k1" in {leb128(k)[1] for k in keys[7]} & {leb128(k)[1] for k in keys[300]}

        # A live (vb, sid) cannot be asked for again; CLOSE_STREAM must name the sid.
        o = stream_req(c, vb, {"sid": 7, "collections": [f"{airline:x}"]})
        assert answer(c, o, OP_DCP_STREAM_REQ) == SUCCESS
        assert answer(c, stream_req(c, vb, {"sid": 7}), OP_DCP_STREAM_REQ) == KEY_EEXISTS
        close = c.next_opaque()
        c.send(mcbin.encode(OP_DCP_CLOSE_STREAM, vb=vb, opaque=close))
        st = answer(c, close, OP_DCP_CLOSE_STREAM)
        assert st == DCP_STREAM_ID_INVALID, f"CLOSE_STREAM without a sid: status 0x{st:02x}"
        close = c.next_opaque()
        c.send(mcbin.encode(OP_DCP_CLOSE_STREAM, vb=vb, opaque=close, magic=mcbin.ALT_REQ,
                            framing=sid_frame[7]))
        # The STREAM_END (closed) may come before or after the close's response.
        got_end = got_close = False
        while not (got_end and got_close):
            magic, op, word, framing, extras, *_r, opaque = read_msg(c)
            if magic in (mcbin.RES, mcbin.ALT_RES) and opaque == close:
                assert (op, word) == (OP_DCP_CLOSE_STREAM, SUCCESS), (op, word)
                got_close = True
            elif op == OP_DCP_STREAM_END and opaque == o:
                assert (magic, framing) == (mcbin.ALT_REQ, sid_frame[7]), (magic, framing.hex())
                assert struct.unpack(">I", extras) == (1,), f"end reason {extras.hex()}"
                got_end = True

    # Without enable_stream_id a request naming a sid is refused.
    with dcp_producer(srv.kv_port, "sid-raw:off", stream_ids=False) as c:
        st = answer(c, stream_req(c, vb, {"sid": 7}), OP_DCP_STREAM_REQ)
        assert st == DCP_STREAM_ID_INVALID, f"a sid without enable_stream_id: status 0x{st:02x}"
