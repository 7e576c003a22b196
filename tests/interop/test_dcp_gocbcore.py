"""DCP interop: a DCP client written by others streams every change from Sluice and resumes.

The client is gocbcore v10.8.1's DCP agent (the library Couchbase's Go tools use), driven by
``dcp_gocbcore/bin/dcpstream`` (built by scripts/install-test-deps; source and flags in
dcp_gocbcore/main.go). It bootstraps like any gocbcore DCP consumer (HELLO, SCRAM-SHA512,
SELECT_BUCKET, GET_CLUSTER_CONFIG, DCP_OPEN, DCP_CONTROLs), opens one stream per vbucket up to
a target seqno, writes every event to a JSON-lines file and keeps a resume state (vbuuid,
seqno, snapshot range, failover log per vbucket) that it saves only after the events file is
flushed.

Against a real ``sluice server``:

* test_dcp_stream_all_vbuckets_and_resume: 100,000 mutations over all 1024 vbuckets (sets,
  overwrites, deletions, documents with a 2 s expiry that a GET then expires). The client
  stops after 50,000 items and a second run resumes from its saved state until every
  vbucket's high seqno (GET_ALL_VB_SEQNOS) is reached. Checked from the events: no (vb, seqno)
  twice, each item inside the snapshot that announced it, seqnos strictly increasing per
  vbucket, each key's last event matches its final state, each vbucket at its target, the
  resumed requests start where the first run stopped, and no rollback.
* test_dcp_expiry_opcode: with ``enable_expiry_opcode`` (+ IncludeDeleteTimes) TTL expiries
  arrive as DCP_EXPIRATION, explicit deletes as DCP_DELETION.
* test_dcp_resume_after_kill9: the client stops while writes continue, the server is killed
  with SIGKILL and restarted (a new failover branch at what was persisted), more writes
  follow, and the client resumes. It must finish; a rollback is allowed only when the
  client's snapshot reaches past the branch point, and must go back no further than the
  last point both histories share (so never to 0 unless nothing was shared); the final
  state it reconstructs equals what the server holds.

Guard tests run the same harness against an in-process fake DCP producer
(dcp_gocbcore/fake_producer.py: real SCRAM, a synthetic history, the stream-request rollback
rule of protocol.md §4.3), so a broken harness is not mistaken for a broken server: a resume,
rollbacks to 0 and to a shared seqno after new failover branches, and the exact DCP_OPEN
flags and DCP_CONTROL keys gocbcore sends. A last guard feeds bad event streams to the
checker. They need no Sluice binary and take about a second.
"""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import pytest

import mcbin
from conftest import BUCKET, PASSWORD, USERNAME
from mcbin import (ETMPFAIL, KEY_ENOENT, SUCCESS, ConnectionClosed, encode, get_many,
                   kv_connect, retry_tmpfail, set_extras, vbucket_of)

HERE = Path(__file__).resolve().parent
GO_DIR = HERE / "dcp_gocbcore"
DCPSTREAM = Path(os.environ.get("DCPSTREAM_BIN", GO_DIR / "bin" / "dcpstream"))

sys.path.insert(0, str(GO_DIR))
from fake_producer import Expected, FakeProducer, fake_ops  # noqa: E402

VBUCKETS = 1024
FOREVER = 0xFFFF_FFFF_FFFF_FFFF        # stream end seqno meaning "never end"
ITEM_KINDS = ("mutation", "deletion", "expiration")

# What gocbcore v10.8.1's DCP agent sends after DCP_OPEN with default DCPAgentConfig
# (memdclientdialer_component.go dcpBootstrap): noop on at 180 s, priority "low" (the zero
# value of DcpAgentPriority), a 20 MiB flow-control window, stream-end on close.
GOCBCORE_DEFAULT_CONTROLS = [
    ("enable_noop", "true"),
    ("set_noop_interval", "180"),
    ("set_priority", "low"),
    ("connection_buffer_size", "20971520"),
    ("send_stream_end_on_client_close_stream", "true"),
]

OP_DELETE = 0x04


# ================================================================== running dcpstream

def dcpstream_binary() -> Path:
    if not (DCPSTREAM.is_file() and os.access(DCPSTREAM, os.X_OK)):
        pytest.fail(f"{DCPSTREAM} not found: run scripts/install-test-deps (it builds the gocbcore "
                    "DCP client with Go), or set DCPSTREAM_BIN=/path/to/dcpstream", pytrace=False)
    return DCPSTREAM


@dataclass
class Run:
    rc: int
    summary: dict
    stdout: str
    stderr: str

    def describe(self) -> str:
        tail = "\n".join(self.stderr.splitlines()[-40:])
        return f"exit code {self.rc}, summary {self.summary}\n--- dcpstream stderr (tail) ---\n{tail}"


