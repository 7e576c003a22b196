"""Limits for hostile clients (issue 24, item 5), each exceeded against the real binary: the
client gets a clean disconnect, the node's RSS stays bounded, and the node serves on.

- a packet above --max-unauthenticated-bytes before login closes the connection on its
  header (its body is never buffered);
- a connection that does not log in within --auth-timeout-s is closed;
- an idle authenticated connection is closed after --idle-timeout-s (one that keeps talking
  is not);
- beyond --max-connections, connections go into the reserve of --system-connections, which
  only the cluster identity may use; beyond both, connections are closed at once;
- a DCP connection that floods requests and never reads the answers gets no more than a
  bounded amount queued (the node stops reading it).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from conftest import PASSWORD, USERNAME
from mcbin import (AUTH_ERROR, OP_NOOP, OP_STAT, SUCCESS, Conn, ConnectionClosed,
                   ProtocolError, encode, kv_connect)

VBUCKETS = 16
CLUSTER_USER = "@cluster"


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def cluster_secret(srv) -> str:
    return (Path(srv.data_dir) / "cluster_secret").read_text().strip()


def closed_within(c: Conn, seconds: float) -> bool:
    try:
        return c.is_closed_by_peer(seconds)
    except (ProtocolError, ConnectionClosed):
        return False


def login(c: Conn, user: str, password: str):
    """SASL PLAIN: the status, or None if the node closed the connection instead."""
    try:
        return c.auth_plain(user, password).status
    except (ConnectionClosed, ConnectionError, ProtocolError, OSError):
        return None


@pytest.fixture(scope="module")
def srv(sluice_module_factory):
    return sluice_module_factory(
        bucket_type="couchbase", vbuckets=VBUCKETS,
        extra_args=("--max-unauthenticated-bytes", "4096", "--auth-timeout-s", "2",
                    "--idle-timeout-s", "3", "--max-connections", "6",
                    "--system-connections", "2"))


def assert_serving(srv) -> None:
    assert srv.is_running(), f"the node exited with {srv.returncode}"
    with kv_connect(srv.kv_port, USERNAME, PASSWORD) as c:
        assert c.call(OP_NOOP).status == SUCCESS


def test_a_large_packet_before_login_closes_on_its_header(srv):
    before = rss_bytes(srv.pid)
    conns = []
    for _ in range(4):
        c = Conn(srv.kv_port)
        # A SET header announcing a 20 MiB body, and none of the body.
        c.send(struct.pack(">BBHBBHIIQ", 0x80, 0x01, 1, 8, 0, 0, 20 << 20, 1, 0))
        conns.append(c)
    for c in conns:
        assert closed_within(c, 3.0), "a 20 MiB packet before login was waited for"
        c.close()
    # 4 KiB + 1 of HELLO agent name: over the bound, closed too.
    with Conn(srv.kv_port) as c:
        c.send(encode(0x1F, key=b"x" * 4097))
        assert closed_within(c, 3.0)
    # The same size after login is accepted.
    with kv_connect(srv.kv_port, USERNAME, PASSWORD) as c:
        assert c.set(b"big", b"v" * 100_000, vb=0).status in (SUCCESS, 0x07)
    assert rss_bytes(srv.pid) - before < 32 << 20
    assert_serving(srv)


def test_a_connection_that_does_not_log_in_is_closed(srv):
    with Conn(srv.kv_port) as c:
        started = time.monotonic()
        assert closed_within(c, 6.0), "never closed without a login"
        waited = time.monotonic() - started
        assert 1.5 <= waited <= 5.0, f"closed after {waited:.1f} s, the timeout is 2 s"
    assert_serving(srv)


def test_an_idle_connection_is_closed_and_a_talking_one_is_not(srv):
    with kv_connect(srv.kv_port, USERNAME, PASSWORD) as talking, \
            kv_connect(srv.kv_port, USERNAME, PASSWORD) as idle:
        started = time.monotonic()
        while time.monotonic() - started < 5.0:
            assert talking.call(OP_NOOP).status == SUCCESS
            time.sleep(0.5)
        assert closed_within(idle, 3.0), "the idle connection is still open after 8 s"
        assert talking.call(OP_NOOP).status == SUCCESS


def test_the_reserve_is_only_for_the_cluster(srv):
    held = []
    try:
        # Fill the users' connections (6), logged in (the idle timeout, 3 s, bounds the test).
        for _ in range(6):
            held.append(kv_connect(srv.kv_port, USERNAME, PASSWORD))
        time.sleep(0.1)
        # The 7th lands in the reserve: a user's login there closes it, unanswered.
        c = Conn(srv.kv_port)
        assert login(c, USERNAME, PASSWORD) is None, "a user got a reserved connection"
        c.close()
        # The cluster identity gets in.
        cluster = Conn(srv.kv_port)
        held.append(cluster)
        assert login(cluster, CLUSTER_USER, cluster_secret(srv)) == SUCCESS
        assert cluster.call(OP_NOOP).status == SUCCESS
        # A wrong secret is no way in either.
        guess = Conn(srv.kv_port)
        held.append(guess)
        assert login(guess, CLUSTER_USER, "0" * 64) in (AUTH_ERROR, None)
        # 6 + 2 held: the next connection is closed at once.
        extra = Conn(srv.kv_port)
        assert closed_within(extra, 3.0), "a connection beyond both limits was kept"
        extra.close()
    finally:
        for c in held:
            c.close()
    # The held ones timed out or closed: users get in again.
    deadline = time.monotonic() + 10
    while True:
        try:
            assert_serving(srv)
            break
        except (AssertionError, ConnectionClosed, ConnectionError, ProtocolError, OSError):
            assert time.monotonic() < deadline, "users never got back in"
            time.sleep(0.2)


def test_a_dcp_client_that_never_reads_gets_a_bounded_queue(srv):
    # Enough items that every STAT answer is a few KB.
    with kv_connect(srv.kv_port, USERNAME, PASSWORD) as c:
        c.set(b"seed", b"x", vb=0)
    before = rss_bytes(srv.pid)
    c = kv_connect(srv.kv_port, USERNAME, PASSWORD)
    r = c.call(0x50, key=b"never-reads", extras=struct.pack(">II", 0, 1))
    assert r.status == SUCCESS, r
    stat = encode(OP_STAT)
    batch = stat * 4096  # ~100 KB of requests, ~20 MB of answers
    sent = [0]
    stop = threading.Event()

    def flood():
        c.sock.settimeout(1.0)
        while not stop.is_set():
            try:
                c.sock.sendall(batch)
                sent[0] += len(batch)
            except (socket.timeout, OSError):
                return  # the node stopped reading: our send buffer is full

    t = threading.Thread(target=flood, daemon=True)
    t.start()
    t.join(timeout=8.0)
    stop.set()
    t.join(timeout=3.0)
    grew = rss_bytes(srv.pid) - before
    answers_asked = sent[0] // 24
    assert answers_asked > 10_000, f"only {answers_asked} requests went out"
    assert grew < 64 << 20, (
        f"the node grew {grew >> 20} MiB for {answers_asked} unread STAT answers")
    c.close()
    assert_serving(srv)


def test_plain_is_not_offered_without_tls(srv):
    with Conn(srv.kv_port) as c:
        r = c.call(0x20)  # SASL_LIST_MECHS
        assert r.status == SUCCESS, r
        mechs = r.value.decode().split()
        assert mechs[0] == "SCRAM-SHA512" and "PLAIN" not in mechs, mechs
