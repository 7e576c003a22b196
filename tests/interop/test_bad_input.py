"""Bad input over real sockets, on the KV port and on the memcached port.

One server for the module (couchbase bucket, 64 vbuckets, --max-item-bytes 1 MiB). After
every test the server must still be alive: its process runs, GET /health answers 200, new
connections on both ports work, and a sentinel document stored at the start is unchanged
(value, flags and CAS).

Framing errors close the connection (unknown magic, body length shorter than
extras + key, body length over the 30 MiB packet limit: closed on the header, before the
body is sent). Request errors answer a status and keep the connection usable: 251-byte
key -> EINVAL, value over --max-item-bytes -> E2BIG (store unchanged), unknown opcode ->
UNKNOWN_COMMAND, SET with 7 bytes of extras -> EINVAL. KV-port session rules: data before
SASL -> EACCESS, wrong PLAIN password -> AUTH_ERROR then the right one works on the same
connection, unknown bucket -> KEY_ENOENT, GET before SELECT_BUCKET -> NO_BUCKET. Clients
that vanish mid-packet or mid-pipeline leave the server unaffected. 2000 seeded random
packets with valid headers get only well-formed responses (or a clean close).
"""

from __future__ import annotations

import os
import random
import socket
import struct
import time
from typing import List, Tuple

import pytest

from conftest import BUCKET, PASSWORD, USERNAME
from mcbin import (ALT_REQ, AUTH_ERROR, E2BIG, EACCESS, EINVAL, KEY_ENOENT, NO_BUCKET, OP_GET,
                   OP_GETK, OP_NOOP, OP_SET, OP_VERSION, REQ, SUCCESS, UNKNOWN_COMMAND, Conn,
                   ConnectionClosed, ProtocolError, encode, kv_connect, set_extras, vbucket_of)

VBUCKETS = 64
MAX_ITEM = 1 << 20
PACKET_MAX = 30 * 1024 * 1024
SENTINEL_KEY = b"bad-input-sentinel"
SENTINEL_VALUE = b"sentinel value \x00\xff" * 10
SENTINEL_FLAGS = 0xA1B2C3D4
CLOSE_TIMEOUT_S = 5.0

PORTS = ["kv", "memcached"]


@pytest.fixture(scope="module")
def srv(sluice_module_factory):
    s = sluice_module_factory(bucket_type="couchbase", vbuckets=VBUCKETS,
                              extra_args=("--max-item-bytes", str(MAX_ITEM)))
    with data_conn(s, "memcached") as c:
        r = c.set(SENTINEL_KEY, SENTINEL_VALUE, flags=SENTINEL_FLAGS)
        assert r.status == SUCCESS, r
        s.sentinel_cas = r.cas
    return s


def data_conn(srv, port: str) -> Conn:
    """A ready-to-use data connection: KV (HELLO, PLAIN, SELECT_BUCKET) or memcached."""
    if port == "kv":
        return kv_connect(srv.kv_port, USERNAME, PASSWORD, features=())
    c = Conn(srv.memcached_port)
    return c


def vb(key: bytes) -> int:
    return vbucket_of(key, VBUCKETS)


def assert_alive(srv) -> None:
    assert srv.is_running(), f"server exited with {srv.returncode}"
    assert srv.health() == 200
    for port in PORTS:
        with data_conn(srv, port) as c:
            r = c.call(OP_VERSION)
            assert r.status == SUCCESS and r.value[:1].isdigit(), r
            r = c.get(SENTINEL_KEY, vb=vb(SENTINEL_KEY))
            assert (r.status, r.value, r.flags(), r.cas) == (
                SUCCESS, SENTINEL_VALUE, SENTINEL_FLAGS, srv.sentinel_cas), (
                f"sentinel document changed on the {port} port: {r}")


@pytest.fixture
def alive_after(srv):
    yield srv
    assert_alive(srv)


def raw_conn(srv, port: str) -> Conn:
    """A bare TCP connection (no HELLO/auth) to the given port."""
    return Conn(srv.kv_port if port == "kv" else srv.memcached_port)