class Client:
    """One client identity: its state file and events file, used across runs."""

    def __init__(self, workdir: Path, port: int, name: str = "sluice-interop:gocbcore"):
        workdir.mkdir(parents=True, exist_ok=True)
        self.dir = workdir
        self.port = port
        self.name = name
        self.state_path = workdir / "state.json"
        self.events_path = workdir / "events.jsonl"

    def run(self, *, timeout_s: float = 240, **kw) -> Run:
        """Runs dcpstream to its end (see start() for the options)."""
        return self.finish(self.start(timeout_s=timeout_s, **kw), timeout_s + 60)

    def start(self, *, stop_after: int = 0, until: Optional[Dict[int, int]] = None,
              seqnos_out: Optional[Path] = None, timeout_s: float = 240,
              extra: Sequence[str] = ()) -> subprocess.Popen:
        args = [str(dcpstream_binary()), "--addr", f"127.0.0.1:{self.port}", "--bucket", BUCKET,
                "--user", USERNAME, "--password", PASSWORD, "--name", self.name,
                "--state", str(self.state_path), "--events", str(self.events_path),
                "--timeout", str(timeout_s), "--stop-after-items", str(stop_after)]
        if until is not None:
            path = self.dir / f"until-{time.monotonic_ns()}.json"
            path.write_text(json.dumps({str(vb): s for vb, s in until.items()}))
            args += ["--until-seqnos", str(path)]
        if seqnos_out is not None:
            args += ["--seqnos-out", str(seqnos_out)]
        args += list(extra)
        return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    @staticmethod
    def finish(p: subprocess.Popen, timeout_s: float) -> Run:
        try:
            out, err = p.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            err += f"\n[killed: dcpstream still running after {timeout_s:.0f}s]"
        summary: dict = {}
        lines = out.strip().splitlines()
        if lines:
            try:
                summary = json.loads(lines[-1])
            except ValueError:
                pass
        return Run(p.returncode, summary, out, err)

    def items_written(self) -> int:
        """Item lines in the events file so far (it is flushed at least every second)."""
        try:
            with open(self.events_path, "rb") as f:
                return sum(1 for line in f if b'"seqno"' in line and b'"key"' in line)
        except FileNotFoundError:
            return 0

    def state(self) -> Dict[int, dict]:
        data = json.loads(self.state_path.read_text())
        return {s["vb"]: s for s in data["vbuckets"]}

    def events(self) -> List[dict]:
        with open(self.events_path) as f:
            return [json.loads(line) for line in f if line.strip()]


def expect_ok(run: Run, what: str) -> None:
    if run.rc != 0:
        pytest.fail(f"{what}: dcpstream failed: {run.describe()}", pytrace=False)
    if not run.summary:
        pytest.fail(f"{what}: no JSON summary on stdout: {run.stdout!r}", pytrace=False)


# ================================================================== checking the events

@dataclass
class Item:
    kind: str
    vb: int
    seqno: int
    key: str
    value: Optional[str]
    run: int


@dataclass
class Replay:
    """The events of all runs, with rollbacks applied (items above a rollback seqno dropped)."""
    history: Dict[int, List[Item]]
    last: Dict[int, int]                  # vb -> last seqno held (after rollbacks)
    final: Dict[str, Item]                # key -> its last item held
    rollbacks: List[dict]
    opens: List[dict]
    ends: List[dict]
    runs: int
    items_received: int
    problems: List[str]


