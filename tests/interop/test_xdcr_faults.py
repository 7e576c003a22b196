"""XDCR under faults: a replication from a 3-node source A (`sluice cluster up`, 64
vbuckets, no automatic failover) to a target B (`sluice server`s with their own
administrator) while an SDK writer keeps writing a known set of keys on A. After each fault
the writer stops, A is brought to exactly what the writer was told it holds (keys whose
outcome is unknown, or whose acknowledged write A lost in a failover, are written again),
and B must equal A key by key (`$document` CAS, revision, flags, expiry, datatype, value
size and crc32c, body, user xattr; deleted on both, tombstones alike where both keep one)
with changesLeft 0 and no error in the task.

Replays are told apart by the target: a change it already holds (an equal version) loses its
conflict and is counted in docsFailedCrTarget (or, above the optimistic threshold, is kept
back at the source after a GET_META: docsFailedCrSource), so a pipeline that starts a vbucket again from
zero makes that counter grow by about the number of documents in it, and one that resumes
from a recent checkpoint by only the few changes made since.

* test_pause_resume_resumes_from_checkpoints: 1500 documents replicated, paused, 600 more
  changes, resumed: after the resume every node's pipeline started from its checkpoints
  (resumedVbuckets 64, resumedSeqnos at least the 1500 seqnos replicated before the
  pause), nothing already on B was sent again (docsFailedCrTarget grows by < 5 % of the
  documents), and B equals A.
* test_target_node_restart[sigkill|sigterm]: twice, B's only node is killed (or stopped)
  in the middle of a burst of 3000 new keys being replicated to it (once a third was
  sent; B runs with --flush-interval-ms 200, so some of what it acknowledged is not on
  disk yet), while the writer keeps writing A; the process is shown gone and its ports
  closed; the task's errors meanwhile are printed; B starts again on the same data. At
  the end the pipeline has recovered (no errors, changesLeft 0) and B equals A. A version
  B acknowledged but had not persisted when SIGKILLed shows up here as a key that never
  arrives: the pipeline's checkpoint had moved past it, so it must notice that B came
  back on a new failover-log branch (as goxdcr validates a checkpoint's target vbucket
  uuid and seqno before resuming from it) and send those changes again. After SIGKILL the
  task shows the fault and the remedy: rewinds > 0 (vbuckets whose newest checkpoint
  counted on writes B's failover logs say it lost), yet rewindsToZero 0 and
  resumedVbuckets 64 after each restart (each went back only to an older checkpoint B
  still honours; before, every vbucket went back to zero), and what was sent again is
  less than the burst's share B had been sent plus half the writer's keys (a replay from
  zero resends every key). After SIGTERM (B stops cleanly, keeps everything) rewinds
  stays 0.
* test_source_node_kill9_and_failover_resumes_from_checkpoints: A with 2 replicas; node 1
  (holding a third of the actives) is killed with SIGKILL (process gone, ports closed) and
  failed over by `POST /api/v1/cluster/failover {"node": 1}` on node 0; the writer carries
  on. B equals A (the survivors' data, after the writer's lost acknowledged writes, if any,
  are written again). The vbuckets that moved resumed on the survivors from the
  cluster-wide checkpoints: the survivors' pipelines restarted with resumedVbuckets 64
  (every vbucket, the promoted ones too, not only the ~43 they held) and docsFailedCrTarget
  grew by less than half the documents of the moved vbuckets (a replay from zero resends
  them all).
* test_source_rebalance_in_resumes_from_checkpoints: a 4th node joins A and a rebalance
  (`POST /api/v1/cluster/rebalance`, awaited) moves vbuckets to it while the writer runs;
  B equals A, resumedVbuckets is 64 after it, and docsFailedCrTarget grew by less than
  half the documents of the vbuckets that changed node.
* test_target_rebalance: B starts with one node; a second joins and B is rebalanced while
  A is written (the pipeline follows B's map through NOT_MY_VBUCKET); B equals A, and B's
  new node holds active vbuckets of the target bucket.

Every test that uses randomness prints its seed. Tests 1, 2 and 5 share one A (each with
its own buckets and its own B); 3 and 4 make their own A (they change its topology).

Run: cd tests/interop && python3 -m pytest test_xdcr_faults.py -q -p no:cacheprovider
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Dict, List, Optional, Set, Tuple

import pytest
from couchbase.exceptions import CouchbaseException, DocumentNotFoundException
from couchbase.options import GetOptions, RemoveOptions, UpsertOptions

from conftest import HOST, PASSWORD, USERNAME, port_open
from mcbin import vbucket_of
from test_cluster_rebalance import join_fourth
from test_cluster_up import free_base, terminate
from xdcr_helpers import (AUTH_A, AUTH_B, B_PASS, B_USER, VBS, ClusterA, ClusterB,
                          active_items, add_remote_ref, cancel, cluster_view, connect,
                          converge_equal, create_bucket, eventually, http, join_b, kill9_node,
                          ready_collection, rebalance_and_wait, safe_diag, set_paused,
                          start_cluster_a, start_cluster_b, start_replication_at,
                          stop_cluster, task_of, tasks_report, vbucket_actives,
                          wait_cluster_uuid)

pytestmark = pytest.mark.timeout(240)

KEYS = 2000            # the writer's key set (every vbucket has ~31)
PACE_S = 1 / 60        # the writer's pause between operations (~60 a second)
REPORT_S = 5.0         # how often a pipeline reports its checkpoints cluster-wide
BURST = 3000          # new keys written all at once while B goes down
CYCLES = 2            # times B goes down
B_FLUSH_MS = 200      # B's --flush-interval-ms in the restart test
REPLAY_SHARE = 0.5     # a replay from zero resends ~all documents of a vbucket


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def shared_a(tmp_path_factory):
    """A for the tests that leave its topology alone: 3 nodes, 1 replica."""
    a = start_cluster_a(tmp_path_factory.mktemp("xf-a"), free_base(), nodes=3, replicas=1)
    try:
        yield a
    finally:
        stop_cluster(a.proc)


@pytest.fixture
def own_a(tmp_path_factory):
    """Starts an A of the test's own (`own_a(replicas)`); stopped at teardown."""
    made: List[ClusterA] = []

    def make(replicas: int) -> ClusterA:
        a = start_cluster_a(tmp_path_factory.mktemp("xf-own-a"), free_base(), nodes=3,
                            replicas=replicas)
        made.append(a)
        return a

    yield make
    for a in made:
        stop_cluster(a.proc)


