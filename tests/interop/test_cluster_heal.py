"""A rebalance whose orchestrator dies or is deposed heals with no hand on it.

The orchestrator runs on the metadata leader. Between a DCP takeover (the copies switch
roles themselves) and the chain that records it, nothing but the orchestrator knows the map
is behind; killed there, it leaves the old active dead, the new one active and a map naming
the old one, so clients loop on NOT_MY_VBUCKET. The leader's janitor must repair that.

* Killed: node 0, the leader, runs with `SLUICE_FAILPOINT=rebalance-after-takeover@0`, which
  aborts its process right after the first takeover between two other nodes, before that
  chain is published. The test shows the process died of SIGABRT at that point (its log
  names the vbucket). Then, with automatic failover on and nobody touching anything: node 0
  is failed over, the new leader's janitor publishes the chain the takeover made, the map
  and every live node's active vbuckets agree, and every durable write the SDK was told was
  safe reads back. With one replica and with two.
* Deposed: node 0 is frozen (SIGSTOP) in the middle of the rebalance, long enough for a new
  leader to be elected (shown), then thawed; automatic failover is off. Node 0's
  orchestrator notices it no longer leads and stops without aborting; the new leader resumes
  the recorded rebalance and finishes it (its status says `resumed`), and every acknowledged
  durable write reads back.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, List, Set

import pytest

import admin_http
from conftest import PASSWORD, USERNAME, sluice_binary
from mcbin import kv_connect
from test_cluster_faults import SdkWriter, cluster_view, pid_of, read_back, vbucket_map, \
    wait_failed_over
from test_cluster_rebalance import RETRYABLE, join_fourth
from test_cluster_up import collection, free_base, stop, terminate, wait_up
from test_dcp_gocbcore import all_vb_seqnos, fail_if

VBS = 64
FAILPOINT = "rebalance-after-takeover"


def cluster_up(data_dir: Path, base: int, replicas: int, auto_failover_s: int,
               env: Dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [str(sluice_binary()), "cluster", "up", "--nodes", "3", "--replicas", str(replicas),
         "--data-dir", str(data_dir), "--base-port", str(base), "--vbuckets", str(VBS),
         "--memory-quota-mb", "128", "--auto-failover-timeout", str(auto_failover_s)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **env})


def rebalance_status(admin_port: int) -> dict:
    return admin_http.get_json(f"http://127.0.0.1:{admin_port}/api/v1/cluster/rebalance")


def start_rebalance(admin_port: int) -> None:
    url = f"http://127.0.0.1:{admin_port}/api/v1/cluster/rebalance"
    try:
        with urllib.request.urlopen(admin_http.request(url, {}), timeout=15) as r:
            assert r.status == 202, r.read()
    except urllib.error.HTTPError as e:
        pytest.fail(f"rebalance refused: {e.code} {e.read()!r}")


def wait_for(what: str, done, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if done():
                return
        except OSError:
            pass
        assert time.monotonic() < deadline, f"not within {timeout_s}s: {what}"
        time.sleep(0.3)


def map_agrees(base: int, live: List[int], admin_port: int) -> bool:
    """Every live node holds active exactly the vbuckets the map makes active on it."""
    chains = vbucket_map(admin_port)
    for n in live:
        port = base + 10 * n
        want: Set[int] = {vb for vb, chain in enumerate(chains) if chain[0] == port}
        with kv_connect(port, USERNAME, PASSWORD) as conn:
            have = set(all_vb_seqnos(conn))
        if want != have:
            print(f"node {n}: map makes {sorted(want - have)} active and it is not; "
                  f"it holds {sorted(have - want)} active that the map does not give it")
            return False
    return True


def log_of(data_dir: Path, node: int) -> str:
    return (data_dir / f"node-{node}" / "server.log").read_text(errors="replace")


def wait_exited(pid: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        assert time.monotonic() < deadline, f"process {pid} still runs"
        time.sleep(0.1)


def finish_and_check(writer: SdkWriter, col, what: str, allowed=frozenset()) -> None:
    writer.wait_acked(len(writer.acked) + 200, timeout_s=90)
    writer.finish()
    fail_if(read_back(col, writer.acked), what)
    unexpected = {e: n for e, n in writer.errors.items() if e not in RETRYABLE | allowed}
    assert not unexpected, f"errors that are not retryable: {unexpected}"
    print(f"{what}: {len(writer.acked)} durable writes acknowledged of "
          f"{len(writer.attempted)}; errors {dict(writer.errors)}")


@pytest.mark.timeout(480)
@pytest.mark.parametrize("replicas", [1, 2])
def test_a_killed_orchestrator_heals_with_no_hand_on_it(tmp_path, replicas):
    base = free_base()
    proc = cluster_up(tmp_path, base, replicas, auto_failover_s=3,
                      env={"SLUICE_FAILPOINT": f"{FAILPOINT}@0"})
    fourth = None
    try:
        info = wait_up(proc, tmp_path)
        assert cluster_view(base + 11)["leader"] == 0, "the failpoint is armed on node 0 only"
        cluster, col = collection(base + 10)
        writer = SdkWriter(col, "h", durable=True)
        writer.start()
        writer.wait_acked(200)
        fourth = join_fourth(tmp_path, base, base + 11, VBS, auto_failover_s=3)

        # Asked of node 1, which forwards to the leader: node 0 orchestrates.
        start_rebalance(base + 11)
        wait_exited(pid_of(info, 0))
        log0 = log_of(tmp_path, 0)
        hit = re.search(rf"failpoint {FAILPOINT}: vb:(\d+) taken over from node n(\d+) by node n(\d+)",
                        log0)
        assert hit, "node 0 did not stop at the failpoint:\n" + log0[-3000:]
        vb, old, new = (int(g) for g in hit.groups())
        assert {old, new} <= {1, 2, 3}, hit.group(0)
        print(f"node 0 aborted after vb:{vb} moved from node {old} to node {new}")

        wait_failed_over(base + 11, 0, timeout_s=60)
        wait_for("the rebalance no longer recorded",
                 lambda: not rebalance_status(base + 11)["running"])
        # The janitor published the chain the takeover made: the map names the new copy.
        wait_for(f"the map naming node {new} active for vb:{vb}",
                 lambda: vbucket_map(base + 11)[vb][0] == base + 10 * new)
        wait_for("every live node's actives matching the map",
                 lambda: map_agrees(base, [1, 2, 3], base + 11))
        repaired = [n for n in (1, 2, 3) if "janitor: the map now follows takeovers" in
                    log_of(tmp_path, n)]
        assert repaired, "no janitor published the missed chain"
        # A vbucket whose only replica was on node 0 has no replica after its failover:
        # durable writes to it are refused as impossible, as they should be.
        finish_and_check(writer, col, "killed orchestrator",
                         allowed={"DurabilityImpossibleException"})
        cluster.close()
    finally:
        if fourth is not None:
            terminate(fourth)
        stop(proc)


@pytest.mark.timeout(480)
def test_a_deposed_orchestrator_is_resumed_by_the_new_leader(tmp_path):
    base = free_base()
    proc = cluster_up(tmp_path, base, 1, auto_failover_s=0, env={})
    fourth = None
    pid0 = None
    try:
        info = wait_up(proc, tmp_path)
        assert cluster_view(base + 11)["leader"] == 0
        pid0 = pid_of(info, 0)
        cluster, col = collection(base + 10)
        writer = SdkWriter(col, "r", durable=True)
        writer.start()
        writer.wait_acked(200)
        fourth = join_fourth(tmp_path, base, base + 11, VBS)

        start_rebalance(base + 1)
        wait_for("two moves done", lambda: rebalance_status(base + 1)["moves_done"] >= 2)
        os.kill(pid0, signal.SIGSTOP)
        try:
            # Shown, not assumed: the others elect a leader while node 0 is frozen.
            wait_for("a new leader", lambda: cluster_view(base + 11)["leader"] not in (None, 0),
                     timeout_s=60)
            print("new leader while node 0 is frozen:", cluster_view(base + 11)["leader"])
        finally:
            os.kill(pid0, signal.SIGCONT)
        wait_for("the rebalance finished", lambda: cluster_view(base + 11)["map_nodes"] == [0, 1, 2, 3]
                 and not rebalance_status(base + 11)["running"], timeout_s=180)
        status = rebalance_status(base + 11)
        assert status["resumed"] and status["error"] is None, status
        stopped = "no longer leads; stopped" in log_of(tmp_path, 0)
        assert stopped, "node 0's orchestrator did not stop on losing the leadership"
        wait_for("every node's actives matching the map",
                 lambda: map_agrees(base, [0, 1, 2, 3], base + 11))
        finish_and_check(writer, col, "deposed orchestrator")
        cluster.close()
    finally:
        if pid0 is not None:
            try:
                os.kill(pid0, signal.SIGCONT)
            except ProcessLookupError:
                pass
        if fourth is not None:
            terminate(fourth)
        stop(proc)