def expect_closed(c: Conn, what: str) -> None:
    try:
        closed = c.is_closed_by_peer(CLOSE_TIMEOUT_S)
    except ProtocolError as e:
        pytest.fail(f"{what}: expected the connection to be closed, got {e}")
    assert closed, f"{what}: the connection is still open after {CLOSE_TIMEOUT_S}s"


# ------------------------------------------------------------------ framing errors

@pytest.mark.parametrize("port", PORTS)
@pytest.mark.parametrize("magic", [0x00, 0x42, 0x81, 0xFF])
def test_unknown_magic_closes(alive_after, port, magic):
    # 0x81 is a response magic: not a request either.
    with raw_conn(alive_after, port) as c:
        pkt = bytearray(encode(OP_NOOP))
        pkt[0] = magic
        c.send(bytes(pkt))
        expect_closed(c, f"magic 0x{magic:02x} on the {port} port")


@pytest.mark.parametrize("port", PORTS)
def test_unknown_magic_alone_closes(alive_after, port):
    """A single bad byte is enough: the server need not wait for a whole header."""
    with raw_conn(alive_after, port) as c:
        c.send(b"\x42")
        expect_closed(c, f"lone byte 0x42 on the {port} port")


@pytest.mark.parametrize("port", PORTS)
@pytest.mark.parametrize("case", ["key>body", "extras+key>body", "alt framing>body"])
def test_body_shorter_than_parts_closes(alive_after, port, case):
    with raw_conn(alive_after, port) as c:
        if case == "key>body":
            pkt = encode(OP_GET, b"abcdef", body_len=3)[:24] + b"abc"
        elif case == "extras+key>body":
            pkt = encode(OP_SET, b"key", b"", set_extras(), body_len=10)[:24] + b"\0" * 10
        else:
            pkt = encode(OP_GET, b"k", framing=b"\x00\x00\x00", magic=ALT_REQ, body_len=2)
            pkt = pkt[:24] + b"\0\0"
        c.send(pkt)
        expect_closed(c, f"{case} on the {port} port")


@pytest.mark.parametrize("port", PORTS)
@pytest.mark.parametrize("body_len", [PACKET_MAX + 1, 31 * 1024 * 1024, 0xFFFFFFFF])
def test_body_over_30mib_closed_on_the_header(alive_after, port, body_len):
    """Closed as soon as the header arrives: the body is never sent, so a server waiting to
    buffer it would keep the connection open."""
    with raw_conn(alive_after, port) as c:
        c.send(encode(OP_SET, b"big", b"", set_extras(), body_len=body_len)[:24])
        t0 = time.monotonic()
        expect_closed(c, f"body length {body_len} on the {port} port")
        assert time.monotonic() - t0 < CLOSE_TIMEOUT_S


@pytest.mark.parametrize("port", PORTS)
def test_body_over_30mib_while_streaming_closed(alive_after, port):
    """Sending the first MiB of an oversized body: the server has already hung up."""
    with raw_conn(alive_after, port) as c:
        c.send(encode(OP_SET, b"big", b"", set_extras(), body_len=PACKET_MAX + 1)[:24])
        deadline = time.monotonic() + CLOSE_TIMEOUT_S
        sent = 0
        try:
            while sent < (1 << 20) and time.monotonic() < deadline:
                c.sock.sendall(b"\0" * 65536)
                sent += 65536
        except OSError:
            pass  # reset by the server: what we expect
        expect_closed(c, f"oversized body streamed on the {port} port")


# ------------------------------------------------------------------ request errors

@pytest.mark.parametrize("port", PORTS)
def test_key_251_bytes_einval_connection_usable(alive_after, port):
    key = b"k" * 251
    with data_conn(alive_after, port) as c:
        assert c.get(key, vb=vb(key)).status == EINVAL
        assert c.set(key, b"v", vb=vb(key)).status == EINVAL
        # 250 is the limit and works; the connection is still usable.
        k250 = b"q" * 249 + port[0].encode()
        assert c.set(k250, b"v250", vb=vb(k250)).status == SUCCESS
        r = c.get(k250, vb=vb(k250))
        assert (r.status, r.value) == (SUCCESS, b"v250")


