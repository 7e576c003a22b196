"""Crash loop: kill -9 at random moments, and nothing confirmed persisted is ever lost.

One couchbase bucket (64 vbuckets, small quota) on one data dir, CYCLES times:

1. start the server (after the previous cycle's kill -9) and check what survived;
2. a writer thread pipelines SETs over the memcached port (HELLO MutationSeqno): new keys
   and overwrites of earlier ones, each value naming (key, cycle, counter). Every response
   gives (vb_uuid, seqno);
3. meanwhile this thread polls OBSERVE_SEQNO(vb, uuid) for every vbucket with
   unconfirmed writes; a write whose seqno is <= the persisted seqno is *confirmed*;
4. kill -9 at a random moment (seeded RNG; the seed is printed, set CRASH_LOOP_SEED to
   replay the same schedule).

After each restart:

* every key holds its last confirmed value, or one of the values sent after it (those
  may or may not have reached the disk; a write answered ETMPFAIL was not applied); a key
  with no confirmed write may also be missing. What was read becomes the new floor:
  a write lost in one crash must not come back later;
* for every vbucket, STAT vbucket-seqno `high_seqno` and `last_persisted_seqno` are at
  least the highest persisted seqno OBSERVE_SEQNO reported before the kill, so they never
  go backwards across cycles;
* every vbucket started a new failover-log branch: a new uuid, and OBSERVE_SEQNO with the
  old uuid answers format 1 (old uuid found in the log) with the branch point = the
  restart's high seqno; the new uuid answers format 0 with persisted == current;
* curr_items equals the number of keys that exist.

The end: a last write phase without a kill, a clean SIGTERM stop (exit code 0) and a
restart: every key then holds exactly its last acknowledged value, and no vbucket started
a new branch.
"""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

import pytest

import mcbin
from mcbin import (ETMPFAIL, OP_SET, SUCCESS, Conn, ConnectionClosed, ProtocolError,
                   encode, get_many, set_extras, vbucket_of)

pytestmark = pytest.mark.timeout(300)

CYCLES = 30
VBUCKETS = 64
QUOTA_MB = 32
BATCH = 20                 # SETs per pipelined batch
BATCH_PAUSE_S = 0.006      # between batches: keeps the key count (and the checks) bounded
OVERWRITE_RATIO = 0.3      # share of writes that overwrite an existing key
KILL_AFTER_S = (0.05, 1.6) # the kill comes this long after the writer started
FINAL_WRITE_S = 0.5
POLL_PAUSE_S = 0.01
TOTAL_BUDGET_S = 240       # every wait below is bounded by this overall deadline

ABSENT = None


@dataclass
class Write:
    key: bytes
    value: bytes
    vb: int
    cycle: int
    status: Optional[int] = None   # None: sent, no answer (in flight at the kill)
    uuid: Optional[int] = None
    seqno: Optional[int] = None


class KeyState:
    """What a key may hold after a crash: its floor (the last value known durable: the last
    confirmed write, or what was read after the previous restart; ABSENT if none) or a
    value sent after it."""

    __slots__ = ("floor", "floor_from_write", "later")

    def __init__(self):
        self.floor: Optional[bytes] = ABSENT
        self.floor_from_write = False  # floor set by a confirmed write in this cycle
        self.later: List[Write] = []

    def allowed(self) -> List[Optional[bytes]]:
        vals = [self.floor]
        vals += [w.value for w in self.later if w.status in (None, SUCCESS)]
        return vals

    def last_acked(self) -> Optional[bytes]:
        for w in reversed(self.later):
            if w.status == SUCCESS:
                return w.value
        return self.floor


