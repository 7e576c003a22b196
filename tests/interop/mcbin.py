"""A small raw memcached-binary (Couchbase KV) client for wire-level tests. Stdlib only.

Everything is explicit and byte-level on purpose: the tests built on it check the
server's framing, so this module does no retries and hides no errors. It only
adds ETMPFAIL backoff where a caller asks for it (``retry_tmpfail``).

    c = Conn(port)                       # 127.0.0.1, blocking socket with a timeout
    c.hello([FEATURE_MUTATION_SEQNO])    # -> acked feature codes
    c.auth_plain(USER, PASSWORD); c.select_bucket("default")   # KV port only
    r = c.call(OP_GET, key=b"k")         # one request, one Response
    c.send(encode(...)); c.recv()        # raw
    stats = c.stat("vbucket-seqno")      # {name: value}
    obs = c.observe_seqno(vb, uuid)      # Observed(...)

Key -> vbucket: ``vbucket_of(key, n)`` (CRC32, as the SDKs hash).
"""

from __future__ import annotations

import socket
import struct
import time
import zlib
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

HOST = "127.0.0.1"
HEADER_LEN = 24

# ------------------------------------------------------------------ magic bytes
REQ = 0x80
RES = 0x81
ALT_REQ = 0x08
ALT_RES = 0x18

# ------------------------------------------------------------------ opcodes
OP_GET = 0x00
OP_SET = 0x01
OP_ADD = 0x02
OP_REPLACE = 0x03
OP_DELETE = 0x04
OP_INCREMENT = 0x05
OP_DECREMENT = 0x06
OP_QUIT = 0x07
OP_FLUSH = 0x08
OP_GETQ = 0x09
OP_NOOP = 0x0A
OP_VERSION = 0x0B
OP_GETK = 0x0C
OP_GETKQ = 0x0D
OP_APPEND = 0x0E
OP_PREPEND = 0x0F
OP_STAT = 0x10
OP_SETQ = 0x11
OP_ADDQ = 0x12
OP_REPLACEQ = 0x13
OP_DELETEQ = 0x14
OP_INCREMENTQ = 0x15
OP_DECREMENTQ = 0x16
OP_QUITQ = 0x17
OP_APPENDQ = 0x19
OP_PREPENDQ = 0x1A
OP_TOUCH = 0x1C
OP_GAT = 0x1D
OP_HELLO = 0x1F
OP_SASL_LIST_MECHS = 0x20
OP_SASL_AUTH = 0x21
OP_SASL_STEP = 0x22
OP_GET_ALL_VB_SEQNOS = 0x48
OP_LIST_BUCKETS = 0x87
OP_SELECT_BUCKET = 0x89
OP_OBSERVE_SEQNO = 0x91
OP_GET_FAILOVER_LOG = 0x96
OP_GET_CLUSTER_CONFIG = 0xB5
OP_GET_ERROR_MAP = 0xFE

# ------------------------------------------------------------------ status codes
SUCCESS = 0x00
KEY_ENOENT = 0x01
KEY_EEXISTS = 0x02
E2BIG = 0x03
EINVAL = 0x04
NOT_STORED = 0x05
DELTA_BADVAL = 0x06
NOT_MY_VBUCKET = 0x07
NO_BUCKET = 0x08
AUTH_ERROR = 0x20
AUTH_CONTINUE = 0x21
EACCESS = 0x24
UNKNOWN_FRAME_INFO = 0x80
UNKNOWN_COMMAND = 0x81
ENOMEM = 0x82
NOT_SUPPORTED = 0x83
EINTERNAL = 0x84
EBUSY = 0x85
ETMPFAIL = 0x86

# ------------------------------------------------------------------ HELLO features
FEATURE_TCP_NODELAY = 0x03
FEATURE_MUTATION_SEQNO = 0x04
FEATURE_XATTR = 0x06
FEATURE_XERROR = 0x07
FEATURE_SELECT_BUCKET = 0x08
FEATURE_SNAPPY = 0x0A
FEATURE_JSON = 0x0B
FEATURE_DUPLEX = 0x0C
FEATURE_CLUSTERMAP_NOTIF = 0x0D
FEATURE_UNORDERED = 0x0E
FEATURE_TRACING = 0x0F
FEATURE_ALT_REQUEST = 0x10
FEATURE_SYNC_REPLICATION = 0x11
FEATURE_COLLECTIONS = 0x12