def replay(events: Sequence[dict], num_vbuckets: int) -> Replay:
    problems: List[str] = []
    history: Dict[int, List[Item]] = defaultdict(list)
    last: Dict[int, int] = {}
    snap: Dict[int, Tuple[int, int]] = {}
    rollbacks: List[dict] = []
    opens: List[dict] = []
    ends: List[dict] = []
    run = 0
    received = 0
    for n, ev in enumerate(events, 1):
        t = ev.get("type")
        vb = ev.get("vb")
        where = f"event #{n} (run {run}) {ev}"
        if t == "start":
            run += 1
            snap.clear()
        elif t == "stop":
            pass
        elif t == "open":
            snap.pop(vb, None)
            opens.append(dict(ev, run=run))
            if ev["start"] != last.get(vb, 0):
                problems.append(f"{where}: stream requested from {ev['start']}, but the client "
                                f"holds vb {vb} up to seqno {last.get(vb, 0)}")
            if not ev["snap_start"] <= ev["start"] <= ev["snap_end"]:
                problems.append(f"{where}: snap_start <= start <= snap_end violated")
        elif t == "snapshot":
            if ev["start"] > ev["end"]:
                problems.append(f"{where}: snapshot start > end")
            snap[vb] = (ev["start"], ev["end"])
        elif t in ITEM_KINDS:
            received += 1
            s = ev["seqno"]
            key = ev["key"]
            if vb not in snap:
                problems.append(f"{where}: item before any snapshot marker of its stream")
            elif not snap[vb][0] <= s <= snap[vb][1]:
                problems.append(f"{where}: seqno outside its snapshot {snap[vb][0]}..{snap[vb][1]}")
            prev = last.get(vb, 0)
            if s <= prev:
                dup = any(i.seqno == s for i in history[vb])
                problems.append(f"{where}: seqno {s} {'received twice' if dup else 'not above'} "
                                f"(vb {vb} already at {prev})")
            else:
                last[vb] = s
            if vbucket_of(key.encode(), num_vbuckets) != vb:
                problems.append(f"{where}: key {key!r} belongs to vb "
                                f"{vbucket_of(key.encode(), num_vbuckets)}")
            history[vb].append(Item(t, vb, s, key, ev.get("value"), run))
        elif t == "rollback":
            rollbacks.append(dict(ev, run=run))
            to = ev["to"]
            if to > last.get(vb, 0):
                problems.append(f"{where}: rollback above what the client holds")
            history[vb] = [i for i in history[vb] if i.seqno <= to]
            last[vb] = min(last.get(vb, 0), to)
            snap.pop(vb, None)
        elif t == "end":
            ends.append(dict(ev, run=run))
            snap.pop(vb, None)
        else:
            problems.append(f"{where}: unexpected event type")
    final: Dict[str, Item] = {}
    for vb in sorted(history):
        for it in history[vb]:
            final[it.key] = it
    return Replay(dict(history), last, final, rollbacks, opens, ends, run, received, problems)


def fail_if(problems: List[str], what: str) -> None:
    if problems:
        shown = "\n  ".join(problems[:25])
        more = f"\n  ... and {len(problems) - 25} more" if len(problems) > 25 else ""
        pytest.fail(f"{what}: {len(problems)} problems:\n  {shown}{more}", pytrace=False)


def final_state_problems(rp: Replay, expected: Expected,
                         expired_kinds: Tuple[str, ...] = ("deletion", "expiration")) -> List[str]:
    problems = []
    for key, (state, value) in sorted(expected.items()):
        it = rp.final.get(key)
        got = "no event" if it is None else f"{it.kind} seqno {it.seqno} value {it.value!r}"
        if state == "live":
            ok = it is not None and it.kind == "mutation" and it.value == value
        elif state == "deleted":
            ok = it is not None and it.kind == "deletion"
        else:
            ok = it is not None and it.kind in expired_kinds
        if not ok:
            problems.append(f"{key!r}: expected {state} {value!r}, last event: {got}")
    for key in sorted(set(rp.final) - set(expected)):
        problems.append(f"{key!r}: streamed ({rp.final[key].kind}) but never written")
    return problems


def target_problems(rp: Replay, targets: Dict[int, int]) -> List[str]:
    out = []
    for vb, t in sorted(targets.items()):
        if rp.last.get(vb, 0) != t:
            out.append(f"vb {vb}: client holds seqno {rp.last.get(vb, 0)}, target {t}")
    return out


def rollback_problems(rp: Replay, before: Dict[int, dict], branch: Dict[int, int],
                      run: int) -> List[str]:
    """Rollbacks in `run`, against the state saved before it and the producer's branch
    point per vbucket (the seqno of its newest failover entry).

    The client at (S, SS..SE) shares history with the producer up to branch point B.
    Its snapshot is complete if S == SE (then SS := S), and holds no item of the snapshot
    if S == SS (then SE := S). A rollback is needed only if SE > B, and then the closest
    valid point is min(B, SS): not further back (never 0 unless nothing was shared)."""
    problems = []
    first: Dict[int, dict] = {}
    for rb in rp.rollbacks:
        if rb["run"] == run:
            first.setdefault(rb["vb"], rb)
        elif rb["run"] > 0:
            problems.append(f"unexpected rollback in run {rb['run']}: {rb}")
    for vb, st in sorted(before.items()):
        s, ss, se = st["seqno"], st["snap_start"], st["snap_end"]
        if s == ss:
            se = s
        if s == se:
            ss = s
        b = branch.get(vb)
        if b is None:
            continue
        rb = first.get(vb)
        needed = se > b
        if rb is None:
            if needed and s > 0:
                problems.append(f"vb {vb}: client at seqno {s} (snapshot {ss}..{se}) is past the "
                                f"branch point {b} but was not rolled back")
            continue
        if rb["from"] != st["seqno"]:
            problems.append(f"vb {vb}: rollback from {rb['from']}, but the saved seqno was {st['seqno']}")
        if not needed:
            problems.append(f"vb {vb}: rolled back to {rb['to']} although its snapshot {ss}..{se} "
                            f"(seqno {s}) lies within the shared history up to {b}")
        if rb["to"] > min(b, s):
            problems.append(f"vb {vb}: rollback to {rb['to']} is above min(branch point {b}, seqno {s})")
        if rb["to"] < min(b, ss):
            problems.append(f"vb {vb}: rollback to {rb['to']} goes further back than needed "
                            f"(min(branch point {b}, snapshot start {ss}) = {min(b, ss)}; "
                            f"client at {s}, snapshot {ss}..{se})")
    return problems


