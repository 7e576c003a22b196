"""A node frozen past its failover serves nothing stale when it wakes.

SIGSTOP freezes a node, so it cannot fence itself while the others fail it over and promote
its replicas: fencing by probes alone would see every peer reachable again the moment it
resumes, and the node would serve its old actives until the new map reached it. A client
that still holds a connection to it (as every client does, until it learns the new map)
would read a value that a newer acknowledged write replaced, and could write beside the new
active. The node's lease prevents that: it serves its actives only while a round of probes
begun less than a second ago found a majority of voters that know no newer map.
"""

from __future__ import annotations

import random
import struct
import time

import pytest

import mcbin
import nemesis


def durable_set(conn: mcbin.Conn, key: bytes, value: bytes, vb: int) -> int:
    framing = mcbin.frame_info(1, bytes([1]) + struct.pack(">H", 5000))
    return conn.call(mcbin.OP_SET, key, value, mcbin.set_extras(), vb=vb,
                     magic=mcbin.ALT_REQ, framing=framing).status


@pytest.mark.timeout(300)
def test_a_node_frozen_past_its_failover_serves_nothing_stale_on_waking(tmp_path):
    log = print
    # Two replicas: the promoted copy still has one, so durable writes go on after the failover.
    cluster = nemesis.Cluster(tmp_path, 2, nemesis.free_base(random.Random()), log)
    try:
        cluster.start()
        cluster.wait_serving()
        view = cluster.view()
        # A node that is not the Raft leader: the failover then needs no election first.
        victim = next(n for n in cluster.live() if n.id != view["leader"])
        router = nemesis.Router(cluster)
        router.refresh(force=True)
        me = f"{nemesis.proxy_ip(victim.slot)}:{victim.kv_port}"
        key = next(k for k in (f"frozen-{j}".encode() for j in range(100000))
                   if router.active(mcbin.vbucket_of(k, nemesis.VBUCKETS)) == me)
        vb = mcbin.vbucket_of(key, nemesis.VBUCKETS)
        stale = nemesis.connect(me)
        assert durable_set(stale, key, b"old", vb) == mcbin.SUCCESS

        log(cluster.pause(victim))
        cluster.wait("fail the frozen node over",
                     lambda v: any(n["id"] == victim.id and n["status"] == "failed_over"
                                   for n in v["nodes"]))
        assert nemesis.proc_state(victim.pid) == "T", "the node ran while frozen"
        router.refresh(force=True)
        new_active = router.active(vb)
        assert new_active != me, new_active
        fresh = nemesis.connect(new_active)
        deadline = time.monotonic() + 30
        while (st := durable_set(fresh, key, b"new", vb)) != mcbin.SUCCESS:
            assert time.monotonic() < deadline, f"the new active answered {st:#x}"
            time.sleep(0.1)

        cluster.resume(victim)
        got = stale.call(mcbin.OP_GET, key, vb=vb)
        assert not (got.status == mcbin.SUCCESS and got.value == b"old"), \
            "the woken node served a value a newer acknowledged write had replaced"
        put = stale.call(mcbin.OP_SET, key, b"beside", mcbin.set_extras(), vb=vb)
        assert put.status == mcbin.NOT_MY_VBUCKET, \
            f"the woken node took a write beside the new active: {put.status:#x}"
        print(f"woken node: GET {got.status:#x}, SET {put.status:#x}")
        stale.close()
        assert fresh.call(mcbin.OP_GET, key, vb=vb).value == b"new"
        fresh.close()
    finally:
        cluster.close()