class ProtocolError(Exception):
    """The peer sent something that is not a well-formed response."""


class ConnectionClosed(Exception):
    """The peer closed the connection (EOF) before a whole packet arrived."""


def vbucket_of(key: bytes, num_vbuckets: int) -> int:
    """Client-side key -> vBucket hash (CRC32, bits 16..30)."""
    return ((zlib.crc32(key) >> 16) & 0x7FFF) % num_vbuckets


def set_extras(flags: int = 0, expiry: int = 0) -> bytes:
    return struct.pack(">II", flags, expiry)


def frame_info(fid: int, data: bytes = b"") -> bytes:
    """One FrameInfo object (flexible framing extras), with nibble escapes."""
    out = bytearray()
    n = len(data)
    id_nib = fid if fid < 15 else 15
    len_nib = n if n < 15 else 15
    out.append((id_nib << 4) | len_nib)
    if fid >= 15:
        out.append(fid - 15)
    if n >= 15:
        out.append(n - 15)
    out += data
    return bytes(out)


def encode(opcode: int, key: bytes = b"", value: bytes = b"", extras: bytes = b"", *,
           vb: int = 0, opaque: int = 0, cas: int = 0, datatype: int = 0,
           magic: int = REQ, framing: bytes = b"", body_len: Optional[int] = None,
           key_len: Optional[int] = None, extras_len: Optional[int] = None) -> bytes:
    """One request packet. The *_len overrides let tests lie in the header."""
    klen = len(key) if key_len is None else key_len
    elen = len(extras) if extras_len is None else extras_len
    blen = (len(framing) + len(extras) + len(key) + len(value)) if body_len is None else body_len
    if magic == ALT_REQ:
        head = struct.pack(">BBBBBBHIIQ", magic, opcode, len(framing), klen, elen, datatype,
                           vb, blen, opaque, cas)
    else:
        head = struct.pack(">BBHBBHIIQ", magic, opcode, klen, elen, datatype, vb, blen,
                           opaque, cas)
    return head + framing + extras + key + value


@dataclass
class Response:
    magic: int
    opcode: int
    status: int
    opaque: int
    cas: int
    datatype: int
    framing: bytes
    extras: bytes
    key: bytes
    value: bytes

    def seqno_extras(self) -> Tuple[int, int]:
        """(vb_uuid, seqno) from a mutation response with MUTATION_SEQNO negotiated."""
        if len(self.extras) != 16:
            raise ProtocolError(f"expected 16 bytes of mutation extras, got {len(self.extras)}")
        return struct.unpack(">QQ", self.extras)

    def flags(self) -> int:
        return struct.unpack(">I", self.extras[:4])[0] if len(self.extras) >= 4 else 0

    def __repr__(self) -> str:
        v = self.value if len(self.value) <= 64 else self.value[:64] + b"..."
        return (f"Response(op=0x{self.opcode:02x}, status=0x{self.status:02x}, "
                f"opaque=0x{self.opaque:x}, cas={self.cas}, extras={self.extras.hex()}, "
                f"key={self.key!r}, value={v!r})")


def parse_header(h: bytes) -> Tuple[int, int, int, int, int, int, int, int, int, int]:
    """(magic, opcode, framing_len, key_len, extras_len, datatype, status, body_len, opaque, cas)
    of a response header; raises ProtocolError if it is not a response header."""
    magic = h[0]
    if magic == RES:
        _, op, klen, elen, dt, status, blen, opaque, cas = struct.unpack(">BBHBBHIIQ", h)
        flen = 0
    elif magic == ALT_RES:
        _, op, flen, klen, elen, dt, status, blen, opaque, cas = struct.unpack(">BBBBBBHIIQ", h)
    else:
        raise ProtocolError(f"bad response magic 0x{magic:02x} in header {h.hex()}")
    if flen + elen + klen > blen:
        raise ProtocolError(f"inconsistent response lengths in header {h.hex()}")
    return magic, op, flen, klen, elen, dt, status, blen, opaque, cas