@pytest.mark.parametrize("port", PORTS)
def test_value_over_max_item_e2big_store_unchanged(alive_after, port):
    key = b"e2big-" + port.encode()
    with data_conn(alive_after, port) as c:
        assert c.set(key, b"original", vb=vb(key)).status == SUCCESS
        before = c.get(key, vb=vb(key))
        r = c.set(key, b"x" * (MAX_ITEM + 1), vb=vb(key))
        assert r.status == E2BIG, r
        after = c.get(key, vb=vb(key))
        assert (after.status, after.value, after.cas) == (SUCCESS, b"original", before.cas)
        # A new key over the limit is not created either.
        r = c.set(key + b"-new", b"y" * (MAX_ITEM + 4096), vb=vb(key + b"-new"))
        assert r.status == E2BIG, r
        assert c.get(key + b"-new", vb=vb(key + b"-new")).status == KEY_ENOENT
        # Exactly the limit is accepted.
        r = c.set(key, b"z" * MAX_ITEM, vb=vb(key))
        assert r.status == SUCCESS, r
        r = c.get(key, vb=vb(key))
        assert r.status == SUCCESS and r.value == b"z" * MAX_ITEM


@pytest.mark.parametrize("port", PORTS)
@pytest.mark.parametrize("opcode", [0xEE, 0x70, 0xFD])
def test_unknown_opcode(alive_after, port, opcode):
    with data_conn(alive_after, port) as c:
        r = c.call(opcode, b"somekey", b"value")
        assert r.status == UNKNOWN_COMMAND, r
        assert c.call(OP_NOOP).status == SUCCESS


@pytest.mark.parametrize("port", PORTS)
@pytest.mark.parametrize("elen", [0, 4, 7, 9])
def test_set_with_wrong_extras_length_einval(alive_after, port, elen):
    key = b"extras-%d-%s" % (elen, port.encode())
    with data_conn(alive_after, port) as c:
        r = c.call(OP_SET, key, b"value", b"\0" * elen, vb=vb(key))
        assert r.status == EINVAL, r
        assert c.get(key, vb=vb(key)).status == KEY_ENOENT
        assert c.call(OP_NOOP).status == SUCCESS


# ------------------------------------------------------------------ KV-port session rules

@pytest.mark.parametrize("opcode,extras,value", [
    (OP_GET, b"", b""),
    (OP_SET, set_extras(), b"value"),
    (OP_GETK, b"", b""),
])
def test_kv_data_before_auth_eaccess(alive_after, opcode, extras, value):
    key = b"before-auth-%02x" % opcode
    with raw_conn(alive_after, "kv") as c:
        r = c.call(opcode, key, value, extras, vb=vb(key))
        assert r.status == EACCESS, r
        # The connection stays usable and the SET did not happen.
        assert c.auth_plain(USERNAME, PASSWORD).status == SUCCESS
        assert c.select_bucket(BUCKET).status == SUCCESS
        assert c.get(key, vb=vb(key)).status == KEY_ENOENT


def test_kv_plain_wrong_password_then_right(alive_after):
    with raw_conn(alive_after, "kv") as c:
        r = c.auth_plain(USERNAME, PASSWORD + "x")
        assert r.status == AUTH_ERROR, r
        r = c.auth_plain("nobody", PASSWORD)
        assert r.status == AUTH_ERROR, r
        # Still not authenticated.
        assert c.get(SENTINEL_KEY, vb=vb(SENTINEL_KEY)).status == EACCESS
        r = c.auth_plain(USERNAME, PASSWORD)
        assert r.status == SUCCESS, r
        assert c.select_bucket(BUCKET).status == SUCCESS
        r = c.get(SENTINEL_KEY, vb=vb(SENTINEL_KEY))
        assert (r.status, r.value) == (SUCCESS, SENTINEL_VALUE)


