"""A fake DCP producer for the guard tests of test_dcp_gocbcore.py (not a test itself).

It serves one gocbcore DCP client well enough to exercise the whole harness (dcpstream and
the checks on its events) without Sluice's producer: a single-node "cluster" on a loopback
port with SCRAM-SHA512, SELECT_BUCKET, a cluster map pointing at itself, GET_ALL_VB_SEQNOS,
DCP_OPEN / DCP_CONTROL (recorded, so tests can pin down what gocbcore sends),
DCP_GET_FAILOVER_LOG, stream requests with the validation and rollback rule of
protocol.md §4.3, snapshots of SNAP seqnos deduplicated inside, mutations, deletions (v1 or
v2 with IncludeDeleteTimes), expirations (with enable_expiry_opcode), STREAM_END,
CLOSE_STREAM and connection-level flow control. The history is synthetic: apply() appends
operations, new_branch() does what an unclean restart does (cut back to a snapshot end, new
failover entry). Change it only while no client is connected.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import random
import socket
import struct
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import mcbin
from mcbin import KEY_ENOENT, encode, vbucket_of

OP_DCP_OPEN = 0x50
OP_DCP_CLOSE_STREAM = 0x52
OP_DCP_STREAM_REQ = 0x53
OP_DCP_GET_FAILOVER_LOG = 0x54
OP_DCP_STREAM_END = 0x55
OP_DCP_SNAPSHOT_MARKER = 0x56
OP_DCP_MUTATION = 0x57
OP_DCP_DELETION = 0x58
OP_DCP_EXPIRATION = 0x59
OP_DCP_BUFFER_ACK = 0x5D
OP_DCP_CONTROL = 0x5E
STATUS_ERANGE = 0x22
STATUS_ROLLBACK = 0x23

# A key's final state: ("live", value) | ("deleted", None) | ("expired", None)
Expected = Dict[str, Tuple[str, Optional[str]]]


def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hashlib.sha512).digest()


@dataclass
class FakeItem:
    seqno: int
    kind: str          # mutation | deletion | expiration
    key: str
    value: str
    cas: int


@dataclass
class FakeVb:
    log: List[Tuple[int, int]]                  # failover log, newest first
    items: List[FakeItem] = field(default_factory=list)
    snaps: List[Tuple[int, int]] = field(default_factory=list)

    @property
    def high(self) -> int:
        return self.snaps[-1][1] if self.snaps else 0


class FakeProducer:
    """See the module docstring. `port` is its KV port; close() stops it."""

    SNAP = 10

    def __init__(self, num_vbuckets: int = 64, *, bucket: str = "default",
                 username: str = "Administrator", password: str = "password"):
        self.nvb = num_vbuckets
        self.bucket, self.username, self.password = bucket, username, password
        self.rng = random.Random(5)
        self.vbs = {vb: FakeVb(log=[(self._uuid(), 0)]) for vb in range(num_vbuckets)}
        self.cas = 1_000
        self.lock = threading.Lock()
        self.controls: List[Tuple[str, str]] = []
        self.opens: List[Tuple[str, int]] = []
        self.stream_reqs: List[dict] = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        self.mgmt_port = closed.getsockname()[1]   # nothing listens: gocbcore's HTTP poller fails
        closed.close()
        self.conns: List[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _uuid(self) -> int:
        return self.rng.getrandbits(63) | 1

    # -------------------------------------------------------------- history
    def apply(self, ops: Sequence[Tuple[str, str, str]]) -> None:
        """("set"|"delete"|"expire", key, value) ops, appended as new snapshots."""
        per_vb: Dict[int, List[Tuple[str, str, str]]] = defaultdict(list)
        for op in ops:
            per_vb[vbucket_of(op[1].encode(), self.nvb)].append(op)
        for vb, vops in per_vb.items():
            v = self.vbs[vb]
            seq = v.high
            for c in range(0, len(vops), self.SNAP):
                chunk = vops[c:c + self.SNAP]
                first = seq + 1
                latest: Dict[str, FakeItem] = {}
                for op, key, value in chunk:
                    seq += 1
                    self.cas += 1
                    kind = {"set": "mutation", "delete": "deletion", "expire": "expiration"}[op]
                    latest.pop(key, None)                       # dedup inside the snapshot
                    latest[key] = FakeItem(seq, kind, key, value, self.cas)
                v.items += sorted(latest.values(), key=lambda i: i.seqno)
                v.snaps.append((first, seq))

    def new_branch(self, points: Dict[int, int]) -> None:
        """What an unclean restart does: vb keeps its history up to points[vb] (0 or a
        snapshot end) and starts a new failover branch there."""
        for vb, b in points.items():
            v = self.vbs[vb]
            assert b == 0 or b in {e for _, e in v.snaps}, (vb, b, v.snaps)
            v.items = [i for i in v.items if i.seqno <= b]
            v.snaps = [s for s in v.snaps if s[1] <= b]
            v.log = [(self._uuid(), b)] + [e for e in v.log if e[1] <= b]

    def high_seqnos(self) -> Dict[int, int]:
        return {vb: v.high for vb, v in self.vbs.items()}

    def truth(self) -> Expected:
        out: Expected = {}
        for v in self.vbs.values():
            for it in v.items:
                out[it.key] = {"mutation": ("live", it.value), "deletion": ("deleted", None),
                               "expiration": ("expired", None)}[it.kind]
        return out

    def rollback_seqno(self, vb: int, flags: int, start: int, uuid: int, ss: int, se: int
                       ) -> Optional[int]:
        """protocol.md §4.3 needsRollback (no purge seqno)."""
        v = self.vbs[vb]
        if start == 0 and not (flags & 0x20 and uuid != 0):
            return None
        oldest_first = list(reversed(v.log))
        idx = next((i for i, (u, _) in enumerate(oldest_first) if u == uuid), None)
        if idx is None:
            return 0
        upper = oldest_first[idx + 1][1] if idx + 1 < len(oldest_first) else v.high
        if start == ss:
            se = start
        if se <= upper:
            return None
        if start == se:
            ss = start
        return min(upper, ss)

    # -------------------------------------------------------------- network
    def close(self) -> None:
        self.sock.close()
        for c in list(self.conns):
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=_FakeConn(self, c).serve, daemon=True).start()

    def cluster_map(self) -> bytes:
        cfg = {"rev": 1, "revEpoch": 1, "name": self.bucket, "uuid": "fa4e" * 8, "bucketType": "membase",
               "nodeLocator": "vbucket", "bucketCapabilitiesVer": "",
               "bucketCapabilities": ["couchapi", "dcp", "cbhello", "touch", "cccp", "nodesExt"],
               "nodes": [{"hostname": f"127.0.0.1:{self.mgmt_port}", "ports": {"direct": self.port}}],
               "nodesExt": [{"services": {"kv": self.port, "mgmt": self.mgmt_port},
                             "thisNode": True, "hostname": "127.0.0.1"}],
               "vBucketServerMap": {"hashAlgorithm": "CRC", "numReplicas": 0,
                                    "serverList": [f"127.0.0.1:{self.port}"],
                                    "vBucketMap": [[0]] * self.nvb}}
        return json.dumps(cfg).encode()


class _FakeConn:
    def __init__(self, fake: FakeProducer, sock: socket.socket):
        self.f = fake
        self.sock = sock
        self.wlock = threading.Lock()
        self.cond = threading.Condition()
        self.window = 0
        self.unacked = 0
        self.open_flags = 0
        self.expiry_opcode = False
        self.streams: Dict[int, Iterator[bytes]] = {}    # vb -> its pending messages
        self.closed = False
        self.scram: Optional[dict] = None
        self.stream_opaque: Dict[int, int] = {}

    def send(self, pkt: bytes) -> None:
        with self.wlock:
            self.sock.sendall(pkt)

    def reply(self, req: Tuple, status: int = 0, value: bytes = b"", extras: bytes = b"") -> None:
        op, opaque = req[1], req[5]
        self.send(encode(op, b"", value, extras, magic=mcbin.RES, vb=status, opaque=opaque))

    def serve(self) -> None:
        threading.Thread(target=self._sender, daemon=True).start()
        buf = b""
        try:
            while True:
                data = self.sock.recv(1 << 16)
                if not data:
                    break
                buf += data
                while len(buf) >= 24:
                    magic, op, klen, elen, _dt, vb, blen, opaque, _cas = \
                        struct.unpack(">BBHBBHIIQ", buf[:24])
                    if len(buf) < 24 + blen:
                        break
                    body = buf[24:24 + blen]
                    buf = buf[24 + blen:]
                    extras, key, value = body[:elen], body[elen:elen + klen], body[elen + klen:]
                    self.handle((magic, op, vb, extras, key, opaque, value))
        except OSError:
            pass
        finally:
            with self.cond:
                self.closed = True
                self.cond.notify_all()
            self.sock.close()

    def handle(self, req: Tuple) -> None:
        magic, op, vb, extras, key, opaque, value = req
        f = self.f
        if magic == mcbin.RES:
            return                                   # DCP_NOOP replies (we send none)
        if op == mcbin.OP_HELLO:
            self.reply(req)                          # acknowledge no feature
        elif op == mcbin.OP_SASL_LIST_MECHS:
            self.reply(req, value=b"SCRAM-SHA512")
        elif op == mcbin.OP_SASL_AUTH:
            self.scram_first(req, value)
        elif op == mcbin.OP_SASL_STEP:
            self.scram_final(req, value)
        elif op in (mcbin.OP_SELECT_BUCKET, mcbin.OP_NOOP):
            self.reply(req)
        elif op == mcbin.OP_GET_CLUSTER_CONFIG:
            self.reply(req, value=f.cluster_map())
        elif op == OP_DCP_OPEN:
            flags = struct.unpack(">II", extras)[1]
            with f.lock:
                f.opens.append((key.decode(), flags))
            self.open_flags = flags
            self.reply(req)
        elif op == OP_DCP_CONTROL:
            k, v = key.decode(), value.decode()
            with f.lock:
                f.controls.append((k, v))
            if k == "connection_buffer_size":
                with self.cond:
                    self.window = int(v)
            if k == "enable_expiry_opcode":
                self.expiry_opcode = v == "true"
            self.reply(req)
        elif op == OP_DCP_BUFFER_ACK:
            with self.cond:
                self.unacked = max(0, self.unacked - struct.unpack(">I", extras)[0])
                self.cond.notify_all()
        elif op == mcbin.OP_GET_ALL_VB_SEQNOS:
            self.reply(req, value=b"".join(struct.pack(">HQ", v, s)
                                           for v, s in sorted(f.high_seqnos().items())))
        elif op == OP_DCP_GET_FAILOVER_LOG:
            self.reply(req, value=b"".join(struct.pack(">QQ", u, s) for u, s in f.vbs[vb].log))
        elif op == OP_DCP_STREAM_REQ:
            self.stream_req(req)
        elif op == OP_DCP_CLOSE_STREAM:
            with self.cond:
                had = self.streams.pop(vb, None) is not None
            self.reply(req, status=0 if had else KEY_ENOENT)
            if had:
                self.send(encode(OP_DCP_STREAM_END, extras=struct.pack(">I", 1), vb=vb,
                                 opaque=self.stream_opaque.get(vb, 0)))
        else:
            self.reply(req, status=mcbin.UNKNOWN_COMMAND)

    # -------------------------------------------------------------- SCRAM-SHA512
    def scram_first(self, req: Tuple, value: bytes) -> None:
        bare = value.decode().split(",", 2)[2]                   # after "n,,"
        attrs = dict(a.split("=", 1) for a in bare.split(","))
        salt = os.urandom(16)
        first = f"r={attrs['r']}{base64.b64encode(os.urandom(12)).decode()}," \
                f"s={base64.b64encode(salt).decode()},i=4096"
        self.scram = {"bare": bare, "first": first, "salt": salt, "user": attrs["n"]}
        self.reply(req, status=mcbin.AUTH_CONTINUE, value=first.encode())

    def scram_final(self, req: Tuple, value: bytes) -> None:
        s = self.scram
        final = value.decode()
        without_proof, proof = final.rsplit(",p=", 1)
        msg = f"{s['bare']},{s['first']},{without_proof}".encode()
        salted = hashlib.pbkdf2_hmac("sha512", self.f.password.encode(), s["salt"], 4096)
        client_key = _hmac(salted, b"Client Key")
        stored = hashlib.sha512(client_key).digest()
        sig = _hmac(stored, msg)
        got_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof), sig))
        if s["user"] != self.f.username or hashlib.sha512(got_key).digest() != stored:
            self.reply(req, status=mcbin.AUTH_ERROR)
            return
        server_sig = _hmac(_hmac(salted, b"Server Key"), msg)
        self.reply(req, value=b"v=" + base64.b64encode(server_sig))

    # -------------------------------------------------------------- streams
    def stream_req(self, req: Tuple) -> None:
        _magic, _op, vb, extras, _key, opaque, _value = req
        f = self.f
        flags, _, start, end, uuid, ss, se = struct.unpack(">IIQQQQQ", extras)
        rec = dict(vb=vb, flags=flags, start=start, end=end, uuid=uuid, snap_start=ss, snap_end=se)
        with f.lock:
            f.stream_reqs.append(rec)
        v = f.vbs.get(vb)
        if v is None:
            rec["status"] = "nmvb"
            self.reply(req, status=mcbin.NOT_MY_VBUCKET)
            return
        if start > end or not ss <= start <= se:
            rec["status"] = "erange"
            self.reply(req, status=STATUS_ERANGE)
            return
        rb = f.rollback_seqno(vb, flags, start, uuid, ss, se)
        if rb is not None:
            rec["status"] = f"rollback {rb}"
            self.reply(req, status=STATUS_ROLLBACK, value=struct.pack(">Q", rb))
            return
        if start > v.high:
            rec["status"] = "erange"
            self.reply(req, status=STATUS_ERANGE)
            return
        rec["status"] = "ok"
        self.stream_opaque[vb] = opaque
        self.reply(req, value=b"".join(struct.pack(">QQ", u, s) for u, s in v.log))
        with self.cond:
            self.streams[vb] = self._messages(vb, opaque, start, end, list(v.items), list(v.snaps))
            self.cond.notify_all()

    def _messages(self, vb: int, opaque: int, start: int, end: int, items: List[FakeItem],
                  snaps: List[Tuple[int, int]]) -> Iterator[bytes]:
        delete_times = bool(self.open_flags & 0x20)
        for s0, s1 in snaps:
            if s1 <= start or s0 > end:
                continue
            inside = [i for i in items if max(s0, start + 1) <= i.seqno <= min(s1, end)]
            if not inside:
                continue
            yield encode(OP_DCP_SNAPSHOT_MARKER, vb=vb, opaque=opaque,
                         extras=struct.pack(">QQI", max(s0, start + 1), min(s1, end), 0x02))
            for it in inside:
                rev = it.seqno
                if it.kind == "mutation":
                    yield encode(OP_DCP_MUTATION, it.key.encode(), it.value.encode(),
                                 struct.pack(">QQIIIHB", it.seqno, rev, 0, 0, 0, 0, 0),
                                 vb=vb, opaque=opaque, cas=it.cas)
                elif it.kind == "expiration" and self.expiry_opcode and delete_times:
                    yield encode(OP_DCP_EXPIRATION, it.key.encode(), b"",
                                 struct.pack(">QQI", it.seqno, rev, 0), vb=vb, opaque=opaque,
                                 cas=it.cas)
                else:
                    ex = (struct.pack(">QQIB", it.seqno, rev, 0, 0) if delete_times
                          else struct.pack(">QQH", it.seqno, rev, 0))
                    yield encode(OP_DCP_DELETION, it.key.encode(), b"", ex, vb=vb,
                                 opaque=opaque, cas=it.cas)
        if end <= (snaps[-1][1] if snaps else 0) or end == start:
            yield encode(OP_DCP_STREAM_END, extras=struct.pack(">I", 0), vb=vb, opaque=opaque)
        # else: stays open, waiting for changes that never come

    def _sender(self) -> None:
        """Round-robin over the open streams, one message each, within the window."""
        while True:
            with self.cond:
                while not self.closed and (not self.streams or
                                           (self.window and self.unacked >= self.window)):
                    self.cond.wait(0.5)
                if self.closed:
                    return
                batch = []
                for vb, gen in list(self.streams.items()):
                    pkt = next(gen, None)
                    if pkt is None:
                        del self.streams[vb]
                    else:
                        batch.append(pkt)
                        self.unacked += len(pkt)
            try:
                for pkt in batch:
                    self.send(pkt)
            except OSError:
                return


def fake_ops(n_keys: int, seed: int, gen: int = 0) -> List[Tuple[str, str, str]]:
    """Sets of f0..f{n_keys-1}, then n_keys/2 random sets, deletes and expiries of them."""
    rng = random.Random(seed)
    ops = [("set", f"f{i}", f"v{i}.{gen}") for i in range(n_keys)]
    for _ in range(n_keys // 2):
        i = rng.randrange(n_keys)
        r = rng.random()
        op = "set" if r < 0.6 else ("delete" if r < 0.85 else "expire")
        ops.append((op, f"f{i}", f"v{i}.{gen}.{rng.randrange(1000)}" if op == "set" else ""))
    return ops