def parse_response(buf: bytes) -> Tuple[Optional[Response], int]:
    """(Response, used) for the packet at the front of buf, or (None, 0) if incomplete."""
    if len(buf) < HEADER_LEN:
        return None, 0
    magic, op, flen, klen, elen, dt, status, blen, opaque, cas = parse_header(buf[:HEADER_LEN])
    total = HEADER_LEN + blen
    if len(buf) < total:
        return None, 0
    body = buf[HEADER_LEN:total]
    a, b, c = flen, flen + elen, flen + elen + klen
    return Response(magic, op, status, opaque, cas, dt, bytes(body[:a]), bytes(body[a:b]),
                    bytes(body[b:c]), bytes(body[c:])), total


@dataclass
class Observed:
    format: int
    vb: int
    vb_uuid: int
    persisted: int
    current: int
    old_uuid: Optional[int] = None
    old_seqno: Optional[int] = None


def parse_observe_seqno(value: bytes) -> Observed:
    if len(value) == 27 and value[0] == 0:
        fmt, vb, uuid, persisted, current = struct.unpack(">BHQQQ", value)
        return Observed(fmt, vb, uuid, persisted, current)
    if len(value) == 43 and value[0] == 1:
        fmt, vb, uuid, persisted, current, old_uuid, old_seqno = struct.unpack(">BHQQQQQ", value)
        return Observed(fmt, vb, uuid, persisted, current, old_uuid, old_seqno)
    raise ProtocolError(f"malformed OBSERVE_SEQNO value ({len(value)} bytes): {value.hex()}")