class Setup:
    """One replication's pieces: A, B, their buckets and SDK collections, the id."""

    def __init__(self, a: ClusterA, b: ClusterB, src: str, dst: str):
        self.a, self.b, self.src, self.dst = a, b, src, dst
        self.sdk_a = connect(a.connstr, USERNAME, PASSWORD)
        self.sdk_b = connect(b.connstr, B_USER, B_PASS)
        self.rid: Optional[str] = None
        self.ref: Optional[dict] = None

    def open(self):
        create_bucket(self.a.url, AUTH_A, self.src)
        create_bucket(self.b.url, AUTH_B, self.dst)
        self.col_a = ready_collection(self.sdk_a, self.src)
        self.col_b = ready_collection(self.sdk_b, self.dst)
        self.ref = add_remote_ref(self.a.url, f"ref-{self.src}", self.b.hostname, B_USER,
                                  B_PASS)
        return self

    def start(self) -> str:
        self.rid = start_replication_at(self.a.url, self.src, self.ref, self.dst)
        return self.rid

    def reconnect_b(self) -> None:
        try:
            self.sdk_b.close()
        except CouchbaseException:
            pass
        self.sdk_b = connect(self.b.connstr, B_USER, B_PASS)
        self.col_b = ready_collection(self.sdk_b, self.dst)

    def task(self) -> Optional[dict]:
        """The task as the first live node of A sums it."""
        return task_of(self.a.live_urls()[0], self.rid)

    def diag(self) -> str:
        out = [f"replication {self.rid}", "A's tasks, as each live node of A sums them:",
               tasks_report(self.a.live_urls())]
        for what, fn in ((f"A {self.src} active items",
                          lambda: active_items(self.a.live_kv_ports(), USERNAME, PASSWORD,
                                               self.src)),
                         (f"B {self.dst} active items",
                          lambda: active_items(self.b.kv_ports, B_USER, B_PASS, self.dst))):
            try:
                out.append(f"{what}: {fn()}")
            except Exception as e:  # noqa: BLE001
                out.append(f"{what}: {e!r}")
        out += ["A's logs:", self.a.log_tail(15), "B's logs:", self.b.log_tail(15)]
        return "\n".join(out)

    def close(self) -> None:
        if self.rid is not None:
            try:
                cancel(self.a.live_urls()[0], self.rid)
            except OSError:
                pass
        for c in (self.sdk_a, self.sdk_b):
            try:
                c.close()
            except CouchbaseException:
                pass