class Model:
    def __init__(self):
        self.lock = threading.Lock()
        self.keys: Dict[bytes, KeyState] = {}
        self.order: List[bytes] = []          # keys in creation order (for overwrites)
        self.pending: Dict[int, List[Write]] = {}  # vb -> acked, unconfirmed writes
        self.errors: List[str] = []
        self.writes_sent = 0
        self.writes_acked = 0
        self.writes_confirmed = 0
        self.tmpfails = 0
        self.conn_lost: Optional[str] = None

    def sent(self, w: Write) -> None:
        with self.lock:
            st = self.keys.get(w.key)
            if st is None:
                st = self.keys[w.key] = KeyState()
                self.order.append(w.key)
            st.later.append(w)
            self.writes_sent += 1

    def answered(self, w: Write, status: int, uuid: Optional[int], seqno: Optional[int]) -> None:
        with self.lock:
            w.status, w.uuid, w.seqno = status, uuid, seqno
            if status == SUCCESS:
                self.writes_acked += 1
                self.pending.setdefault(w.vb, []).append(w)
            elif status == ETMPFAIL:
                self.tmpfails += 1

    def confirm(self, vb: int, persisted: int) -> None:
        with self.lock:
            ws = self.pending.get(vb, [])
            n = 0
            while n < len(ws) and ws[n].seqno <= persisted:
                n += 1
            for w in ws[:n]:
                self.writes_confirmed += 1
                st = self.keys[w.key]
                # Writes to one key are in one vbucket, acknowledged in seqno order: a
                # confirmed write is the new floor, unless a later one already was.
                if w in st.later:
                    i = st.later.index(w)
                    st.floor = w.value
                    st.floor_from_write = True
                    st.later = st.later[i + 1:]
            del ws[:n]

    def reset_after_read(self, values: Dict[bytes, Optional[bytes]]) -> None:
        """After a restart's check: what was read is on disk, the new floor."""
        with self.lock:
            for k, v in values.items():
                st = self.keys[k]
                st.floor, st.floor_from_write, st.later = v, False, []
            self.pending.clear()


def make_value(key: bytes, cycle: int, counter: int) -> bytes:
    head = b"%s|cycle=%d|n=%d|" % (key, cycle, counter)
    return head + b"." * (96 - len(head) % 32)


def writer(port: int, model: Model, cycle: int, rng: random.Random, stop: threading.Event,
           vb_uuid: Dict[int, int], deadline: float) -> None:
    """Pipelines SET batches until `stop` or the connection dies (the kill)."""
    counter = 0
    try:
        conn = Conn(port, timeout=10)
        acked = conn.hello([mcbin.FEATURE_MUTATION_SEQNO])
        if mcbin.FEATURE_MUTATION_SEQNO not in acked:
            model.errors.append(f"HELLO did not ack MutationSeqno: {acked}")
            return
    except (OSError, ConnectionClosed) as e:
        model.errors.append(f"cycle {cycle}: writer could not connect: {e!r}")
        return
    retry: List[bytes] = []
    try:
        while not stop.is_set() and time.monotonic() < deadline:
            batch: List[Write] = []
            for _ in range(BATCH):
                if retry:
                    key = retry.pop()
                elif model.order and rng.random() < OVERWRITE_RATIO:
                    key = model.order[rng.randrange(len(model.order))]
                else:
                    key = b"k%02d-%06d" % (cycle, counter)
                w = Write(key, make_value(key, cycle, counter), vbucket_of(key, VBUCKETS), cycle)
                counter += 1
                batch.append(w)
            pkts = []
            for i, w in enumerate(batch):
                model.sent(w)  # before sending: an in-flight value may land on disk
                pkts.append(encode(OP_SET, w.key, w.value, set_extras(0, 0), opaque=i + 1))
            conn.send(b"".join(pkts))
            for i, w in enumerate(batch):
                r = conn.recv()
                if r.opcode != OP_SET or r.opaque != i + 1:
                    raise ProtocolError(f"out-of-order answer {r} for SET #{i + 1}")
                if r.status == SUCCESS:
                    uuid, seqno = r.seqno_extras()
                    if uuid != vb_uuid[w.vb]:
                        raise ProtocolError(f"SET {w.key!r} in vb {w.vb} answered uuid {uuid}, "
                                            f"the vbucket's uuid is {vb_uuid[w.vb]}")
                    model.answered(w, SUCCESS, uuid, seqno)
                elif r.status == ETMPFAIL:
                    model.answered(w, ETMPFAIL, None, None)
                    retry.append(w.key)
                else:
                    raise ProtocolError(f"SET {w.key!r} failed: {r}")
            if retry:
                time.sleep(0.02)
            elif BATCH_PAUSE_S:
                time.sleep(BATCH_PAUSE_S)
    except (OSError, ConnectionClosed) as e:
        model.conn_lost = repr(e)  # expected after the kill; an error in the final phase
    except Exception as e:  # noqa: BLE001 - reported by the test
        model.errors.append(f"cycle {cycle}: writer: {e!r}")
    finally:
        conn.close()


