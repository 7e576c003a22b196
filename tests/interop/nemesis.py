"""The nemesis: a seeded schedule of faults against a `sluice cluster up --proxied` cluster
while clients read, write durably and compare-and-set a few keys; the recorded history is
then checked for linearizability per key (linearizability.py).

    scripts/nemesis --seed 7                  # one run; prints the schedule and verdicts
    scripts/nemesis --seed 7 --duration 120   # longer
    python tests/interop/nemesis.py --help

Everything random comes from the seed: the replica count (1 or 2), each fault, its node,
how long it holds and the pause between faults. Client timing is not replayable (threads
and the kernel decide it), so a replay repeats the schedule, not the interleaving.

The cluster: 3 nodes, node `slot` listening on 127.0.1.(10+slot) and advertised as
127.0.0.(10+slot), where a FaultProxy forwards to it (fault_proxy.py). Replacement nodes
take the next slot. Auto-failover after 2 s; nodes fence themselves after 1.5 s cut off.

The faults, each followed by a recovery that brings the cluster back to 3 active nodes:

* kill:      SIGKILL a node; restart it after the hold (if it was failed over meanwhile,
             a fresh node replaces it through a rebalance).
* pause:     SIGSTOP a node for the hold, then SIGCONT.
* partition: cut a node off from its peers (not from clients) through the proxies.
* delay:     every chunk a node's proxy forwards waits 20–80 ms.
* rebalance: a fresh node joins and a rebalance takes it in and ejects another.

Every fault proves it happened: the killed process is gone (or a zombie), the paused one is
in state T, the proxies cut or refused connections, the delay held chunks back, the
rebalance moved vbuckets.

The clients (`Client`): smart routing by the map (`/pools/default/b/default` from every
node, the highest revision wins), straight to the active through its proxy. Operations:
GET; SET at durability majority; and a compare-and-set: GET, then SET with that CAS at
durability majority (ADD when the key is absent). Outcomes:

* SUCCESS: ok. KEY_EEXISTS / KEY_ENOENT on a CAS: the CAS failed (the value had moved).
* Statuses that mean the write never happened (NOT_MY_VBUCKET, TMPFAIL, durability
  impossible, a sync write in progress, a connection that failed before the request was
  sent): dropped from the history.
* SYNC_WRITE_AMBIGUOUS, a timeout or a connection lost after sending, any other status:
  indeterminate.
* A read that fails says nothing and is dropped.

After the last fault the clients stop, the cluster recovers, and a final reader reads every
key: an acknowledged write that was lost shows there as a non-linearizable history.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import admin_http  # noqa: E402
import mcbin  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402
from linearizability import (CAS, FAIL, OK, READ, UNKNOWN, WRITE, Op,  # noqa: E402
                             check)

USERNAME, PASSWORD, BUCKET = "Administrator", "password", "default"
NODES = 3
VBUCKETS = 16
AUTO_FAILOVER_S = 2
MAX_SLOTS = 16
FAULTS = ("kill", "pause", "partition", "delay", "rebalance")

DURABLE_TIMEOUT_MS = 2500
CLIENT_TIMEOUT_S = 4.0

SYNC_WRITE_AMBIGUOUS = 0xa3
# Statuses after which the write certainly did not happen.
NO_EFFECT = {mcbin.NOT_MY_VBUCKET, mcbin.ETMPFAIL, mcbin.EBUSY, mcbin.ENOMEM,
             0xa0,  # durability invalid level
             0xa1,  # durability impossible
             0xa2,  # sync write in progress
             0xa4}  # sync write re-commit in progress


def binary() -> Path:
    path = Path(os.environ.get("SLUICE_BIN", HERE.parents[1] / "target" / "release" / "sluice"))
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise SystemExit(f"no sluice binary at {path}: cargo build --release -p sluice-cli "
                         "(or set SLUICE_BIN)")
    return path


def node_ip(slot: int) -> str:
    return f"127.0.1.{10 + slot}"


def proxy_ip(slot: int) -> str:
    return f"127.0.0.{10 + slot}"


def port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def free_base(rng: random.Random) -> int:
    for _ in range(200):
        base = rng.randrange(20000, 40000, 10)
        # KV, admin and their TLS ports (+7, +8).
        if all(port_free(h, base + 10 * s + d) for s in range(MAX_SLOTS) for d in (0, 1, 7, 8)
               for h in (node_ip(s), proxy_ip(s))):
            return base
    raise RuntimeError("no free port range")


def http(host: str, port: int, path: str, body=None, timeout: float = 5.0) -> dict:
    return admin_http.get_json(f"http://{host}:{port}{path}", body, timeout)


def proc_state(pid: int) -> str:
    """The kernel's one-letter state of `pid` (R, S, T, Z...), or "gone"."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