# ------------------------------------------------------------------ the writer

def key_set(prefix: str) -> List[str]:
    keys = [f"{prefix}{i}" for i in range(KEYS)]
    assert len({vbucket_of(k.encode(), VBS) for k in keys}) == VBS
    return keys


def preload(col, keys: List[str]) -> Dict[str, Optional[dict]]:
    """Every key written once; the model of what A holds."""
    model = {k: {"k": k, "n": 0, "phase": "preload"} for k in keys}
    for i in range(0, len(keys), 500):
        chunk = {k: model[k] for k in keys[i:i + 500]}
        res = col.upsert_multi(chunk)
        assert res.all_ok, f"preload: {res.exceptions}"
    return model


class KeyWriter(threading.Thread):
    """Writes the known keys at random (seeded) until stopped: upserts (a new body each
    time) and some removals, about one every PACE_S. `model` is what A was told it holds;
    a key whose last operation's outcome is unknown (a timeout while a node is down) is
    `uncertain` until a later operation on it is answered."""

    def __init__(self, col, keys: List[str], model: Dict[str, Optional[dict]], seed: int,
                 pace_s: float = PACE_S):
        super().__init__(daemon=True, name="xdcr-key-writer")
        self.col, self.keys, self.model = col, keys, model
        self.rng = random.Random(seed)
        self.pace_s = pace_s
        self.phase = "start"
        self.uncertain: Set[str] = set()
        self.acked = 0
        self.ops: Counter = Counter()
        self.errors: Counter = Counter()
        self.stop_ev = threading.Event()

    def run(self) -> None:
        timeout = timedelta(seconds=3)
        n = 0
        while not self.stop_ev.is_set():
            n += 1
            key = self.rng.choice(self.keys)
            try:
                if self.rng.random() < 0.08:
                    try:
                        self.col.remove(key, RemoveOptions(timeout=timeout))
                    except DocumentNotFoundException:
                        pass
                    self.model[key] = None
                    self.ops["remove"] += 1
                else:
                    body = {"k": key, "n": n, "phase": self.phase}
                    self.col.upsert(key, body, UpsertOptions(timeout=timeout))
                    self.model[key] = body
                    self.ops["upsert"] += 1
                self.uncertain.discard(key)
                self.acked += 1
            except CouchbaseException as e:
                self.uncertain.add(key)
                self.errors[type(e).__name__] += 1
            self.stop_ev.wait(self.pace_s)

    def wait_acked(self, more: int, timeout: float = 60) -> None:
        want = self.acked + more
        deadline = time.monotonic() + timeout
        while self.acked < want:
            assert self.is_alive(), "the writer stopped"
            assert time.monotonic() < deadline, \
                f"only {self.acked} of {want} writes acknowledged; errors {dict(self.errors)}"
            time.sleep(0.05)

    def finish(self) -> None:
        self.stop_ev.set()
        self.join(timeout=30)
        assert not self.is_alive(), "the writer did not stop"


def burst_write(col, keys: List[str], w: "KeyWriter") -> None:
    """Upserts `keys` (new ones, not the writer's) in chunks of 100 as fast as A takes
    them, recording them in the writer's model (an unknown outcome as uncertain)."""
    for i in range(0, len(keys), 100):
        chunk = {k: {"k": k, "n": i, "phase": "burst"} for k in keys[i:i + 100]}
        res = col.upsert_multi(chunk)
        for k, body in chunk.items():
            w.model[k] = body
            if k in (res.exceptions or {}):
                w.uncertain.add(k)


def read_a(col, key: str) -> Tuple[bool, Optional[dict]]:
    """(readable, body or None)."""
    try:
        return True, col.get(key, GetOptions(timeout=timedelta(seconds=5))).content_as[dict]
    except DocumentNotFoundException:
        return True, None
    except CouchbaseException:
        return False, None