def resume_to_targets(client: Client, targets: Dict[int, int], saved: Dict[int, dict],
                      branch: Dict[int, int], num_vbuckets: int, what: str
                      ) -> Tuple[Run, Replay]:
    """Runs the client again until `targets`, then checks every run's events: well-formed
    (rollbacks applied), rollbacks in this second run exactly where the saved state was past
    the producer's `branch` point, and every vbucket at its target."""
    r2 = client.run(until=targets, timeout_s=240)
    expect_ok(r2, what)
    assert r2.summary["stop"] == "complete", r2.describe()
    rp = replay(client.events(), num_vbuckets)
    fail_if(rp.problems, "event stream (rollbacks applied)")
    fail_if(rollback_problems(rp, saved, branch, run=2), "rollbacks")
    fail_if(target_problems(rp, targets), "vbuckets not at their high seqno")
    return r2, rp


# ================================================================== writing to Sluice

def pipelined(conn: mcbin.Conn, ops: Sequence[Tuple[str, bytes, bytes, int]], num_vbuckets: int,
              *, batch: int = 1000, budget_s: float = 180) -> None:
    """Applies ("set"|"delete", key, value, expiry) ops in order, pipelined per batch; an
    ETMPFAIL is retried (with backoff) before the next batch, so each key's ops keep their
    order (a batch never holds the same key twice)."""
    deadline = time.monotonic() + budget_s
    for b in range(0, len(ops), batch):
        chunk = ops[b:b + batch]
        base = conn.next_opaque()
        conn._opaque = (base + len(chunk)) & 0xFFFFFFFF
        pkts = []
        for i, (op, key, value, expiry) in enumerate(chunk):
            vb = vbucket_of(key, num_vbuckets)
            if op == "set":
                pkts.append(encode(mcbin.OP_SET, key, value, set_extras(0, expiry), vb=vb,
                                   opaque=(base + i) & 0xFFFFFFFF))
            else:
                pkts.append(encode(OP_DELETE, key, vb=vb, opaque=(base + i) & 0xFFFFFFFF))
        resps = conn.pipeline(pkts)
        for (op, key, value, expiry), r in zip(chunk, resps):
            if r.status == ETMPFAIL:
                vb = vbucket_of(key, num_vbuckets)
                if op == "set":
                    r = retry_tmpfail(lambda: conn.call(mcbin.OP_SET, key, value,
                                                        set_extras(0, expiry), vb=vb),
                                      deadline=deadline)
                else:
                    r = retry_tmpfail(lambda: conn.call(OP_DELETE, key, vb=vb), deadline=deadline)
            assert r.status == SUCCESS, f"{op} {key!r}: {r}"
        assert time.monotonic() < deadline, f"writing {len(ops)} ops took over {budget_s}s"


def apply_expected(expected: Expected, ops: Sequence[Tuple[str, bytes, bytes, int]]) -> None:
    for op, key, value, expiry in ops:
        k = key.decode()
        if op == "delete":
            expected[k] = ("deleted", None)
        elif expiry:
            expected[k] = ("expired", None)
        else:
            expected[k] = ("live", value.decode())


def all_vb_seqnos(conn: mcbin.Conn) -> Dict[int, int]:
    r = conn.call(mcbin.OP_GET_ALL_VB_SEQNOS, extras=struct.pack(">I", 1))
    assert r.status == SUCCESS and len(r.value) % 10 == 0, r
    return dict(struct.unpack(">HQ", r.value[i:i + 10]) for i in range(0, len(r.value), 10))


def expire_all(conn: mcbin.Conn, keys: Sequence[bytes], expires_at: float,
               num_vbuckets: int) -> None:
    """Waits until the keys' expiry time passed, then GETs each: the server finds it expired,
    answers KEY_ENOENT and deletes it (which gives the expiry its seqno)."""
    time.sleep(max(0.0, expires_at - time.time()))
    for i in range(0, len(keys), 500):
        chunk = keys[i:i + 500]
        resps = conn.pipeline([encode(mcbin.OP_GET, k, vb=vbucket_of(k, num_vbuckets),
                                      opaque=j) for j, k in enumerate(chunk)])
        for k, r in zip(chunk, resps):
            assert r.status == KEY_ENOENT, f"GET of expired {k!r}: {r}"