def vb_seqno_stats(conn: Conn) -> Dict[int, Dict[str, int]]:
    st = conn.stat("vbucket-seqno")
    out: Dict[int, Dict[str, int]] = {}
    for vb in range(VBUCKETS):
        p = f"vb_{vb}:"
        try:
            out[vb] = {"high": int(st[p + "high_seqno"]),
                       "persisted": int(st[p + "last_persisted_seqno"]),
                       "uuid": int(st[p + "uuid"])}
        except KeyError as e:
            raise AssertionError(f"STAT vbucket-seqno lacks {e} (got {len(st)} stats)")
    return out


def test_crash_loop(sluice_factory):
    seed = int(os.environ.get("CRASH_LOOP_SEED") or random.SystemRandom().randrange(2 ** 32))
    print(f"\ncrash loop seed: {seed} (replay with CRASH_LOOP_SEED={seed})")
    rng = random.Random(seed)
    t_start = time.monotonic()
    deadline = t_start + TOTAL_BUDGET_S
    srv = sluice_factory(bucket_type="couchbase", vbuckets=VBUCKETS, memory_quota_mb=QUOTA_MB,
                         start=False)
    model = Model()
    prev: Optional[Dict[int, Dict[str, int]]] = None   # per vb: uuid, high at cycle start
    persisted_floor = {vb: 0 for vb in range(VBUCKETS)}  # highest persisted seqno seen
    confirmed_checked = 0
    kills_with_writes_in_flight = 0
    restart_times: List[float] = []
    outcome = {"kept": 0, "lost": 0}  # keys with acknowledged, unconfirmed writes at a kill

    def check_after_restart(conn: Conn, cycle: int, clean: bool) -> Dict[int, Dict[str, int]]:
        nonlocal confirmed_checked
        tag = f"[seed {seed}, before cycle {cycle}, after {'SIGTERM' if clean else 'kill -9'}]"
        now = vb_seqno_stats(conn)
        # 1. seqnos never go backwards
        for vb in range(VBUCKETS):
            assert now[vb]["high"] >= persisted_floor[vb], (
                f"{tag} vb {vb}: high_seqno {now[vb]['high']} < persisted seqno "
                f"{persisted_floor[vb]} confirmed by OBSERVE_SEQNO before the restart")
            assert now[vb]["persisted"] >= persisted_floor[vb], (
                f"{tag} vb {vb}: last_persisted_seqno {now[vb]['persisted']} < "
                f"{persisted_floor[vb]} confirmed before the restart")
            if prev is not None:
                assert now[vb]["high"] >= prev[vb]["high"], (
                    f"{tag} vb {vb}: high_seqno went back from {prev[vb]['high']} "
                    f"to {now[vb]['high']}")
        # 2. failover log: a new branch after kill -9, the same one after a clean stop
        if prev is not None:
            for vb in range(VBUCKETS):
                old = prev[vb]["uuid"]
                status, obs = conn.observe_seqno(vb, old)
                assert status == SUCCESS, (
                    f"{tag} vb {vb}: OBSERVE_SEQNO with the previous uuid {old} answered "
                    f"status 0x{status:02x}: the uuid is not in the failover log")
                if clean:
                    assert now[vb]["uuid"] == old and obs.format == 0, (
                        f"{tag} vb {vb}: a clean restart started a new branch "
                        f"(uuid {old} -> {now[vb]['uuid']}, format {obs.format})")
                else:
                    assert now[vb]["uuid"] != old, (
                        f"{tag} vb {vb}: uuid {old} unchanged after kill -9 (no new branch)")
                    assert obs.format == 1 and obs.old_uuid == old, (
                        f"{tag} vb {vb}: OBSERVE_SEQNO(old uuid {old}) should answer format 1 "
                        f"(old uuid found in the failover log), got {obs}")
                    assert obs.vb_uuid == now[vb]["uuid"], (
                        f"{tag} vb {vb}: OBSERVE_SEQNO names latest uuid {obs.vb_uuid}, "
                        f"STAT says {now[vb]['uuid']}")
                    assert obs.old_seqno == now[vb]["high"], (
                        f"{tag} vb {vb}: the old branch ends at {obs.old_seqno}, expected the "
                        f"restart's high seqno {now[vb]['high']}")
                    assert obs.old_seqno >= persisted_floor[vb], (
                        f"{tag} vb {vb}: branch point {obs.old_seqno} is below the persisted "
                        f"seqno {persisted_floor[vb]}")
                status, obs = conn.observe_seqno(vb, now[vb]["uuid"])
                assert status == SUCCESS and obs.format == 0, (
                    f"{tag} vb {vb}: OBSERVE_SEQNO(current uuid): status 0x{status:02x} {obs}")
                assert obs.persisted == obs.current == now[vb]["high"], (
                    f"{tag} vb {vb}: just after warmup persisted/current should both be "
                    f"{now[vb]['high']}: {obs}")
        # 3. data
        keys = list(model.keys)
        res = get_many(conn, keys, vbuckets=0, deadline=deadline)
        assert not res.silent_but_found, (
            f"{tag} GETKQ answered a miss for {len(res.silent_but_found)} keys a plain GET "
            f"then found, e.g. {res.silent_but_found[:5]}")
        values = res.values
        bad = []
        for k in keys:
            st = model.keys[k]
            v = values[k]
            if clean:
                ok = v == st.last_acked()
            else:
                ok = v in st.allowed()
            if not ok:
                bad.append((k, v, st))
                continue
            if st.floor_from_write:
                confirmed_checked += 1
            if not clean and any(w.status == SUCCESS for w in st.later):
                # Acknowledged, never confirmed: the crash may or may not have kept it.
                outcome["kept" if v != st.floor else "lost"] += 1
        if bad:
            lines = []
            for k, v, st in bad[:10]:
                exp = [st.last_acked()] if clean else st.allowed()
                lines.append(f"  {k!r}: read {v!r}\n      allowed {exp!r}")
            pytest.fail(f"{tag} {len(bad)} of {len(keys)} keys hold a value they may not hold "
                        f"({'last acknowledged' if clean else 'last confirmed or later'}):\n"
                        + "\n".join(lines), pytrace=False)
        present = sum(1 for v in values.values() if v is not None)
        curr_items = int(conn.stat("")["curr_items"])
        assert curr_items == present, (
            f"{tag} curr_items {curr_items} but {present} of our keys exist")
        model.reset_after_read(values)
        return now

    for cycle in range(CYCLES + 1):
        assert time.monotonic() < deadline, f"out of time budget at cycle {cycle}"
        t0 = time.monotonic()
        srv.start()
        restart_times.append(time.monotonic() - t0)
        with Conn(srv.memcached_port) as conn:
            conn.hello([mcbin.FEATURE_MUTATION_SEQNO])
            now = check_after_restart(conn, cycle, clean=False)
        for vb in range(VBUCKETS):
            persisted_floor[vb] = max(persisted_floor[vb], now[vb]["high"])
        prev = now
        final = cycle == CYCLES
        vb_uuid = {vb: now[vb]["uuid"] for vb in range(VBUCKETS)}
        stop = threading.Event()
        model.conn_lost = None
        wt = threading.Thread(target=writer, daemon=True,
                              args=(srv.memcached_port, model, cycle, random.Random(rng.random()),
                                    stop, vb_uuid, deadline))
        run_for = FINAL_WRITE_S if final else rng.uniform(*KILL_AFTER_S)
        poll = Conn(srv.memcached_port)
        last_persisted: Dict[int, int] = {}
        wt.start()
        t_kill = time.monotonic() + run_for
        try:
            while time.monotonic() < t_kill:
                with model.lock:
                    vbs = [vb for vb, ws in model.pending.items() if ws]
                for vb in vbs:
                    status, obs = poll.observe_seqno(vb, vb_uuid[vb])
                    assert status == SUCCESS and obs.format == 0 and obs.vb_uuid == vb_uuid[vb], (
                        f"[seed {seed}, cycle {cycle}] vb {vb}: OBSERVE_SEQNO(uuid "
                        f"{vb_uuid[vb]}) while running: status 0x{status:02x}, {obs}")
                    assert obs.current >= obs.persisted >= last_persisted.get(vb, 0), (
                        f"[seed {seed}, cycle {cycle}] vb {vb}: persisted seqno went back or "
                        f"passed current: {obs} (before: {last_persisted.get(vb)})")
                    last_persisted[vb] = obs.persisted
                    persisted_floor[vb] = max(persisted_floor[vb], obs.persisted)
                    model.confirm(vb, obs.persisted)
                time.sleep(POLL_PAUSE_S)
        finally:
            poll.close()
            if not final:
                srv.kill9()
            stop.set()
        if final:
            stop.set()
            wt.join(timeout=30)
            assert not wt.is_alive(), "writer did not stop"
            assert not model.errors, model.errors
            assert model.conn_lost is None, f"writer lost its connection: {model.conn_lost}"
            with Conn(srv.memcached_port) as conn:
                prev = vb_seqno_stats(conn)  # what a clean restart must reproduce exactly
            rc = srv.stop()
            assert rc == 0, f"SIGTERM stop exited with {rc}"
            srv.start()
            with Conn(srv.memcached_port) as conn:
                now = check_after_restart(conn, cycle + 1, clean=True)
            for vb in range(VBUCKETS):
                assert now[vb]["high"] == prev[vb]["high"], (
                    f"[seed {seed}] vb {vb}: high_seqno {prev[vb]['high']} before the clean "
                    f"stop, {now[vb]['high']} after the restart")
            break
        wt.join(timeout=30)
        assert not wt.is_alive(), "writer did not stop after the kill"
        assert not model.errors, model.errors
        with model.lock:
            if any(w.status is None for st in model.keys.values() for w in st.later):
                kills_with_writes_in_flight += 1

    elapsed = time.monotonic() - t_start
    print(f"crash loop: {CYCLES} kill -9 cycles + clean stop in {elapsed:.1f}s; "
          f"{len(model.keys)} keys, {model.writes_sent} SETs sent, {model.writes_acked} "
          f"acknowledged, {model.writes_confirmed} confirmed persisted, {model.tmpfails} "
          f"ETMPFAIL; {confirmed_checked} confirmed values checked after restarts; "
          f"{kills_with_writes_in_flight} kills with writes in flight; keys with acknowledged "
          f"but unconfirmed writes: {outcome['kept']} kept the newer value, {outcome['lost']} "
          f"fell back to the confirmed one; restart "
          f"max {max(restart_times):.2f}s")
    assert model.writes_confirmed >= 1000, "too few confirmed writes for the test to mean much"
    assert confirmed_checked >= 1000, "too few confirmed values checked after restarts"