def settle_a(col, w: KeyWriter, diag) -> List[str]:
    """After the writer stopped: writes again every key A does not hold as the model says
    (uncertain outcomes, acknowledged writes A lost), until A holds exactly the model.
    Returns the keys whose acknowledged write A had lost."""
    lost, fix = [], set(w.uncertain)
    for k in sorted(w.model):
        ok, body = read_a(col, k)
        if ok and body != w.model[k] and k not in w.uncertain:
            lost.append(k)
        if not ok or body != w.model[k]:
            fix.add(k)
    deadline = time.monotonic() + 30
    for k in sorted(fix):
        while True:
            try:
                if w.model[k] is None:
                    try:
                        col.remove(k)
                    except DocumentNotFoundException:
                        pass
                else:
                    col.upsert(k, {**w.model[k], "rewritten": True})
                    w.model[k] = {**w.model[k], "rewritten": True}
                break
            except CouchbaseException as e:
                if time.monotonic() > deadline:
                    pytest.fail(f"rewriting {k} on A: {e!r}{safe_diag(diag)}", pytrace=False)
                time.sleep(0.2)
    wrong = []
    for k in sorted(w.model):
        ok, body = read_a(col, k)
        if not ok or body != w.model[k]:
            wrong.append(f"{k}: A holds {body} (readable {ok}), the writer wrote {w.model[k]}")
    assert not wrong, "A itself does not hold what was written:\n" + "\n".join(wrong[:20])
    print(f"writer: {w.acked} operations acknowledged {dict(w.ops)}, errors "
          f"{dict(w.errors)}; {len(fix)} keys written again ({len(w.uncertain)} uncertain, "
          f"{len(lost)} acknowledged writes A had lost)")
    return lost


def check_b_equals_a(s: Setup, keys: List[str], what: str) -> None:
    """changesLeft 0 and no error in the task, then B equal to A key by key, and the same
    number of live documents on both."""
    def caught_up():
        t = s.task()
        return t if t and t.get("changesLeft") == 0 and not t.get("errors") else None

    eventually(f"{what}: changesLeft 0 and no errors", caught_up, timeout=60, diag=s.diag,
               interval=0.5)
    # Nothing left to send: B holds what it will hold within a few seconds.
    converge_equal(s.col_a, s.col_b, keys, f"{what}: B equal to A", diag=s.diag, timeout=20)
    live_a = active_items(s.a.live_kv_ports(), USERNAME, PASSWORD, s.src)
    eventually(f"{what}: B's item count {live_a}",
               lambda: active_items(s.b.kv_ports, B_USER, B_PASS, s.dst) == live_a,
               timeout=20, diag=s.diag)


def keys_in_vbuckets(keys: List[str], vbs: Set[int]) -> List[str]:
    return [k for k in keys if vbucket_of(k.encode(), VBS) in vbs]


def wait_restarted(s: Setup, starts_before: int, at_least: int, what: str) -> dict:
    """The task once the pipelines started `at_least` more times than `starts_before` (the
    resumed* figures are those of each pipeline's last start)."""
    return eventually(f"{what}: {at_least} more pipeline starts",
                      lambda: (lambda t: t if t and t["starts"] >= starts_before + at_least
                               else None)(s.task()), timeout=30, diag=s.diag)


def refused(t: dict) -> int:
    """Versions the target already had, sent again: refused there (docsFailedCrTarget) or,
    for documents above the optimistic threshold, kept back at the source after a GET_META
    (docsFailedCrSource)."""
    return t["docsFailedCrTarget"] + t["docsFailedCrSource"]


def fields(t: dict) -> dict:
    keep = ("starts", "rewinds", "rewindsToZero", "resumedVbuckets", "resumedSeqnos", "docsWritten",
            "docsFailedCrTarget", "docsFailedCrSource", "docsReceivedFromDcp", "changesLeft", "nodesMissing",
            "errors")
    return {k: t.get(k) for k in keep}


# ------------------------------------------------------------------ 1. pause, resume