def build_ops(n_ops: int, n_keys: int, n_expiring: int, seed: int = 3
              ) -> List[Tuple[str, bytes, bytes, int]]:
    """n_keys sets of k{i}, then overwrites and deletions of earlier keys (each key at most
    once per phase), then n_expiring sets of x{i} with a 2 s expiry: n_ops in all."""
    rng = random.Random(seed)
    ops: List[Tuple[str, bytes, bytes, int]] = []
    ops += [("set", b"k%d" % i, b'{"i":%d,"gen":0}' % i, 0) for i in range(n_keys)]
    n_rest = n_ops - n_keys - n_expiring
    n_del = n_rest // 2
    n_over = n_rest - n_del
    over = rng.sample(range(n_keys), n_over)
    dels = rng.sample(range(n_keys), n_del)
    ops += [("set", b"k%d" % i, b'{"i":%d,"gen":1}' % i, 0) for i in over]
    ops += [("delete", b"k%d" % i, b"", 0) for i in dels]
    ops += [("set", b"x%d" % i, b'{"x":%d}' % i, 2) for i in range(n_expiring)]
    assert len(ops) == n_ops
    return ops


# ================================================================== tests against Sluice

@pytest.mark.timeout(600)
def test_dcp_stream_all_vbuckets_and_resume(sluice_factory, tmp_path):
    srv = sluice_factory(bucket_type="couchbase", vbuckets=VBUCKETS, memory_quota_mb=512)
    ops = build_ops(100_000, 90_000, 500)
    expected: Expected = {}
    apply_expected(expected, ops)
    with kv_connect(srv.kv_port, USERNAME, PASSWORD) as conn:
        pipelined(conn, ops[:-500], VBUCKETS)
        t_exp = time.time()
        pipelined(conn, ops[-500:], VBUCKETS)
        expire_all(conn, [k for _, k, _, _ in ops[-500:]], t_exp + 4.0, VBUCKETS)
        targets = all_vb_seqnos(conn)
    assert len(targets) == VBUCKETS and all(t > 0 for t in targets.values()), targets

    client = Client(tmp_path / "client", srv.kv_port)
    r1 = client.run(stop_after=50_000, until=targets, timeout_s=240)
    expect_ok(r1, "first run (stop after 50,000 items)")
    assert r1.summary["items"] >= 50_000 and r1.summary["stop"] == "items", r1.describe()
    saved = client.state()

    r2 = client.run(until=targets, timeout_s=240)
    expect_ok(r2, "second run (resume until every high seqno)")
    assert r2.summary["stop"] == "complete" and r2.summary["rollbacks"] == 0, r2.describe()

    rp = replay(client.events(), VBUCKETS)
    fail_if(rp.problems, "event stream")
    assert rp.runs == 2
    assert not rp.rollbacks, f"rollbacks on resume: {rp.rollbacks[:10]}"
    fail_if(target_problems(rp, targets), "vbuckets not at their high seqno")
    fail_if(final_state_problems(rp, expected), "final state per key")
    # The second run resumed each stream where the first one's saved state stopped, with
    # the uuid and snapshot range it saved; vbuckets already complete were not reopened.
    resumed = [o for o in rp.opens if o["run"] == 2]
    problems = []
    for o in resumed:
        st = saved.get(o["vb"])
        want = (st["seqno"], st["vbuuid"], st["snap_start"], st["snap_end"]) if st else (0, 0, 0, 0)
        got = (o["start"], o["vbuuid"], o["snap_start"], o["snap_end"])
        if got != want:
            problems.append(f"vb {o['vb']}: resumed with (start, uuid, snap) {got}, saved {want}")
        if o["end"] != targets[o["vb"]]:
            problems.append(f"vb {o['vb']}: resumed with end {o['end']}, target {targets[o['vb']]}")
    fail_if(problems, "resumed stream requests")
    unfinished = {vb for vb, t in targets.items() if saved.get(vb, {}).get("seqno", 0) < t}
    assert {o["vb"] for o in resumed} == unfinished
    assert resumed, "the first run already streamed everything: nothing was resumed"
    assert any(saved.get(vb, {}).get("seqno", 0) > 0 for vb in unfinished), \
        "no stream was resumed from the middle"
    bad_ends = [e for e in rp.ends if e["reason"] != "ok"]
    assert not bad_ends, f"streams ended with an error: {bad_ends[:10]}"
    assert {e["vb"] for e in rp.ends if e["run"] == 2} == unfinished, \
        "every resumed stream ends with STREAM_END(ok) at its end seqno"
    assert rp.items_received == r1.summary["items"] + r2.summary["items"]