def test_kv_select_unknown_bucket(alive_after):
    with raw_conn(alive_after, "kv") as c:
        assert c.auth_plain(USERNAME, PASSWORD).status == SUCCESS
        r = c.select_bucket("no-such-bucket")
        assert r.status == KEY_ENOENT, r
        # No bucket was selected by the failed attempt.
        assert c.get(SENTINEL_KEY, vb=vb(SENTINEL_KEY)).status == NO_BUCKET
        assert c.select_bucket(BUCKET).status == SUCCESS
        assert c.get(SENTINEL_KEY, vb=vb(SENTINEL_KEY)).status == SUCCESS


def test_kv_get_before_select_bucket(alive_after):
    with raw_conn(alive_after, "kv") as c:
        assert c.auth_plain(USERNAME, PASSWORD).status == SUCCESS
        r = c.get(SENTINEL_KEY, vb=vb(SENTINEL_KEY))
        assert r.status == NO_BUCKET, r
        r = c.set(b"nobucket", b"v", vb=vb(b"nobucket"))
        assert r.status == NO_BUCKET, r


# ------------------------------------------------------------------ vanishing clients

@pytest.mark.parametrize("port", PORTS)
@pytest.mark.parametrize("cut", [1, 10, 23, 24, 40])
def test_half_packet_then_vanish(alive_after, port, cut):
    key = b"half-packet"
    pkt = encode(OP_SET, key, b"v" * 100, set_extras(), vb=vb(key))
    addr = ("127.0.0.1", alive_after.kv_port if port == "kv" else alive_after.memcached_port)
    for _ in range(3):
        s = socket.create_connection(addr, timeout=5)
        s.sendall(pkt[:cut])
        s.close()
    # Abortive close (RST) too.
    s = socket.create_connection(addr, timeout=5)
    s.sendall(pkt[:cut])
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


@pytest.mark.parametrize("port", PORTS)
def test_disconnect_mid_pipeline(alive_after, port):
    """Thousands of pipelined requests, the connection dropped mid-batch (mid-packet, and
    with the answers unread), while another client keeps working."""
    other = data_conn(alive_after, port)
    try:
        for round_ in range(5):
            c = data_conn(alive_after, port)
            pkts = b"".join(
                encode(OP_SET, b"pipe-%d-%d" % (round_, i), b"v" * 200, set_extras(),
                       vb=vb(b"pipe-%d-%d" % (round_, i)), opaque=i)
                + encode(OP_GET, b"pipe-%d-%d" % (round_, i), vb=vb(b"pipe-%d-%d" % (round_, i)),
                         opaque=i)
                for i in range(2000))
            cut = len(pkts) * (round_ + 1) // 6 + 7  # inside some packet
            try:
                c.sock.sendall(pkts[:cut])
                if round_ % 2:
                    c.recv()  # read one answer, leave the rest
            except OSError:
                pass
            if round_ == 4:
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()
            r = other.get(SENTINEL_KEY, vb=vb(SENTINEL_KEY))
            assert (r.status, r.value) == (SUCCESS, SENTINEL_VALUE), r
    finally:
        other.close()


def rss_mib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("port", PORTS)
def test_stalled_reader_of_huge_pipeline_is_bounded(alive_after, port):
    """3 GiB of answers requested and never read: the server stops reading that client
    instead of buffering the answers, and other clients are served meanwhile."""
    key = b"stalled-reader-" + port.encode()
    srv = alive_after
    with data_conn(srv, port) as other:
        assert other.set(key, b"R" * MAX_ITEM, vb=vb(key)).status == SUCCESS
        before = rss_mib(srv.pid)
        stalled = data_conn(srv, port)
        try:
            stalled.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stalled.sock.settimeout(5)
            try:
                stalled.sock.sendall(b"".join(encode(OP_GET, key, vb=vb(key), opaque=i)
                                              for i in range(3000)))
            except socket.timeout:
                pass  # the server stopped reading us: fine
            time.sleep(1.0)
            grown = rss_mib(srv.pid) - before
            t0 = time.monotonic()
            r = other.get(key, vb=vb(key))
            latency = time.monotonic() - t0
            assert r.status == SUCCESS and len(r.value) == MAX_ITEM
            assert latency < 2.0, f"another client waited {latency:.1f}s"
            assert grown < 256, f"server RSS grew by {grown} MiB for one stalled reader"
        finally:
            stalled.close()