def test_pause_resume_resumes_from_checkpoints(shared_a, sluice_factory):
    a = shared_a
    b = start_cluster_b(sluice_factory, nodes=1)
    s = Setup(a, b, "pr_src", "pr_dst").open()
    try:
        seed = random.randrange(1 << 30)
        print(f"seed {seed}")
        keys = key_set("pr-")
        model = preload(s.col_a, keys[:1500])
        s.start()
        check_b_equals_a(s, keys[:1500], "before the pause")
        t0 = s.task()
        print(f"before the pause: {fields(t0)}")

        r = set_paused(a.url, s.rid, True)
        assert r.status == 200, f"pause: {r}"
        eventually("the task paused", lambda: (s.task() or {}).get("status") == "paused",
                   timeout=20, diag=s.diag)
        w = KeyWriter(s.col_a, keys, {**{k: None for k in keys}, **model}, seed, pace_s=0)
        w.phase = "paused"
        w.start()
        w.wait_acked(600)
        w.finish()
        t_paused = s.task()
        settle_a(s.col_a, w, s.diag)

        r = set_paused(a.url, s.rid, False)
        assert r.status == 200, f"resume: {r}"
        t1 = wait_restarted(s, t_paused["starts"], a.nodes, "after the resume")
        check_b_equals_a(s, keys, "after the resume")
        t2 = s.task()
        print(f"after the resume: {fields(t2)}")
        assert t1["resumedVbuckets"] == VBS, (
            f"after the resume only {t1['resumedVbuckets']} of {VBS} vbuckets started from "
            f"a checkpoint: {fields(t1)}\n{s.diag()}")
        assert t1["resumedSeqnos"] >= 1500, (
            f"the pipelines resumed from seqnos summing to {t1['resumedSeqnos']}, below the "
            f"1500 replicated before the pause: {fields(t1)}\n{s.diag()}")
        replayed = refused(t2) - refused(t0)
        assert replayed < 0.05 * 1500, (
            f"{replayed} changes B already held were sent again after the resume "
            f"(before {fields(t0)}, after {fields(t2)})\n{s.diag()}")
    finally:
        s.close()


# ------------------------------------------------------------------ 2. target restart