@pytest.mark.timeout(300)
def test_dcp_expiry_opcode(sluice_factory, tmp_path):
    vbs = 64
    srv = sluice_factory(bucket_type="couchbase", vbuckets=vbs)
    ops = build_ops(2_000, 1_500, 200)
    expected: Expected = {}
    apply_expected(expected, ops)
    with kv_connect(srv.kv_port, USERNAME, PASSWORD) as conn:
        t_exp = time.time()
        pipelined(conn, ops, vbs)
        expire_all(conn, [k for _, k, _, _ in ops[-200:]], t_exp + 4.0, vbs)
        targets = all_vb_seqnos(conn)
    client = Client(tmp_path / "client", srv.kv_port)
    r = client.run(until=targets, extra=["--expiry-opcode"], timeout_s=120)
    expect_ok(r, "stream with enable_expiry_opcode")
    rp = replay(client.events(), vbs)
    fail_if(rp.problems, "event stream")
    fail_if(target_problems(rp, targets), "vbuckets not at their high seqno")
    fail_if(final_state_problems(rp, expected, expired_kinds=("expiration",)),
            "final state per key (expiries as DCP_EXPIRATION)")
    assert r.summary["expirations"] >= 200 and r.summary["deletions"] > 0, r.summary


class Writer(threading.Thread):
    """Pipelines SETs (new keys and overwrites; every value unique), batches of 50 with
    `pause_s` between them, until stopped or the server goes away. Every key it sent
    anything for is in `keys` (applied or not: after a kill -9 the server decides)."""

    BATCH = 50

    def __init__(self, port: int, prefix: str, num_vbuckets: int, pause_s: float):
        super().__init__(daemon=True)
        self.port, self.prefix, self.nvb, self.pause_s = port, prefix, num_vbuckets, pause_s
        self.keys: List[bytes] = []
        self.stop_ev = threading.Event()
        self.acked = 0
        self.error: Optional[BaseException] = None

    def run(self) -> None:
        rng = random.Random(11)
        try:
            conn = kv_connect(self.port, USERNAME, PASSWORD)
        except BaseException as e:  # pragma: no cover
            self.error = e
            return
        n = writes = 0
        try:
            while not self.stop_ev.is_set():
                batch = []
                seen = set()
                for _ in range(self.BATCH):
                    if self.keys and rng.random() < 0.3:
                        k = rng.choice(self.keys)
                    else:
                        k = b"%s%d" % (self.prefix.encode(), n)
                        n += 1
                        self.keys.append(k)
                    if k not in seen:
                        seen.add(k)
                        writes += 1
                        batch.append(encode(mcbin.OP_SET, k, b'{"w":%d}' % writes, set_extras(),
                                            vb=vbucket_of(k, self.nvb), opaque=len(batch)))
                for r in conn.pipeline(batch):
                    self.acked += r.status == SUCCESS
                time.sleep(self.pause_s)
        except (OSError, ConnectionClosed, mcbin.ProtocolError):
            pass  # the server was killed
        finally:
            conn.close()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("when", ["client_stopped", "client_streaming"])