# ------------------------------------------------------------------ random packets

KNOWN_OPCODES = (list(range(0x00, 0x20)) + [0x20, 0x21, 0x22, 0x3d, 0x3e, 0x3f, 0x48, 0x83,
                 0x87, 0x89, 0x91, 0x92, 0x94, 0x95, 0x96, 0xA0, 0xA1, 0xA2, 0xA8, 0xB5, 0xB7,
                 0xB9, 0xBA, 0xBB, 0xFE] + list(range(0x50, 0x68)))
# FLUSH would empty the store (the data check below would then mean nothing);
# SEQNO_PERSISTENCE of a seqno never reached waits 30 s by design.
EXCLUDED = {0x08, 0x18, 0xB7}
# opcode -> (extras length, key, value) of a well-formed request.
PLAUSIBLE = {op: (0, True, False) for op in (0x00, 0x09, 0x0C, 0x0D, 0x04, 0x14, 0x83, 0xA0)}
PLAUSIBLE.update({op: (8, True, True) for op in (0x01, 0x11, 0x02, 0x12, 0x03, 0x13)})
PLAUSIBLE.update({op: (20, True, False) for op in (0x05, 0x15, 0x06, 0x16)})
PLAUSIBLE.update({op: (0, True, True) for op in (0x0E, 0x19, 0x0F, 0x1A)})
PLAUSIBLE.update({op: (4, True, False) for op in (0x1C, 0x1D, 0x1E, 0x94)})
PLAUSIBLE.update({op: (0, False, False) for op in (0x0A, 0x0B, 0x20, 0x87, 0x96, 0xB5, 0x48,
                                                   0x3E)})
PLAUSIBLE.update({0x10: (0, True, False), 0x1F: (0, True, True), 0x91: (0, False, True),
                  0xFE: (0, False, True), 0x1B: (4, False, False)})
FUZZ_PACKETS = 2000
FUZZ_SEED = int(os.environ.get("BAD_INPUT_SEED", "20261122"))


def random_packet(rng: random.Random, opaque: int) -> Tuple[int, bytes]:
    while True:
        op = rng.choice(KNOWN_OPCODES) if rng.random() < 0.7 else rng.randrange(256)
        if op not in EXCLUDED:
            break
    if op in PLAUSIBLE and rng.random() < 0.6:
        # Mostly well-shaped for its opcode, so requests also get past validation.
        elen, has_key, has_value = PLAUSIBLE[op]
        klen = rng.randrange(1, 40) if has_key else 0
        vlen = rng.choice([0, 2, 8, rng.randrange(200)]) if has_value else 0
    else:
        elen = rng.choice([0, 0, 0, 1, 4, 8, 8, 16, 20, 24, rng.randrange(64)])
        klen = rng.choice([0, 0, rng.randrange(1, 16), rng.randrange(1, 64), 250, 251,
                           rng.randrange(300)])
        vlen = rng.choice([0, 0, 2, 8, rng.randrange(64), rng.randrange(4096)])
    extras = bytes(rng.getrandbits(8) for _ in range(elen))
    # Never one of the stored keys: garbage keys start with a byte our keys never use.
    key = (b"\xfe" + bytes(rng.getrandbits(8) for _ in range(klen - 1))) if klen else b""
    value = rng.randbytes(vlen)
    datatype = 0 if rng.random() < 0.8 else rng.choice([1, 2, 3, 4, 7, rng.randrange(256)])
    vbucket = rng.choice([0, vbucket_of(key, VBUCKETS), rng.randrange(VBUCKETS),
                          rng.randrange(65536)])
    cas = rng.choice([0, 0, rng.getrandbits(64)])
    if rng.random() < 0.25:
        # Flexible framing: random frame infos (valid or not), key length <= 255.
        key = key[:255]
        framing = rng.choice([b"\x11\x01", b"\x13\x01\x00\x64", b"\x50", b"\x00",
                              rng.randbytes(rng.randrange(1, 8))])
        return op, encode(op, key, value, extras, vb=vbucket, opaque=opaque, cas=cas,
                          datatype=datatype, magic=ALT_REQ, framing=framing)
    return op, encode(op, key, value, extras, vb=vbucket, opaque=opaque, cas=cas,
                      datatype=datatype, magic=REQ)