@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
def test_target_node_restart(how, shared_a, sluice_factory):
    a = shared_a
    # B persists what it is sent at most every 200 ms (its acknowledged writes wait a
    # little longer for the disk, as they may on any loaded node), so a SIGKILL in the
    # middle of a burst finds some acknowledged but not yet on disk.
    b = start_cluster_b(sluice_factory, nodes=1,
                        extra_args=("--flush-interval-ms", str(B_FLUSH_MS)))
    s = Setup(a, b, f"tr_{how}_src", f"tr_{how}_dst").open()
    srv = b.servers[0]
    try:
        seed = random.randrange(1 << 30)
        print(f"seed {seed}")
        keys = key_set(f"tr-{how}-")
        model = preload(s.col_a, keys)
        s.start()
        w = KeyWriter(s.col_a, keys, model, seed)
        w.phase = "before"
        w.start()
        w.wait_acked(200)
        burst_keys: List[str] = []
        back_at = None
        for cycle in range(CYCLES):
            if back_at is not None:
                # The pipeline keeps a checkpoint record at most every second, the newest
                # one moving until it is a second old, and a record survives a SIGKILL only
                # if B had its acknowledged writes on disk. So before B goes again, the
                # writer runs long enough after B came back for a record made since then to
                # hold (RECORD_EVERY_MS + B's flush interval, with room); otherwise the
                # pipeline rightly falls back to the record it resumed from last time, and
                # the replay bound below would count the previous cycle's changes too.
                time.sleep(max(0.0, back_at + 3.0 - time.monotonic()))
            # A burst of new keys B is being sent when it goes: versions it may have
            # acknowledged without having them on disk yet (a SIGKILL loses those; the
            # pipeline's checkpoints must not have moved past what B lost, or B never gets
            # them). The burst's keys are not the writer's, so its model stays exact.
            burst = [f"tr-{how}-burst{cycle}-{i}" for i in range(BURST)]
            burst_keys += burst
            writing = threading.Thread(target=burst_write, args=(s.col_a, burst, w),
                                       daemon=True)
            t_burst = s.task()
            began = time.monotonic()
            writing.start()
            # B goes once it has been sent a third of the burst: in the middle of the stream.
            t_kill = eventually("B sent a third of the burst",
                                lambda: (lambda t: t if t and t["docsWritten"] - t_burst[
                                    "docsWritten"] >= BURST // 3 else None)(s.task()),
                                timeout=30, diag=s.diag, interval=0.01)
            delay = time.monotonic() - began
            pid = srv.pid
            rc = srv.kill9() if how == "sigkill" else srv.stop()
            assert not srv.is_running() and not port_open(srv.kv_port) \
                and not port_open(srv.admin_port), f"B's node (pid {pid}) still answers"
            print(f"cycle {cycle}: B's node (pid {pid}) {how} (exit code {rc}) "
                  f"{delay * 1000:.0f} ms into a burst of {BURST} new keys, once it had been "
                  f"sent {t_kill['docsWritten'] - t_burst['docsWritten']} of them; the task "
                  f"then: {fields(t_kill)}")
            writing.join(timeout=60)
            assert not writing.is_alive(), "the burst did not finish"
            w.phase = f"b-down-{cycle}"
            seen_errors: Set[str] = set()
            down_until = time.monotonic() + 3
            while time.monotonic() < down_until:
                t = s.task() or {}
                seen_errors.update(t.get("errors") or [])
                time.sleep(0.5)
            print(f"cycle {cycle}: errors the task showed while B was down: "
                  f"{sorted(seen_errors)[:3]}")
            srv.start()
            wait_cluster_uuid(srv.admin_url, AUTH_B)
            w.phase = f"b-back-{cycle}"
            w.wait_acked(100)
            # The pipeline's start after B came back: it checked its checkpoints against
            # B's failover logs and resumed every vbucket from one B still honours.
            t_back = eventually(
                "the pipeline started again after B came back",
                lambda: (lambda t: t if t and t["starts"] > t_kill["starts"]
                         and not t["errors"] else None)(s.task()),
                timeout=60, diag=s.diag)
            back_at = time.monotonic()
            print(f"cycle {cycle}: after B came back: {fields(t_back)}")
            assert t_back["rewindsToZero"] == t_burst.get("rewindsToZero", 0), (
                f"vbuckets went back to zero after B's {how}: {fields(t_back)}\n{s.diag()}")
            assert t_back["resumedVbuckets"] == VBS, (
                f"only {t_back['resumedVbuckets']} of {VBS} vbuckets resumed from a checkpoint "
                f"after B's {how}: {fields(t_back)}\n{s.diag()}")
            # What was sent again: the burst's share B had been sent, and about a second of
            # the writer's changes; a replay from zero would add the writer's KEYS too.
            sent = t_kill["docsWritten"] - t_burst["docsWritten"]
            replayed = refused(t_back) - refused(t_burst)
            assert replayed < sent + KEYS // 2, (
                f"{replayed} changes B already held were sent again after B's {how} (it had "
                f"been sent {sent} of the burst): {fields(t_back)}\n{s.diag()}")
        w.finish()
        s.reconnect_b()
        lost = settle_a(s.col_a, w, s.diag)
        assert not lost, f"A lost acknowledged writes with no fault of its own: {lost[:10]}"
        check_b_equals_a(s, keys + burst_keys, f"after B's {how} and restart x{CYCLES}")
        t_end = s.task()
        print(f"task: {fields(t_end)}")
        if how == "sigkill":
            # The fault happened: B came back without writes it had acknowledged, and the
            # pipeline's checkpoints counted on them.
            assert t_end["rewinds"] > 0, (
                f"B lost no acknowledged write the checkpoints counted on in {CYCLES} "
                f"SIGKILLs mid-burst: {fields(t_end)}")
        else:
            assert t_end["rewinds"] == 0, (
                f"a clean stop of B rewound checkpoints: {fields(t_end)}")
    finally:
        s.close()


# ------------------------------------------------------------------ 3. kill -9 and failover

