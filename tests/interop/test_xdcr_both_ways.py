"""XDCR both ways: A -> B and B -> A on one pair of buckets at once, with a writer on each
side writing conflicting versions of the same keys concurrently, for both conflict modes.

A is a `sluice cluster up` cluster of 2 nodes (1 replica, 64 vbuckets); B is 2 `sluice
server` processes (the second joined and rebalanced in), with its own administrator. Each
side holds a remote reference to the other and one replication of the pair's bucket to it.

* test_both_ways_converge_without_ping_pong[seqno|lww]: two threads, one SDK connection
  per cluster, write the same 300 keys for 4 rounds each, in an order of their own (seeded,
  the seed is printed): whole-body upserts tagged with the writer, deletions, and sub-doc
  mutations of a user xattr and one body field. Once both stop, both sides must converge to
  identical documents: for every key, live on both with the same `$document` CAS, revision,
  flags, expiry, datatype, value size and crc32c, the same body bytes and user xattr, or
  deleted on both (their tombstones, where both keep one, with the same CAS and revision).
  It prints how many keys each writer "won" (the body's writer tag). No ping-pong: once
  converged, both tasks show changesLeft 0 and the sum of their docsWritten stays the same
  for 3 s while nothing writes (a version bouncing between the clusters would keep being
  written), and every key is still equal after that.

The conflict rules themselves (which version wins) are table-tested in Rust; this checks
that both clusters apply them alike and that what one side sends back to the other stops.

Run: cd tests/interop && python3 -m pytest test_xdcr_both_ways.py -q -p no:cacheprovider
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Dict, List, Optional, Tuple

import couchbase.subdocument as SD
import pytest
from couchbase.exceptions import CouchbaseException, DocumentNotFoundException
from couchbase.options import MutateInOptions, RemoveOptions, UpsertOptions

from conftest import HOST, PASSWORD, USERNAME
from test_cluster_up import free_base
from xdcr_helpers import (AUTH_A, AUTH_B, B_PASS, B_USER, VBS, add_remote_ref, cancel,
                          connect, converge_equal, create_bucket, eventually, ready_collection,
                          recheck_equal, set_paused, side_state, start_cluster_a,
                          start_cluster_b, start_replication_at, stop_cluster, task_of,
                          tasks_report)
from mcbin import vbucket_of

pytestmark = pytest.mark.timeout(240)

KEYS = 300
ROUNDS = 3
QUIET_S = 3.0


@pytest.fixture(scope="module")
def cluster_a(tmp_path_factory):
    a = start_cluster_a(tmp_path_factory.mktemp("xdcr2-a"), free_base(), nodes=2, replicas=1)
    try:
        yield a
    finally:
        stop_cluster(a.proc)


@pytest.fixture(scope="module")
def cluster_b(sluice_module_factory):
    return start_cluster_b(sluice_module_factory, nodes=2)


@pytest.fixture(scope="module")
def refs(cluster_a, cluster_b):
    """(the reference on A to B, the reference on B to A)."""
    to_b = add_remote_ref(cluster_a.url, "toB", cluster_b.hostname, B_USER, B_PASS)
    to_a = add_remote_ref(cluster_b.url, "toA", f"{HOST}:{cluster_a.admin_ports[0]}",
                          USERNAME, PASSWORD, auth=AUTH_B)
    return to_b, to_a


@pytest.fixture(scope="module")
def sdks(cluster_a, cluster_b):
    ca = connect(cluster_a.connstr, USERNAME, PASSWORD)
    cb = connect(cluster_b.connstr, B_USER, B_PASS)
    yield ca, cb
    ca.close()
    cb.close()


class Writer(threading.Thread):
    """Writes versions tagged `tag` of every key, `rounds` times, in its own seeded order:
    mostly whole-body upserts, some removals, some sub-doc mutations (a user xattr and the
    body's writer tag). A key the other side deleted meanwhile is not found by a removal
    or a sub-doc mutation; that is counted, not an error."""

    def __init__(self, col, tag: str, keys: List[str], rounds: range, seed: int,
                 start_together: threading.Barrier, share: float = 1.0):
        super().__init__(daemon=True, name=f"writer-{tag}")
        self.col, self.tag, self.keys, self.rounds = col, tag, keys, rounds
        self.share = share  # the part of the keys each round writes
        self.rng = random.Random(seed)
        self.barrier = start_together
        self.ops: Counter = Counter()
        self.errors: Counter = Counter()
        self.error_samples: List[str] = []

    def run(self) -> None:
        timeout = timedelta(seconds=5)
        self.barrier.wait(timeout=30)
        for r in self.rounds:
            order = self.keys[:]
            self.rng.shuffle(order)
            order = order[:round(len(order) * self.share)]
            for n, key in enumerate(order):
                roll = self.rng.random()
                try:
                    if roll < 0.10:
                        self.col.remove(key, RemoveOptions(timeout=timeout))
                        self.ops["remove"] += 1
                    elif roll < 0.25:
                        self.col.mutate_in(key, [
                            SD.upsert("meta.by", f"{self.tag}-r{r}", xattr=True,
                                      create_parents=True),
                            SD.upsert("w", self.tag)],
                            MutateInOptions(timeout=timeout))
                        self.ops["mutate_in"] += 1
                    else:
                        body = {"w": self.tag, "r": r, "n": n, "key": key,
                                "pad": "x" * self.rng.randrange(0, 200)}
                        self.col.upsert(key, body, UpsertOptions(timeout=timeout))
                        self.ops["upsert"] += 1
                except DocumentNotFoundException:
                    self.ops["not_found"] += 1
                except CouchbaseException as e:
                    self.errors[type(e).__name__] += 1
                    if len(self.error_samples) < 5:
                        self.error_samples.append(f"{key}: {e!r}"[:300])


def keys_for(prefix: str) -> List[str]:
    keys = [f"{prefix}{i}" for i in range(KEYS)]
    covered = {vbucket_of(k.encode(), VBS) for k in keys}
    assert len(covered) == VBS, f"the keys fall in only {len(covered)} vbuckets"
    return keys


def counter(url: str, rid: str, auth: str, field: str) -> int:
    t = task_of(url, rid, auth)
    assert t is not None, f"no task {rid} at {url}"
    return int(t.get(field) or 0)


def as_int(v) -> int:
    """A `$document` number: an int, a decimal string (revid) or a hex one (CAS)."""
    if isinstance(v, int):
        return v
    return int(v, 16) if str(v).startswith("0x") else int(v)


def rank(mode: str, st: dict) -> Tuple[int, int]:
    """How a version ranks in the bucket's conflict resolution (its first two criteria,
    which a CAS of its own always settles): revision then CAS (seqno), CAS then revision
    (lww)."""
    cas, rev = as_int(st["CAS"]), as_int(st["revid"])
    return (rev, cas) if mode == "seqno" else (cas, rev)


def run_writers(what: str, writers: List[Writer], diag) -> None:
    started = time.monotonic()
    for w in writers:
        w.start()
    for w in writers:
        w.join(timeout=150)
        assert not w.is_alive(), f"{what}: writer {w.tag} still running after 150 s"
    print(f"{what}: writers done in {time.monotonic() - started:.1f}s: "
          + ", ".join(f"{w.tag} {dict(w.ops)}" for w in writers))
    for w in writers:
        assert not w.errors, (f"{what}: writer {w.tag} got errors {dict(w.errors)}: "
                              f"{w.error_samples}\n{diag()}")


@pytest.mark.parametrize("mode", ["seqno", "lww"])
def test_both_ways_converge_without_ping_pong(mode, cluster_a, cluster_b, refs, sdks):
    a, b = cluster_a, cluster_b
    ref_b, ref_a = refs
    sdk_a, sdk_b = sdks
    bucket = f"bw_{mode}"
    create_bucket(a.url, AUTH_A, bucket, conflictResolutionType=mode)
    create_bucket(b.url, AUTH_B, bucket, conflictResolutionType=mode)
    col_a = ready_collection(sdk_a, bucket)
    col_b = ready_collection(sdk_b, bucket)
    rid_ab = start_replication_at(a.url, bucket, ref_b, bucket)
    rid_ba = start_replication_at(b.url, bucket, ref_a, bucket, auth=AUTH_B)
    sides = ((a.url, rid_ab, AUTH_A), (b.url, rid_ba, AUTH_B))

    def diag() -> str:
        return "\n".join([
            f"A -> B {rid_ab}, B -> A {rid_ba}",
            "A's tasks:", tasks_report(a.urls, AUTH_A),
            "B's tasks:", tasks_report(b.urls, AUTH_B),
            "A's logs:", a.log_tail(15), "B's logs:", b.log_tail(15)])

    def all_status(status: str) -> bool:
        return all((task_of(url, rid, auth) or {}).get("status") == status
                   for url, rid, auth in sides)

    try:
        eventually("both tasks running", lambda: all_status("running"), timeout=20,
                   diag=diag)
        seed = random.randrange(1 << 30)
        print(f"[{mode}] seed {seed}")
        keys = keys_for(f"bw-{mode}-")

        # 1. Both replications running: each version crosses while the other side writes.
        barrier = threading.Barrier(2)
        run_writers(f"[{mode}] replicating", [
            Writer(col_a, "A", keys, range(0, ROUNDS), seed, barrier),
            Writer(col_b, "B", keys, range(0, ROUNDS), seed + 1, barrier)], diag)

        # 2. Both paused: each side writes a different share of the keys, a different
        # number of times, so the two versions of a key really conflict when they meet.
        for url, rid, auth in sides:
            r = set_paused(url, rid, True, auth)
            assert r.status == 200, f"pause {rid}: {r}"
        eventually("both tasks paused", lambda: all_status("paused"), timeout=20, diag=diag)
        barrier = threading.Barrier(2)
        run_writers(f"[{mode}] paused", [
            Writer(col_a, "A", keys, range(ROUNDS, ROUNDS + 2), seed + 2, barrier, 0.6),
            Writer(col_b, "B", keys, range(ROUNDS, ROUNDS + 2), seed + 3, barrier, 0.6)],
            diag)
        # Each side's version of every key as the pause ends: the winner is the one the
        # bucket's conflict resolution ranks higher (a side's older versions rank lower
        # than its current one, so they cannot change the outcome).
        before = {k: (side_state(col_a, k), side_state(col_b, k)) for k in keys}
        predicted: Dict[str, str] = {}
        for k, ((kind_a, st_a), (kind_b, st_b)) in before.items():
            if st_a is None or st_b is None:
                continue  # a deletion without a tombstone: nothing to rank
            ra, rb = rank(mode, st_a), rank(mode, st_b)
            predicted[k] = "same" if ra == rb else ("A" if ra > rb else "B")
        print(f"[{mode}] predicted winners: {dict(Counter(predicted.values()))} "
              f"({len(keys) - len(predicted)} keys without a tombstone to rank)")
        for url, rid, auth in sides:
            r = set_paused(url, rid, False, auth)
            assert r.status == 200, f"resume {rid}: {r}"

        # 3. Identical on both sides, each key holding the version that wins.
        final = converge_equal(col_a, col_b, keys, f"[{mode}] A and B identical", diag=diag)
        wrong = []
        won = Counter()
        for k in keys:
            kind, st = final[k]
            won["deleted" if kind == "deleted" else json.loads(st["body"]).get("w", "?")] += 1
            side = predicted.get(k)
            if side in ("A", "B"):
                kind_w, st_w = before[k][0 if side == "A" else 1]
                got = None if st is None else (st.get("CAS"), st.get("revid"))
                if kind != kind_w or got != (st_w.get("CAS"), st_w.get("revid")):
                    wrong.append(f"{k}: {side}'s version should win by {mode} rules: "
                                 f"A {kind_a_b(before[k][0])}, B {kind_a_b(before[k][1])}, "
                                 f"both now {kind} {got}")
        print(f"[{mode}] final versions: A's writer's tag on {won['A']} keys, B's on "
              f"{won['B']}, {won['deleted']} deleted on both sides")
        problems = []   # reported together at the end, with the ping-pong check's
        if wrong:
            problems.append(f"{len(wrong)} keys converged to the losing version:\n"
                            + "\n".join(wrong[:20]))

        # 4. Nothing left, and nothing bouncing between the clusters.
        try:
            eventually("changesLeft 0 on both tasks",
                       lambda: all(counter(url, rid, auth, "changesLeft") == 0
                                   for url, rid, auth in sides),
                       timeout=30)
        except pytest.fail.Exception as e:
            problems.append(str(e))
        t1 = [task_of(url, rid, auth) for url, rid, auth in sides]
        time.sleep(QUIET_S)
        t2 = [task_of(url, rid, auth) for url, rid, auth in sides]
        print(f"[{mode}] A->B task: {json.dumps(t2[0])}")
        print(f"[{mode}] B->A task: {json.dumps(t2[1])}")
        written1 = [t["docsWritten"] for t in t1]
        written2 = [t["docsWritten"] for t in t2]
        if sum(written2) != sum(written1):
            problems.append(
                f"docsWritten (A->B, B->A) went from {written1} to {written2} in "
                f"{QUIET_S:.0f}s with no writer: versions keep crossing between the clusters "
                f"(docsFailedCrTarget {[t['docsFailedCrTarget'] for t in t2]})")
        for name, t in zip(("A->B", "B->A"), t2):
            if t["changesLeft"] != 0 or t["errors"]:
                problems.append(f"{name}: changesLeft {t['changesLeft']}, errors {t['errors']}")
            if not t["docsWritten"] > 0:
                problems.append(f"{name} wrote nothing")
            # The resume restarted each side's pipelines from their checkpoints.
            if not (t["resumedVbuckets"] > 0 and t["resumedSeqnos"] > 0):
                problems.append(f"{name} resumed from zero after the pause: {t}")
        assert not problems, f"[{mode}] " + "\n".join(problems) + "\n" + diag()
        recheck_equal(col_a, col_b, keys, f"[{mode}] after {QUIET_S:.0f}s of quiet", diag)
    finally:
        cancel(a.url, rid_ab)
        cancel(b.url, rid_ba, AUTH_B)


def kind_a_b(state: Tuple[str, Optional[dict]]) -> str:
    kind, st = state
    return f"{kind} {None if st is None else (st.get('CAS'), st.get('revid'))}"