class Conn:
    """A blocking connection with a receive buffer. Every read has a timeout."""

    def __init__(self, port: int, host: str = HOST, timeout: float = 10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.buf = bytearray()
        self._opaque = 0

    # ------------------------------------------------------------ raw
    def next_opaque(self) -> int:
        self._opaque = (self._opaque + 1) & 0xFFFFFFFF
        return self._opaque

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionClosed(f"EOF with {len(self.buf)} buffered bytes")
        self.buf += chunk

    def recv(self) -> Response:
        """The next response packet (blocks up to the socket timeout per read)."""
        while True:
            resp, used = parse_response(self.buf)
            if resp is not None:
                del self.buf[:used]
                return resp
            self._fill()

    def recv_until_closed(self, timeout: float = 5.0) -> Tuple[List[Response], bool]:
        """Reads responses until EOF or `timeout` s of silence: (responses, closed).
        Raises ProtocolError on bytes that are not a well-formed response."""
        out: List[Response] = []
        self.sock.settimeout(timeout)
        try:
            while True:
                resp, used = parse_response(self.buf)
                if resp is not None:
                    del self.buf[:used]
                    out.append(resp)
                    continue
                try:
                    chunk = self.sock.recv(1 << 20)
                except socket.timeout:
                    return out, False
                except ConnectionResetError:
                    chunk = b""
                if not chunk:
                    if self.buf:
                        raise ProtocolError(f"EOF inside a response: {bytes(self.buf[:64]).hex()}")
                    return out, True
                self.buf += chunk
        finally:
            self.sock.settimeout(self.timeout)

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True if the peer closes (EOF/RST) within `timeout` s without sending anything."""
        resps, closed = self.recv_until_closed(timeout)
        if resps:
            raise ProtocolError(f"expected a close, got responses {resps}")
        return closed

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "Conn":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ one request
    def call(self, opcode: int, key: bytes = b"", value: bytes = b"", extras: bytes = b"",
             **kw) -> Response:
        """Send one (non-quiet) request, return its response; checks opcode and opaque."""
        opaque = kw.pop("opaque", None)
        if opaque is None:
            opaque = self.next_opaque()
        self.send(encode(opcode, key, value, extras, opaque=opaque, **kw))
        r = self.recv()
        if r.opaque != opaque or r.opcode != opcode:
            raise ProtocolError(f"response {r} does not match request op 0x{opcode:02x} "
                                f"opaque 0x{opaque:x}")
        return r

    def hello(self, features: Iterable[int], agent: bytes = b"sluice-interop") -> List[int]:
        feats = list(features)
        r = self.call(OP_HELLO, key=agent, value=b"".join(struct.pack(">H", f) for f in feats))
        if r.status != SUCCESS:
            raise ProtocolError(f"HELLO failed: {r}")
        if len(r.value) % 2:
            raise ProtocolError(f"HELLO value has odd length: {r}")
        return [struct.unpack(">H", r.value[i:i + 2])[0] for i in range(0, len(r.value), 2)]

    def auth_plain(self, user: str, password: str) -> Response:
        return self.call(OP_SASL_AUTH, key=b"PLAIN",
                         value=b"\0" + user.encode() + b"\0" + password.encode())

    def select_bucket(self, name: str) -> Response:
        return self.call(OP_SELECT_BUCKET, key=name.encode())

    def set(self, key: bytes, value: bytes, *, flags: int = 0, expiry: int = 0, vb: int = 0,
            cas: int = 0) -> Response:
        return self.call(OP_SET, key, value, set_extras(flags, expiry), vb=vb, cas=cas)

    def get(self, key: bytes, *, vb: int = 0) -> Response:
        return self.call(OP_GET, key, vb=vb)

    def stat(self, group: str = "") -> Dict[str, str]:
        """All pairs of a STAT group (until the empty terminator)."""
        opaque = self.next_opaque()
        self.send(encode(OP_STAT, key=group.encode(), opaque=opaque))
        out: Dict[str, str] = {}
        while True:
            r = self.recv()
            if r.opcode != OP_STAT or r.opaque != opaque:
                raise ProtocolError(f"unexpected packet in STAT stream: {r}")
            if r.status != SUCCESS:
                raise ProtocolError(f"STAT {group!r} failed: {r}")
            if not r.key and not r.value:
                return out
            out[r.key.decode()] = r.value.decode()

    def observe_seqno(self, vb: int, vb_uuid: int) -> Tuple[int, Optional[Observed]]:
        """(status, Observed or None)."""
        r = self.call(OP_OBSERVE_SEQNO, value=struct.pack(">Q", vb_uuid), vb=vb)
        if r.status != SUCCESS:
            return r.status, None
        obs = parse_observe_seqno(r.value)
        if obs.vb != vb:
            raise ProtocolError(f"OBSERVE_SEQNO for vb {vb} answered vb {obs.vb}")
        return r.status, obs

    def failover_log(self, vb: int) -> List[Tuple[int, int]]:
        r = self.call(OP_GET_FAILOVER_LOG, vb=vb)
        if r.status != SUCCESS or len(r.value) % 16:
            raise ProtocolError(f"GET_FAILOVER_LOG failed: {r}")
        return [struct.unpack(">QQ", r.value[i:i + 16]) for i in range(0, len(r.value), 16)]

    # ------------------------------------------------------------ pipelines
    def pipeline(self, packets: Sequence[bytes]) -> List[Response]:
        """Send non-quiet packets in one write and read exactly one response per packet."""
        self.send(b"".join(packets))
        return [self.recv() for _ in packets]

    def set_multi(self, items: Sequence[Tuple[bytes, bytes]], *, vbuckets: int = 0,
                  flags: int = 0) -> List[Response]:
        """Pipelined non-quiet SETs; responses in request order (opaque checked).
        With vbuckets > 0 the header carries the key's vbucket, else 0."""
        base = self.next_opaque()
        self._opaque = (base + len(items)) & 0xFFFFFFFF
        pkts = [encode(OP_SET, k, v, set_extras(flags), opaque=(base + i) & 0xFFFFFFFF,
                       vb=vbucket_of(k, vbuckets) if vbuckets else 0)
                for i, (k, v) in enumerate(items)]
        resps = self.pipeline(pkts)
        for i, r in enumerate(resps):
            if r.opaque != (base + i) & 0xFFFFFFFF or r.opcode != OP_SET:
                raise ProtocolError(f"pipelined SET #{i}: out-of-order response {r}")
        return resps

    def getkq_multi(self, keys: Sequence[bytes], *, vbuckets: int = 0
                    ) -> Tuple[Dict[bytes, Response], Dict[bytes, Response]]:
        """Pipelined GETKQ ended by NOOP: ({key: hit}, {key: error response}).
        Misses send nothing; a key in neither dict was a miss."""
        base = self.next_opaque()
        self._opaque = (base + len(keys) + 1) & 0xFFFFFFFF
        by_opaque = {}
        pkts = []
        for i, k in enumerate(keys):
            op = (base + i) & 0xFFFFFFFF
            by_opaque[op] = k
            pkts.append(encode(OP_GETKQ, k, opaque=op,
                               vb=vbucket_of(k, vbuckets) if vbuckets else 0))
        noop_opaque = (base + len(keys)) & 0xFFFFFFFF
        pkts.append(encode(OP_NOOP, opaque=noop_opaque))
        self.send(b"".join(pkts))
        hits: Dict[bytes, Response] = {}
        errors: Dict[bytes, Response] = {}
        while True:
            r = self.recv()
            if r.opaque == noop_opaque:
                if r.opcode != OP_NOOP or r.status != SUCCESS:
                    raise ProtocolError(f"NOOP ending a GETKQ batch failed: {r}")
                return hits, errors
            k = by_opaque.get(r.opaque)
            if k is None or r.opcode != OP_GETKQ:
                raise ProtocolError(f"unexpected response in GETKQ batch: {r}")
            if r.status == SUCCESS:
                if r.key != k:
                    raise ProtocolError(f"GETKQ for {k!r} echoed key {r.key!r}")
                hits[k] = r
            else:
                errors[k] = r


def retry_tmpfail(fn, *, deadline: float, first_delay: float = 0.005, max_delay: float = 0.2):
    """Call fn() -> Response until its status is not ETMPFAIL (backoff) or the deadline passes."""
    delay = first_delay
    while True:
        r = fn()
        if r.status != ETMPFAIL or time.monotonic() >= deadline:
            return r
        time.sleep(delay)
        delay = min(delay * 2, max_delay)


def kv_connect(port: int, user: str, password: str, bucket: str = "default",
               features: Iterable[int] = (FEATURE_MUTATION_SEQNO,), timeout: float = 10.0) -> Conn:
    """A KV-port connection: HELLO, SASL PLAIN, SELECT_BUCKET (each must succeed)."""
    c = Conn(port, timeout=timeout)
    try:
        c.hello(features)
        r = c.auth_plain(user, password)
        if r.status != SUCCESS:
            raise ProtocolError(f"SASL PLAIN failed: {r}")
        r = c.select_bucket(bucket)
        if r.status != SUCCESS:
            raise ProtocolError(f"SELECT_BUCKET failed: {r}")
    except BaseException:
        c.close()
        raise
    return c


@dataclass
class ManyResult:
    values: Dict[bytes, Optional[bytes]]   # key -> value, None if it does not exist
    errors_reread: int                     # keys whose GETKQ answered an error (re-read)
    silent_but_found: List[bytes]          # GETKQ said nothing (a miss), a plain GET found it


def get_many(conn: Conn, keys: Sequence[bytes], *, vbuckets: int = 0, batch: int = 500,
             deadline: Optional[float] = None) -> ManyResult:
    """Reads every key: pipelined GETKQ batches (ended by NOOP), then each key that answered
    an error or nothing (a miss) again with a plain GET, retrying ETMPFAIL with backoff
    until `deadline`. A key GETKQ missed but GET found is listed in `silent_but_found`."""
    if deadline is None:
        deadline = time.monotonic() + 60
    out: Dict[bytes, Optional[bytes]] = {}
    errored: List[bytes] = []
    silent: List[bytes] = []
    for i in range(0, len(keys), batch):
        chunk = keys[i:i + batch]
        hits, errors = conn.getkq_multi(chunk, vbuckets=vbuckets)
        for k in chunk:
            if k in hits:
                out[k] = hits[k].value
            elif k in errors:
                errored.append(k)
            else:
                silent.append(k)
    for k in errored + silent:
        vb = vbucket_of(k, vbuckets) if vbuckets else 0
        r = retry_tmpfail(lambda: conn.call(OP_GET, k, vb=vb), deadline=deadline)
        if r.status == SUCCESS:
            out[k] = r.value
        elif r.status == KEY_ENOENT:
            out[k] = None
        else:
            raise ProtocolError(f"GET {k!r} failed: {r}")
    found = [k for k in silent if out[k] is not None]
    return ManyResult(out, len(errored), found)