def test_source_node_kill9_and_failover_resumes_from_checkpoints(own_a, sluice_factory):
    a = own_a(replicas=2)
    b = start_cluster_b(sluice_factory, nodes=1)
    s = Setup(a, b, "fo_src", "fo_dst").open()
    victim = 1
    try:
        seed = random.randrange(1 << 30)
        print(f"seed {seed}")
        keys = key_set("fo-")
        model = preload(s.col_a, keys)
        started = time.monotonic()
        s.start()
        check_b_equals_a(s, keys, "before the kill")
        w = KeyWriter(s.col_a, keys, model, seed)
        w.phase = "before"
        w.start()
        # At least one cluster-wide checkpoint report after the preload was replicated.
        time.sleep(max(0.0, started + REPORT_S + 1.5 - time.monotonic()))
        w.wait_acked(100)
        actives = vbucket_actives(a.url, s.src)
        moved = {vb for vb, port in enumerate(actives) if port == a.kv_ports[victim]}
        moved_keys = keys_in_vbuckets(keys, moved)
        assert moved, f"node {victim} holds no active vbucket: {actives}"
        t_all = s.task()
        print(f"before the kill (3 nodes): {fields(t_all)}")

        pid = kill9_node(a, victim)
        w.phase = "killed"
        print(f"node {victim} (pid {pid}) killed: process gone, ports "
              f"{a.kv_ports[victim]}/{a.admin_ports[victim]} closed; it held {len(moved)} "
              f"active vbuckets, {len(moved_keys)} of the {len(keys)} keys")
        # The survivors' own figures: the baseline (the dead node's are no longer summed).
        t_mid = eventually("the task summed without the dead node",
                           lambda: (lambda t: t if t and t["nodesMissing"] == 1 else None)(
                               s.task()), timeout=30, diag=s.diag)
        print(f"after the kill (survivors): {fields(t_mid)}")

        r = http("POST", f"{a.url}/api/v1/cluster/failover", json_body={"node": victim},
                 timeout=60)
        assert r.status == 200, f"failover of node {victim}: {r}\n{s.diag()}"
        print(f"failover: {r.text[:500]}")

        def failed_over():
            view = cluster_view(a.url)
            status = {n["id"]: n["status"] for n in view["nodes"]}
            maps = {bk["name"]: bk["map_nodes"] for bk in view.get("buckets", [])}
            return (status.get(victim) == "failed_over"
                    and victim not in maps.get(s.src, [victim]))

        eventually(f"node {victim} failed over", failed_over, timeout=30, diag=s.diag)
        w.phase = "failed-over"
        t_restart = wait_restarted(s, t_mid["starts"], 2, "after the failover")
        w.wait_acked(200)
        w.finish()
        lost = settle_a(s.col_a, w, s.diag)
        if lost:
            print(f"A lost {len(lost)} acknowledged (non-durable) writes in the failover, "
                  f"e.g. {lost[:5]}; written again")
        check_b_equals_a(s, keys, "after kill -9 and failover")
        t_end = s.task()
        print(f"survivors after the failover (last start): {fields(t_restart)}")
        print(f"survivors at the end: {fields(t_end)}")

        replayed = refused(t_end) - refused(t_mid)
        print(f"refused versions grew by {replayed} after the failover; the moved "
              f"vbuckets hold {len(moved_keys)} keys")
        problems = []
        if t_end["resumedVbuckets"] != VBS:
            problems.append(
                f"the survivors' pipelines last started with {t_end['resumedVbuckets']} of "
                f"{VBS} vbuckets from a checkpoint: the {len(moved)} vbuckets node "
                f"{victim} held did not resume from the cluster-wide checkpoints")
        if not t_end["resumedSeqnos"] > 0:
            problems.append(f"resumedSeqnos {t_end['resumedSeqnos']}")
        if replayed >= REPLAY_SHARE * len(moved_keys):
            problems.append(
                f"refused versions grew by {replayed} (>= {REPLAY_SHARE} x the "
                f"{len(moved_keys)} keys of the moved vbuckets): their documents were sent "
                f"again from zero")
        assert not problems, ("\n".join(problems) + f"\nbefore the kill: {fields(t_all)}\n"
                              f"after the kill: {fields(t_mid)}\nat the end: {fields(t_end)}"
                              f"\n{s.diag()}")
    finally:
        s.close()


# ------------------------------------------------------------------ 4. source rebalance