# ---------------------------------------------------------------- the cluster

@dataclass
class Node:
    slot: int
    id: Optional[int]
    pid: int
    args: List[str]
    kv_port: int
    admin_port: int
    proc: Optional[subprocess.Popen] = None  # set when the harness started it
    killed: bool = False
    paused: bool = False
    retired: bool = False


class Cluster:
    def __init__(self, work: Path, replicas: int, base: int, log: Callable[[str], None]):
        self.work, self.replicas, self.base, self.log = work, replicas, base, log
        self.proxies: Dict[int, FaultProxy] = {}
        self.nodes: Dict[int, Node] = {}
        self.up: Optional[subprocess.Popen] = None
        self.next_slot = NODES

    # ------------------------------------------------------------ start and stop
    def ports(self, slot: int) -> Tuple[int, int]:
        return self.base + 10 * slot, self.base + 10 * slot + 1

    def proxy(self, slot: int) -> FaultProxy:
        if slot not in self.proxies:
            self.proxies[slot] = FaultProxy([(proxy_ip(slot), p) for p in self.ports(slot)],
                                            node_ip(slot))
        return self.proxies[slot]

    def start(self) -> None:
        for slot in range(NODES):
            self.proxy(slot)
        data = self.work / "cluster"
        self.up = subprocess.Popen(
            [str(binary()), "cluster", "up", "--proxied", "--nodes", str(NODES),
             "--replicas", str(self.replicas), "--data-dir", str(data),
             "--base-port", str(self.base), "--vbuckets", str(VBUCKETS),
             "--memory-quota-mb", "64", "--auto-failover-timeout", str(AUTO_FAILOVER_S),
             # Replacement nodes reuse node 0's arguments, certificate included, which does
             # not name their address: the members' calls stay in cleartext here.
             "--cluster-encryption", "off"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=open(self.work / "cluster-up.log", "w"), text=True)
        line = self.up.stdout.readline()
        if not line.startswith("couchbase://"):
            raise RuntimeError(f"cluster up failed: {line!r}\n"
                               f"{(self.work / 'cluster-up.log').read_text()[-3000:]}")
        doc = json.loads((data / "cluster.json").read_text())
        for slot, n in enumerate(doc["nodes"]):
            assert n["host"] == proxy_ip(slot), n
            self.nodes[slot] = Node(slot, n["id"], n["pid"], n["args"], n["kv_port"],
                                    n["admin_port"])
        self.log(f"cluster up: {NODES} nodes, {self.replicas} replica(s), base port {self.base}")

    def close(self) -> None:
        for n in self.nodes.values():
            if n.paused:
                os.kill(n.pid, signal.SIGCONT)
        if self.up is not None and self.up.poll() is None:
            self.up.send_signal(signal.SIGTERM)
            try:
                self.up.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.up.kill()
        for n in self.nodes.values():
            if n.proc is not None and n.proc.poll() is None:
                n.proc.terminate()
                try:
                    n.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    n.proc.kill()
            elif proc_state(n.pid) not in ("gone", "Z"):
                try:
                    os.kill(n.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in self.proxies.values():
            p.close()

    def spawn(self, node: Node, args: List[str]) -> None:
        log = open(Path(node.args[node.args.index("--data-dir") + 1]) / "server.log", "a")
        cmd = [str(binary())] + args
        if shutil.which("setpriv"):
            cmd = ["setpriv", "--pdeathsig", "KILL", "--"] + cmd
        node.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=log, start_new_session=True)
        node.pid = node.proc.pid
        node.killed = False

    # ------------------------------------------------------------ views
    def live(self) -> List[Node]:
        return [n for n in self.nodes.values() if not n.retired]

    def view(self) -> Optional[dict]:
        """The cluster view of the first member that answers, preferring the leader's."""
        views = []
        for n in self.live():
            if n.killed or n.paused:
                continue
            try:
                views.append(http(proxy_ip(n.slot), n.admin_port, "/api/v1/cluster",
                                  timeout=2))
            except (OSError, ValueError):
                continue
        for v in views:
            if v.get("leader") == v.get("this_node"):
                return v
        return views[0] if views else None

    def wait(self, what: str, ready: Callable[[dict], bool], timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            v = self.view()
            if v is not None and ready(v):
                return v
            if time.monotonic() > deadline:
                raise AssertionError(f"the cluster did not {what} within {timeout:.0f}s; "
                                     f"last view {v}")
            time.sleep(0.2)

    # ------------------------------------------------------------ faults
    def kill(self, n: Node) -> str:
        os.kill(n.pid, signal.SIGKILL)
        n.killed = True
        if n.proc is not None:
            n.proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while proc_state(n.pid) not in ("gone", "Z"):
            assert time.monotonic() < deadline, f"node {n.id} survived SIGKILL"
            time.sleep(0.05)
        return f"pid {n.pid} is {proc_state(n.pid)}"

    def restart(self, n: Node) -> None:
        args = list(n.args)
        if "--join" in args:  # a member's directory restarts without joining again
            i = args.index("--join")
            del args[i:i + 2]
        self.spawn(n, args)

    def pause(self, n: Node) -> str:
        os.kill(n.pid, signal.SIGSTOP)
        n.paused = True
        deadline = time.monotonic() + 5
        while proc_state(n.pid) != "T":
            assert time.monotonic() < deadline, f"node {n.id} did not stop"
            time.sleep(0.01)
        return f"pid {n.pid} in state T"

    def resume(self, n: Node) -> None:
        if n.paused:
            os.kill(n.pid, signal.SIGCONT)
            n.paused = False

    def partition(self, n: Node) -> None:
        peers = {node_ip(m.slot) for m in self.live() if m is not n}
        self.proxy(n.slot).block(peers)
        for m in self.live():
            if m is not n:
                self.proxy(m.slot).block({node_ip(n.slot)})

    def heal(self) -> None:
        for p in self.proxies.values():
            p.heal()
            p.delay_s = 0.0

    def add_node(self) -> Node:
        slot = self.next_slot
        self.next_slot += 1
        assert slot < MAX_SLOTS, "out of node slots"
        self.proxy(slot)
        kv, admin = self.ports(slot)
        template = self.nodes[0].args
        args = list(template)
        data = self.work / "cluster" / f"node-{slot}"
        data.mkdir(parents=True)
        for flag, value in (("--data-dir", str(data)), ("--kv-port", str(kv)),
                            ("--admin-port", str(admin)), ("--bind", node_ip(slot)),
                            ("--source-ip", node_ip(slot)),
                            ("--advertise-host", proxy_ip(slot))):
            args[args.index(flag) + 1] = value
        if "--join" in args:
            i = args.index("--join")
            del args[i:i + 2]
        member = next(m for m in self.live() if not (m.killed or m.paused))
        args += ["--join", f"{proxy_ip(member.slot)}:{member.admin_port}"]
        node = Node(slot, None, 0, args, kv, admin)
        self.nodes[slot] = node
        self.spawn(node, args)
        # Joined once the cluster lists it (the node answers before it has joined, with a
        # map of itself alone).
        deadline = time.monotonic() + 60
        while True:
            assert node.proc.poll() is None, f"new node in slot {slot} exited"
            v = self.view()
            joined = [x["id"] for x in (v or {}).get("nodes", []) if x["host"] == proxy_ip(slot)]
            if joined:
                node.id = joined[0]
                return node
            assert time.monotonic() < deadline, f"new node in slot {slot} did not join"
            time.sleep(0.2)

    def rebalance(self, eject: List[int]) -> dict:
        """Starts a rebalance on the leader (retrying while another runs) and waits for it."""
        deadline = time.monotonic() + 120
        while True:
            v = self.view()
            leader = next((m for m in self.live() if v and m.id == v.get("leader")), None)
            if leader is not None:
                try:
                    http(proxy_ip(leader.slot), leader.admin_port, "/api/v1/cluster/rebalance",
                         {"eject": eject}, timeout=30)
                    break
                except urllib.error.HTTPError as e:
                    why = e.read().decode(errors="replace")
                    self.log(f"  rebalance refused ({e.code}): {why}; retrying")
                except OSError as e:
                    self.log(f"  rebalance request failed: {e}; retrying")
            assert time.monotonic() < deadline, "no rebalance could start"
            time.sleep(1)
        while True:
            time.sleep(0.2)
            try:
                s = http(proxy_ip(leader.slot), leader.admin_port, "/api/v1/cluster/rebalance")
            except OSError:
                continue
            if not s["running"]:
                if s.get("error"):
                    raise AssertionError(f"rebalance failed: {s['error']}")
                return s
            assert time.monotonic() < deadline, f"rebalance still running: {s}"

    def restore(self) -> List[str]:
        """Back to NODES active nodes holding the map, no fault left in place."""
        done = []
        self.heal()
        for n in self.live():
            self.resume(n)
        status = self.statuses()
        for n in self.live():
            if n.killed and status.get(n.id) != "failed_over":
                self.restart(n)
                done.append(f"restarted node {n.id}")
        # Let a node that was down long enough be failed over before judging.
        time.sleep(0.5)
        self.wait("settle", lambda v: all(n["status"] in ("active", "failed_over")
                                          for n in v["nodes"]))
        status = self.statuses()
        failed = [n for n in self.live() if status.get(n.id) == "failed_over"]
        healthy = [n for n in self.live() if status.get(n.id) == "active"]
        if failed or len(healthy) < NODES:
            for _ in range(NODES - len(healthy)):
                fresh = self.add_node()
                done.append(f"added node {fresh.id} (slot {fresh.slot})")
            s = self.rebalance([])
            done.append(f"rebalance moved {s['moves_total']} vbuckets")
            for n in failed:
                self.retire(n)
                done.append(f"retired failed-over node {n.id}")
        self.wait("hold every vbucket on its active nodes",
                  lambda v: len(v["map_nodes"] or []) == NODES
                  and all(x["status"] == "active" for x in v["nodes"]))
        self.wait_serving()
        return done

    def retire(self, n: Node) -> None:
        n.retired = True
        if proc_state(n.pid) not in ("gone", "Z"):
            os.kill(n.pid, signal.SIGKILL)
        if n.proc is not None:
            n.proc.wait(timeout=10)

    def statuses(self) -> Dict[int, str]:
        v = self.view()
        return {} if v is None else {n["id"]: n["status"] for n in v["nodes"]}

    def wait_serving(self, timeout: float = 60) -> None:
        """Until every vbucket's active answers a GET (warmup and takeovers are over)."""
        deadline = time.monotonic() + timeout
        router = Router(self)
        keys = [key_in_vbucket(vb) for vb in range(VBUCKETS)]
        while True:
            router.refresh(force=True)
            bad = []
            for vb, key in enumerate(keys):
                server = router.active(vb)
                try:
                    with connect(server) as c:
                        st = c.call(mcbin.OP_GET, key, vb=vb).status
                except (OSError, mcbin.ProtocolError, mcbin.ConnectionClosed):
                    st = -1
                if st not in (mcbin.SUCCESS, mcbin.KEY_ENOENT):
                    bad.append((vb, st))
            if not bad:
                return
            assert time.monotonic() < deadline, f"vbuckets not served: {bad[:8]}"
            time.sleep(0.3)


def key_in_vbucket(vb: int) -> bytes:
    return next(k for k in (f"probe-{j}".encode() for j in range(100000))
                if mcbin.vbucket_of(k, VBUCKETS) == vb)


def connect(server: str) -> mcbin.Conn:
    host, port = server.rsplit(":", 1)
    c = mcbin.Conn(int(port), host=host, timeout=CLIENT_TIMEOUT_S)
    try:
        c.hello([mcbin.FEATURE_MUTATION_SEQNO, mcbin.FEATURE_ALT_REQUEST, 0x11])
        if c.auth_plain(USERNAME, PASSWORD).status != mcbin.SUCCESS:
            raise mcbin.ProtocolError("auth failed")
        if c.select_bucket(BUCKET).status != mcbin.SUCCESS:
            raise mcbin.ProtocolError("select bucket failed")
    except BaseException:
        c.close()
        raise
    return c


# ---------------------------------------------------------------- the clients

class Router:
    """The newest map any node serves (highest (revEpoch, rev))."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.lock = threading.Lock()
        self.rev = (-1, -1)
        self.servers: List[str] = []
        self.vbmap: List[List[int]] = []
        self.fetched = 0.0

    def refresh(self, force: bool = False) -> None:
        with self.lock:
            if not force and time.monotonic() - self.fetched < 0.1:
                return
            self.fetched = time.monotonic()
            for n in list(self.cluster.nodes.values()):
                if n.retired:
                    continue
                try:
                    doc = http(proxy_ip(n.slot), n.admin_port, f"/pools/default/b/{BUCKET}",
                               timeout=0.5)
                except (OSError, ValueError):
                    continue
                rev = (doc.get("revEpoch", 0), doc.get("rev", 0))
                if rev > self.rev:
                    m = doc["vBucketServerMap"]
                    self.rev, self.servers, self.vbmap = rev, m["serverList"], m["vBucketMap"]

    def active(self, vb: int) -> Optional[str]:
        with self.lock:
            if not self.vbmap or self.vbmap[vb][0] < 0:
                return None
            return self.servers[self.vbmap[vb][0]]


# Durability majority with its timeout, the frame every client write carries.
DURABILITY_FRAME = mcbin.frame_info(1, bytes([1]) + struct.pack(">H", DURABLE_TIMEOUT_MS))


class NotSent(Exception):
    """The request never left: it had no effect."""


class Client(threading.Thread):
    def __init__(self, cid: int, keys: List[str], router: Router, history: List[Op],
                 hist_lock: threading.Lock, seed: int, stop: threading.Event):
        super().__init__(daemon=True, name=f"client-{cid}")
        self.cid, self.keys, self.router = cid, keys, router
        self.history, self.hist_lock = history, hist_lock
        self.rng = random.Random(seed)
        self.stop_ev = stop
        self.conns: Dict[str, mcbin.Conn] = {}
        self.n = 0
        self.error: Optional[BaseException] = None

    def record(self, op: Op) -> None:
        with self.hist_lock:
            self.history.append(op)

    def conn(self, server: str) -> mcbin.Conn:
        c = self.conns.get(server)
        if c is None:
            try:
                c = connect(server)
            except (OSError, mcbin.ProtocolError, mcbin.ConnectionClosed) as e:
                raise NotSent(str(e)) from e
            self.conns[server] = c
        return c

    def drop(self, server: str) -> None:
        c = self.conns.pop(server, None)
        if c is not None:
            c.close()

    def request(self, key: str, build: Callable[[int, int], bytes],
                opcode: int) -> mcbin.Response:
        """Sends one request to the key's active. Raises NotSent if it could not be sent;
        any other exception means the outcome is unknown."""
        vb = mcbin.vbucket_of(key.encode(), VBUCKETS)
        server = self.router.active(vb)
        if server is None:
            self.router.refresh()
            raise NotSent("no active in the map")
        c = self.conn(server)
        opaque = c.next_opaque()
        try:
            c.send(build(vb, opaque))
        except OSError as e:
            self.drop(server)
            raise NotSent(str(e)) from e
        try:
            r = c.recv()
        except BaseException:
            self.drop(server)
            raise
        if r.opaque != opaque or r.opcode != opcode:
            self.drop(server)
            raise mcbin.ProtocolError(f"unexpected response {r}")
        if r.status == mcbin.NOT_MY_VBUCKET:
            self.router.refresh()
        return r

    def run(self) -> None:
        try:
            while not self.stop_ev.is_set():
                key = self.rng.choice(self.keys)
                kind = self.rng.choices([READ, WRITE, CAS], [4, 4, 2])[0]
                if kind == READ:
                    self.read(key)
                elif kind == WRITE:
                    self.write(key)
                else:
                    self.cas(key)
                time.sleep(self.rng.uniform(0.005, 0.02))
        except BaseException as e:  # noqa: BLE001 (reported by the harness)
            self.error = e
        finally:
            for s in list(self.conns):
                self.drop(s)

    def read(self, key: str) -> Optional[Tuple[Optional[str], int]]:
        """GET; records and returns (value, cas) when the answer says something."""
        call = time.monotonic_ns()
        try:
            r = self.request(key, lambda vb, o: mcbin.encode(mcbin.OP_GET, key.encode(), vb=vb,
                                                       opaque=o),
                             mcbin.OP_GET)
        except (NotSent, OSError, mcbin.ConnectionClosed, mcbin.ProtocolError):
            return None
        ret = time.monotonic_ns()
        if r.status == mcbin.SUCCESS:
            value = r.value.decode()
        elif r.status == mcbin.KEY_ENOENT:
            value = None
        else:
            return None
        self.record(Op(self.cid, key, READ, call, ret, value=value))
        return value, r.cas

    def mutate(self, key: str, kind: str, opcode: int, value: str, cas: int,
               expected: Optional[str]) -> None:
        extras = mcbin.set_extras() if opcode in (mcbin.OP_SET, mcbin.OP_ADD) else b""

        def build(vb: int, opaque: int) -> bytes:
            return mcbin.encode(opcode, key.encode(), value.encode(), extras, vb=vb, cas=cas,
                                opaque=opaque, magic=mcbin.ALT_REQ,
                                framing=DURABILITY_FRAME)

        call = time.monotonic_ns()
        try:
            r = self.request(key, build, opcode)
        except NotSent:
            return
        except (OSError, mcbin.ConnectionClosed, mcbin.ProtocolError):
            self.record(Op(self.cid, key, kind, call, None, value=value, expected=expected,
                           outcome=UNKNOWN))
            return
        ret = time.monotonic_ns()
        if r.status == mcbin.SUCCESS:
            outcome = OK
        elif kind == CAS and r.status in (mcbin.KEY_EEXISTS, mcbin.KEY_ENOENT):
            outcome = FAIL
        elif r.status in NO_EFFECT:
            return
        else:
            outcome = UNKNOWN
        self.record(Op(self.cid, key, kind, call, ret if outcome != UNKNOWN else None,
                       value=value, expected=expected, outcome=outcome))

    def next_value(self) -> str:
        self.n += 1
        return f"c{self.cid}-{self.n}"

    def write(self, key: str) -> None:
        self.mutate(key, WRITE, mcbin.OP_SET, self.next_value(), 0, None)

    def cas(self, key: str) -> None:
        seen = self.read(key)
        if seen is None:
            return
        current, token = seen
        if current is None:
            self.mutate(key, CAS, mcbin.OP_ADD, self.next_value(), 0, None)
        else:
            self.mutate(key, CAS, mcbin.OP_SET, self.next_value(), token, current)


# ---------------------------------------------------------------- the schedule

@dataclass
class Report:
    seed: int
    replicas: int
    faults: List[str] = field(default_factory=list)
    counts: Dict[str, int] = field(default_factory=dict)
    verdicts: List[str] = field(default_factory=list)
    failures: List[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


@dataclass
class Step:
    fault: str
    victim: int      # index among the nodes in the map, by slot
    hold: float      # seconds the fault stays in place
    delay: float     # the delay fault's per-chunk wait
    gap: float       # seconds of calm after recovery


def plan(seed: int, steps: int = 64) -> Tuple[int, List[Step]]:
    """The replica count and the fault schedule a seed draws: all the randomness of a run
    but the clients' (which threads make unreplayable anyway)."""
    rng = random.Random(seed)
    replicas = rng.choice([1, 2])
    return replicas, [Step(rng.choice(FAULTS), rng.randrange(NODES), rng.uniform(0.5, 4.0),
                           rng.uniform(0.02, 0.08), rng.uniform(1.0, 3.0))
                      for _ in range(steps)]


def run(seed: int, duration_s: float = 45, clients: int = 4, keys: int = 3,
        work: Optional[Path] = None, log: Callable[[str], None] = print) -> Report:
    replicas, schedule = plan(seed)
    rng = random.Random(seed + 1)  # the clients' own seeds
    report = Report(seed, replicas)
    log(f"nemesis seed {seed} (replay: scripts/nemesis --seed {seed} "
        f"--duration {duration_s:g}): {replicas} replica(s), {clients} clients, {keys} keys")
    own_work = work is None
    work = Path(tempfile.mkdtemp(prefix=f"nemesis-{seed}-")) if own_work else work
    cluster = Cluster(work, replicas, free_base(random.Random(seed ^ 0x5eed)), log)
    history: List[Op] = []
    hist_lock = threading.Lock()
    stop = threading.Event()
    workers: List[Client] = []
    t0 = time.monotonic()
    try:
        cluster.start()
        cluster.wait_serving()
        router = Router(cluster)
        router.refresh(force=True)
        names = [f"k{i}" for i in range(keys)]
        workers = [Client(c, names, router, history, hist_lock, rng.randrange(1 << 30), stop)
                   for c in range(clients)]
        for w in workers:
            w.start()
        time.sleep(2)
        for step in schedule:
            if time.monotonic() - t0 >= duration_s:
                break
            report.faults.append(inject(cluster, step, log, t0))
            for done in cluster.restore():
                log(f"  [{time.monotonic() - t0:6.1f}s] recover: {done}")
            time.sleep(step.gap)
        stop.set()
        for w in workers:
            w.join(timeout=30)
            if w.error is not None:
                report.failures.append(f"client {w.cid} crashed: {w.error!r}")
        for step in cluster.restore():
            log(f"  [{time.monotonic() - t0:6.1f}s] recover: {step}")
        final = Client(clients, names, Router(cluster), history, hist_lock, 0, stop)
        final.router.refresh(force=True)
        for key in names:
            for _ in range(3):
                if final.read(key) is not None:
                    break
                time.sleep(0.5)
            else:
                report.failures.append(f"the final read of {key} never succeeded")
    finally:
        stop.set()
        cluster.close()
    report.counts = summarize(history)
    log(f"history: {report.counts}")
    for v in check(history):
        line = f"key {v.key}: {v.ops} ops, {'linearizable' if v.ok else 'NOT LINEARIZABLE'} " \
               f"({v.explored} search steps)"
        report.verdicts.append(line)
        log(line)
        if not v.ok:
            report.failures.append(f"key {v.key} is not linearizable:\n{v.detail}")
            log(v.detail)
    if report.counts.get("write ok", 0) + report.counts.get("cas ok", 0) < 20:
        report.failures.append(f"too few acknowledged writes to judge: {report.counts}")
    if report.ok and own_work:
        shutil.rmtree(work, ignore_errors=True)
    elif not report.ok:
        log(f"node logs kept in {work}")
    return report


def inject(cluster: Cluster, step: Step, log: Callable[[str], None], t0: float) -> str:
    """Applies one fault for its hold; returns what was done and its evidence."""
    fault, hold = step.fault, step.hold
    victims = sorted((n for n in cluster.live() if not n.killed), key=lambda n: n.slot)
    n = victims[step.victim % len(victims)]
    at = time.monotonic() - t0
    if fault == "kill":
        evidence = cluster.kill(n)
        time.sleep(hold)
    elif fault == "pause":
        evidence = cluster.pause(n)
        time.sleep(hold)
        assert proc_state(n.pid) == "T", "the paused node ran"
        cluster.resume(n)
    elif fault == "partition":
        cluster.partition(n)
        time.sleep(hold)
        cut = sum(p.cut + p.refused for p in cluster.proxies.values())
        assert cut > 0, "the partition cut no connection"
        evidence = f"{cut} peer connections cut or refused so far"
        cluster.heal()
    elif fault == "delay":
        px = cluster.proxy(n.slot)
        before = px.delayed
        px.delay_s = step.delay
        time.sleep(hold)
        px.delay_s = 0.0
        assert px.delayed > before, "nothing was delayed"
        evidence = f"{px.delayed - before} chunks delayed"
    elif fault == "rebalance":
        fresh = cluster.add_node()
        s = cluster.rebalance([n.id])
        assert s["moves_total"] > 0, s
        cluster.retire(n)
        evidence = f"node {fresh.id} in and node {n.id} out, {s['moves_total']} vbucket moves"
    else:
        raise ValueError(fault)
    held = "" if fault == "rebalance" else f" for {hold:.1f}s"
    line = f"[{at:6.1f}s] {fault} node {n.id}{held}: {evidence}"
    log("  " + line)
    return line


def summarize(history: List[Op]) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for op in history:
        k = f"{op.kind} {op.outcome}"
        counts[k] = counts.get(k, 0) + 1
    return dict(sorted(counts.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--duration", type=float, default=45, help="seconds of faults (45)")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--keys", type=int, default=3)
    args = ap.parse_args()
    report = run(args.seed, args.duration, args.clients, args.keys)
    if report.ok:
        print(f"seed {args.seed}: every key linearizable")
        return 0
    print(f"seed {args.seed} FAILED:\n" + "\n".join(report.failures))
    return 1


if __name__ == "__main__":
    sys.exit(main())