@pytest.mark.parametrize("port", PORTS)
def test_random_valid_header_packets(alive_after, port):
    """Each random packet is followed by a NOOP fence: every byte before the fence's answer
    must be well-formed responses to that packet (its opcode and opaque), or the server
    closes the connection cleanly (between responses). Then the stored data is unchanged."""
    srv = alive_after
    rng = random.Random(FUZZ_SEED + (0 if port == "kv" else 1))
    print(f"\nrandom packets seed: {FUZZ_SEED} (BAD_INPUT_SEED)")
    stored: List[Tuple[bytes, bytes, int]] = []
    with data_conn(srv, port) as c:
        for i in range(50):
            k = b"fuzz-keep-%s-%02d" % (port.encode(), i)
            r = c.set(k, b"keep %d" % i * (i + 1), flags=i, vb=vb(k))
            assert r.status == SUCCESS
            stored.append((k, b"keep %d" % i * (i + 1), r.cas))
    statuses = {}
    closes: List[Tuple[int, int]] = []
    c = data_conn(srv, port)
    deadline = time.monotonic() + 120
    try:
        for i in range(FUZZ_PACKETS):
            assert time.monotonic() < deadline, f"random packets: out of time at #{i}"
            opaque = 0x10000 + i
            fence = 0xF0000000 + i
            op, pkt = random_packet(rng, opaque)
            desc = f"packet #{i} op 0x{op:02x} ({pkt[:24].hex()} + {len(pkt) - 24} body bytes)"
            try:
                c.send(pkt + encode(OP_NOOP, opaque=fence))
            except OSError as e:
                pytest.fail(f"{desc}: send failed ({e!r}): the server closed before it "
                            f"could have seen this packet")
            fenced = False
            closed = False
            while not fenced:
                try:
                    r = c.recv()
                except ConnectionClosed:
                    closed = True
                    break
                except (ConnectionResetError, BrokenPipeError):
                    if c.buf:
                        pytest.fail(f"{desc}: reset inside a response: {bytes(c.buf).hex()}")
                    closed = True
                    break
                except socket.timeout:
                    pytest.fail(f"{desc}: no answer to the NOOP fence within {c.timeout}s")
                except ProtocolError as e:
                    pytest.fail(f"{desc}: malformed response: {e}")
                if r.opaque == fence:
                    assert r.opcode == OP_NOOP and r.status == SUCCESS, f"{desc}: fence {r}"
                    fenced = True
                else:
                    assert r.opaque == opaque and r.opcode == op, (
                        f"{desc}: answer with the wrong opaque/opcode: {r}")
                    statuses[r.status] = statuses.get(r.status, 0) + 1
            if closed:
                closes.append((i, op))
            if closed or op in (0x21, 0x22, 0x89):
                # Also a fresh session after SASL / SELECT_BUCKET packets, which may have
                # logged the connection out or unselected the bucket.
                c.close()
                c = data_conn(srv, port)
    finally:
        c.close()
    print(f"{port}: {FUZZ_PACKETS} random packets: statuses "
          f"{ {f'0x{k:02x}': v for k, v in sorted(statuses.items())} }, "
          f"{len(closes)} closes (opcodes {sorted({f'0x{o:02x}' for _, o in closes})})")
    assert srv.is_running()
    with data_conn(srv, port) as c:
        for k, v, cas in stored:
            r = c.get(k, vb=vb(k))
            assert (r.status, r.value, r.cas) == (SUCCESS, v, cas), (
                f"{k!r} changed by the random packets: {r}")