def test_source_rebalance_in_resumes_from_checkpoints(own_a, sluice_factory):
    a = own_a(replicas=1)
    b = start_cluster_b(sluice_factory, nodes=1)
    s = Setup(a, b, "rb_src", "rb_dst").open()
    fourth = None
    try:
        seed = random.randrange(1 << 30)
        print(f"seed {seed}")
        keys = key_set("rb-")
        model = preload(s.col_a, keys)
        started = time.monotonic()
        s.start()
        check_b_equals_a(s, keys, "before the rebalance")
        w = KeyWriter(s.col_a, keys, model, seed)
        w.phase = "before"
        w.start()
        time.sleep(max(0.0, started + REPORT_S + 1.5 - time.monotonic()))
        w.wait_acked(100)
        before = vbucket_actives(a.url, s.src)
        t0 = s.task()
        print(f"before the rebalance: {fields(t0)}")

        fourth = join_fourth(a.data_dir, a.base, join_port=a.base + 1, vbuckets=VBS)
        a.kv_ports.append(a.base + 30)
        a.admin_ports.append(a.base + 31)
        a.urls.append(f"http://{HOST}:{a.base + 31}")
        a.extra_logs.append(a.data_dir / "node-3" / "server.log")
        w.phase = "rebalancing"
        rebalance_and_wait(a.url, [0, 1, 2, 3], diag=s.diag)
        after = vbucket_actives(a.url, s.src)
        moved = {vb for vb in range(VBS) if before[vb] != after[vb]}
        moved_keys = keys_in_vbuckets(keys, moved)
        on_new = sum(1 for p in after if p == a.base + 30)
        print(f"{len(moved)} vbuckets changed node ({on_new} now on node 3), holding "
              f"{len(moved_keys)} of the {len(keys)} keys")
        assert on_new > 0, f"node 3 holds no active vbucket of {s.src}: {after}"
        w.phase = "after"
        w.wait_acked(100)
        w.finish()
        lost = settle_a(s.col_a, w, s.diag)
        if lost:
            print(f"A lost {len(lost)} acknowledged writes in the rebalance: {lost[:10]}")
        check_b_equals_a(s, keys, "after the rebalance")
        t_end = eventually("resumedVbuckets of every node's last start",
                           lambda: (lambda t: t if t and t["nodesMissing"] == 0 else None)(
                               s.task()), timeout=20, diag=s.diag)
        print(f"at the end (4 nodes): {fields(t_end)}")
        replayed = refused(t_end) - refused(t0)
        print(f"refused versions grew by {replayed}; the moved vbuckets hold "
              f"{len(moved_keys)} keys")
        problems = []
        if t_end["resumedVbuckets"] != VBS:
            problems.append(
                f"the pipelines last started with {t_end['resumedVbuckets']} of {VBS} "
                f"vbuckets from a checkpoint (the ones that moved did not resume)")
        if replayed >= REPLAY_SHARE * len(moved_keys):
            problems.append(
                f"refused versions grew by {replayed} (>= {REPLAY_SHARE} x the "
                f"{len(moved_keys)} keys of the moved vbuckets): sent again from zero")
        assert not problems, ("\n".join(problems) + f"\nbefore: {fields(t0)}\n"
                              f"at the end: {fields(t_end)}\n{s.diag()}")
    finally:
        s.close()
        if fourth is not None:
            terminate(fourth)


# ------------------------------------------------------------------ 5. target rebalance

def test_target_rebalance(shared_a, sluice_factory):
    a = shared_a
    b = start_cluster_b(sluice_factory, nodes=1)
    s = Setup(a, b, "trb_src", "trb_dst").open()
    try:
        seed = random.randrange(1 << 30)
        print(f"seed {seed}")
        keys = key_set("trb-")
        model = preload(s.col_a, keys)
        s.start()
        w = KeyWriter(s.col_a, keys, model, seed)
        w.phase = "before"
        w.start()
        w.wait_acked(100)
        t0 = s.task()
        join_b(sluice_factory, b)
        w.phase = "rebalancing"
        rebalance_and_wait(b.url, [0, 1], auth=AUTH_B, diag=s.diag)
        view = cluster_view(b.url, AUTH_B)
        maps = {bk["name"]: bk["map_nodes"] for bk in view.get("buckets", [])}
        assert maps.get(s.dst) == [0, 1], f"B's {s.dst} map after the rebalance: {view}"
        actives = vbucket_actives(b.url, s.dst, AUTH_B)
        on_new = sum(1 for p in actives if p == b.servers[1].kv_port)
        assert on_new > 0, f"B's new node holds no active vbucket of {s.dst}: {actives}"
        w.phase = "after"
        w.wait_acked(100)
        w.finish()
        s.reconnect_b()
        lost = settle_a(s.col_a, w, s.diag)
        assert not lost, f"A lost acknowledged writes with no fault of its own: {lost[:10]}"
        check_b_equals_a(s, keys, "after B's rebalance")
        t_end = s.task()
        print(f"B's new node holds {on_new} of {VBS} active vbuckets; task before "
              f"{fields(t0)}, at the end {fields(t_end)}")
    finally:
        s.close()