def test_dcp_resume_after_kill9(sluice_factory, tmp_path, when):
    """client_stopped: the client stops after 13,000 items (the initial 10,000 plus live
    ones) and the server is killed right after. client_streaming: the server is killed
    while the client follows a fast writer (so it may hold changes the server had not
    persisted), then the client is stopped with SIGTERM (it saves its state on the way)."""
    srv = sluice_factory(bucket_type="couchbase", vbuckets=VBUCKETS)
    initial = [("set", b"a%d" % i, b'{"a":%d}' % i, 0) for i in range(10_000)]
    with kv_connect(srv.kv_port, USERNAME, PASSWORD) as conn:
        pipelined(conn, initial, VBUCKETS)
    client = Client(tmp_path / "client", srv.kv_port)
    follow = {vb: FOREVER for vb in range(VBUCKETS)}     # run 1 follows the live stream

    writer = Writer(srv.kv_port, "w", VBUCKETS, pause_s=0.01 if when == "client_stopped" else 0)
    writer.start()
    try:
        if when == "client_stopped":
            r1 = client.run(stop_after=13_000, until=follow, timeout_s=180)
            srv.kill9()
        else:
            p = client.start(until=follow, timeout_s=180)
            deadline = time.monotonic() + 120
            while client.items_written() < 13_000 and p.poll() is None:
                assert time.monotonic() < deadline, "the client got no 13,000 items in 120 s"
                time.sleep(0.05)
            srv.kill9()
            time.sleep(0.5)                               # the client sees its streams end
            p.terminate()
            r1 = client.finish(p, 60)
            assert r1.rc == 130 and r1.summary.get("stop") == "signal", r1.describe()
            r1.rc = 0
    finally:
        srv.kill9()
        writer.stop_ev.set()
        writer.join(timeout=30)
    expect_ok(r1, f"first run ({when})")
    saved = client.state()

    srv.start()
    after = [("set", b"b%d" % i, b'{"b":%d}' % i, 0) for i in range(2_000)]
    branch: Dict[int, int] = {}
    with kv_connect(srv.kv_port, USERNAME, PASSWORD) as conn:
        problems = []
        for vb in range(VBUCKETS):
            log = conn.failover_log(vb)
            branch[vb] = log[0][1]
            old_uuid = saved.get(vb, {}).get("vbuuid", 0)
            if old_uuid and old_uuid not in [u for u, _ in log[1:]]:
                problems.append(f"vb {vb}: after kill -9 the failover log {log} has no new "
                                f"branch above the client's uuid {old_uuid}")
        fail_if(problems, "failover logs after an unclean restart")
        pipelined(conn, after, VBUCKETS)
        targets = all_vb_seqnos(conn)

    r2, rp = resume_to_targets(client, targets, saved, branch, VBUCKETS,
                               "second run (resume after the server's kill -9 and restart)")
    # What the client reconstructed is what the server holds.
    keys = [k for _, k, _, _ in initial] + writer.keys + [k for _, k, _, _ in after]
    with kv_connect(srv.kv_port, USERNAME, PASSWORD) as conn:
        truth = get_many(conn, keys, vbuckets=VBUCKETS).values
    problems = []
    for k, v in truth.items():
        it = rp.final.get(k.decode())
        if v is not None:
            if it is None or it.kind != "mutation" or it.value != v.decode():
                problems.append(f"{k!r}: server holds {v!r}, client's last event {it}")
        elif it is not None and it.kind == "mutation":
            problems.append(f"{k!r}: absent on the server, client's last event {it}")
    fail_if(problems, "client state vs server after kill -9")
    print(f"kill -9 ({when}): {len(rp.rollbacks)} rollbacks {rp.rollbacks[:3]}, "
          f"run 1 {r1.summary}, run 2 {r2.summary}")


# ================================================================== guards (fake producer)

@pytest.fixture
def fake():
    f = FakeProducer(num_vbuckets=64, bucket=BUCKET, username=USERNAME, password=PASSWORD)
    yield f
    f.close()


@pytest.mark.timeout(180)
def test_guard_resume_against_fake_producer(fake, tmp_path):
    fake.apply(fake_ops(3000, seed=1))
    client = Client(tmp_path / "client", fake.port)
    targets_path = tmp_path / "targets.json"
    r1 = client.run(stop_after=1000, seqnos_out=targets_path, timeout_s=60)
    expect_ok(r1, "fake producer, first run")
    assert r1.summary["items"] == 1000 and r1.summary["stop"] == "items", r1.describe()
    targets = {int(k): v for k, v in json.loads(targets_path.read_text()).items()}
    assert targets == fake.high_seqnos()
    # What gocbcore sent to open the DCP connection.
    assert fake.opens == [(client.name, 0x01)], fake.opens
    assert fake.controls == GOCBCORE_DEFAULT_CONTROLS, fake.controls
    saved = client.state()

    r2 = client.run(until=targets, timeout_s=60)
    expect_ok(r2, "fake producer, resumed run")
    assert r2.summary["stop"] == "complete" and r2.summary["rollbacks"] == 0, r2.describe()
    assert not [r for r in fake.stream_reqs if r["status"] != "ok"], fake.stream_reqs
    rp = replay(client.events(), fake.nvb)
    fail_if(rp.problems, "event stream")
    assert rp.runs == 2 and not rp.rollbacks
    fail_if(target_problems(rp, targets), "targets")
    fail_if(final_state_problems(rp, fake.truth()), "final state")
    resumed = [o for o in rp.opens if o["run"] == 2]
    assert resumed and all(o["start"] == saved[o["vb"]]["seqno"] and
                           o["vbuuid"] == saved[o["vb"]]["vbuuid"] for o in resumed)
    assert any(o["start"] > 0 for o in resumed)
    # A third run has nothing to do: every vbucket is at its target on the same branch.
    n_reqs = len(fake.stream_reqs)
    r3 = client.run(until=targets, timeout_s=60)
    expect_ok(r3, "fake producer, third run")
    assert r3.summary["items"] == 0 and r3.summary["vbuckets"] == 0 and \
        len(fake.stream_reqs) == n_reqs, r3.describe()


@pytest.mark.timeout(180)
def test_guard_rollback_against_fake_producer(fake, tmp_path):
    fake.apply(fake_ops(3000, seed=2))
    client = Client(tmp_path / "client", fake.port)
    r1 = client.run(stop_after=1200, until=fake.high_seqnos(), timeout_s=60)
    expect_ok(r1, "fake producer, first run")
    saved = client.state()

    # New branches: per vb keep everything, the snapshot end just below the client's seqno
    # (rollback needed), or nothing at all.
    points = {}
    for vb, v in fake.vbs.items():
        s = saved.get(vb, {}).get("seqno", 0)
        below = [e for _, e in v.snaps if e < s]
        choice = vb % 3
        points[vb] = v.high if choice == 0 or not below else (below[-1] if choice == 1 else 0)
    fake.new_branch(points)
    fake.apply(fake_ops(600, seed=3, gen=1))
    targets = fake.high_seqnos()

    r2 = client.run(until=targets, timeout_s=60)
    expect_ok(r2, "fake producer, run after the new branches")
    assert r2.summary["stop"] == "complete", r2.describe()
    rp = replay(client.events(), fake.nvb)
    fail_if(rp.problems, "event stream (rollbacks applied)")
    fail_if(rollback_problems(rp, saved, points, run=2), "rollbacks")
    assert r2.summary["rollbacks"] == len(rp.rollbacks) > 0
    assert any(rb["to"] == 0 for rb in rp.rollbacks) and any(rb["to"] > 0 for rb in rp.rollbacks)
    fail_if(target_problems(rp, targets), "targets")
    fail_if(final_state_problems(rp, fake.truth()), "final state")


@pytest.mark.timeout(120)
def test_guard_expiry_opcode_against_fake_producer(fake, tmp_path):
    fake.apply(fake_ops(600, seed=4))
    client = Client(tmp_path / "client", fake.port)
    r = client.run(until=fake.high_seqnos(), extra=["--expiry-opcode"], timeout_s=60)
    expect_ok(r, "fake producer, --expiry-opcode")
    assert fake.opens == [(client.name, 0x21)], fake.opens      # Producer | IncludeDeleteTimes
    want = GOCBCORE_DEFAULT_CONTROLS[:3] + [("enable_expiry_opcode", "true")] + \
        GOCBCORE_DEFAULT_CONTROLS[3:]
    assert fake.controls == want, fake.controls
    rp = replay(client.events(), fake.nvb)
    fail_if(rp.problems, "event stream")
    fail_if(final_state_problems(rp, fake.truth(), expired_kinds=("expiration",)), "final state")
    assert r.summary["expirations"] > 0 and r.summary["deletions"] > 0, r.summary


def test_guard_checker_catches_bad_streams():
    nvb = 64
    k = {vb: next(f"c{i}" for i in range(10 ** 6) if vbucket_of(f"c{i}".encode(), nvb) == vb)
         for vb in (1, 2)}

    def mut(vb, s, key=None, value="x"):
        return {"type": "mutation", "vb": vb, "seqno": s, "key": key or k[vb], "value": value}

    def snap(vb, a, b):
        return {"type": "snapshot", "vb": vb, "start": a, "end": b, "flags": 2}

    def opened(vb, start=0):
        return {"type": "open", "vb": vb, "start": start, "end": 9, "vbuuid": 1,
                "snap_start": start, "snap_end": start, "failover": [[1, 0]]}

    start = {"type": "start"}
    good = [start, opened(1), snap(1, 1, 5), mut(1, 2), mut(1, 4)]
    assert replay(good, nvb).problems == []
    bad = {
        "duplicate": good + [mut(1, 4)],
        "decreasing": good + [mut(1, 3)],
        "outside snapshot": good + [mut(1, 6)],
        "no marker": [start, opened(1), mut(1, 1)],
        "wrong vbucket": [start, opened(2), snap(2, 1, 5), mut(2, 1, key=k[1])],
        "resume skips": good + [start, opened(1, start=3)],
        "marker of an old stream": good + [start, opened(1, start=4), mut(1, 5)],
    }
    for what, evs in bad.items():
        assert replay(evs, nvb).problems, f"checker missed: {what}"
    rp = replay(good, nvb)
    assert final_state_problems(rp, {k[1]: ("live", "x")}) == []
    assert final_state_problems(rp, {k[1]: ("live", "y")})
    assert final_state_problems(rp, {k[1]: ("deleted", None)})
    assert final_state_problems(rp, {})                       # streamed but never written
    # A rollback to 0 when the client's complete snapshot (3..3) lies within the history
    # shared up to 5 is flagged; so is a client past the branch point left alone.
    rb = [start, {"type": "rollback", "vb": 1, "to": 0, "from": 3, "snap_start": 3,
                  "snap_end": 3, "vbuuid": 1}]
    before = {1: {"seqno": 3, "snap_start": 3, "snap_end": 3}}
    assert rollback_problems(replay(rb, nvb), before, {1: 5}, run=1)
    assert rollback_problems(replay([start], nvb), {1: {"seqno": 7, "snap_start": 7,
                                                        "snap_end": 7}}, {1: 5}, run=1)
    assert not rollback_problems(replay([start], nvb), before, {1: 5}, run=1)
