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
  bounded amount queued (the node stops reading it);
- the admin port holds at most --admin-max-connections, then --admin-system-connections
  more in the members' reserve (a request there other than the cluster's gets 503 and the
  connection closes; a member's is served), then closes one more at once; it closes
  a connection silent for --admin-idle-timeout-s (not one that keeps talking), and answers
  503 to a request not done within --admin-request-timeout-s (a body trickled in slowly).
"""

from __future__ import annotations

import base64
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
ADMIN_MAX = 6
ADMIN_RESERVE = 2


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
                    "--system-connections", "2",
                    "--admin-max-connections", str(ADMIN_MAX),
                    "--admin-system-connections", str(ADMIN_RESERVE), "--admin-idle-timeout-s", "3",
                    "--admin-request-timeout-s", "2"))


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


# ================================================================== the admin port

def closed_at_once(sock: socket.socket, within_s: float = 1.0) -> bool:
    """Whether the peer closes `sock` (EOF or reset) within `within_s`, having sent nothing."""
    sock.settimeout(within_s)
    try:
        return sock.recv(1) == b""
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


def health(srv) -> int:
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.admin_port}/health", timeout=5) as r:
        return r.status


def http_status(sock: socket.socket, auth: str) -> int:
    """GET /health on `sock` with Authorization `auth`: the answer's status."""
    sock.settimeout(5)
    sock.sendall(f"GET /health HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\r\n".encode())
    head = b""
    while b"\r\n" not in head:
        chunk = sock.recv(4096)
        assert chunk, "closed without an answer"
        head += chunk
    return int(head.split(b" ")[1])


def test_the_admin_port_caps_its_connections_with_a_reserve_for_members(srv):
    from admin_http import basic
    before = rss_bytes(srv.pid)
    # The node's own janitor calls its admin port once a second, so it may hold one slot.
    total = ADMIN_MAX + ADMIN_RESERVE + 2
    socks = [socket.create_connection(("127.0.0.1", srv.admin_port)) for _ in range(total)]
    try:
        time.sleep(0.5)  # well within the 3 s idle limit: only the cap closes anything
        closed = [i for i, s in enumerate(socks) if closed_at_once(s, within_s=0.05)]
        assert len(closed) >= 2, f"only {closed} of {total} closed at the cap"
        assert min(closed) >= ADMIN_MAX + ADMIN_RESERVE - 1, \
            f"an early connection was closed: {closed}"
        # The last connections admitted hold the members' reserve: a user (the
        # administrator, even for /health) is refused there, and the connection closed.
        reserved = [s for i, s in enumerate(socks) if i not in closed][-1]
        assert http_status(reserved, basic()) == 503
        assert closed_at_once(reserved, within_s=2.0), "a refused reserve slot stayed taken"
        # Its slot is free again; the next connection lands in the reserve (the other slots
        # are still held) and is served to the cluster's identity.
        member = "Basic " + base64.b64encode(
            f"{CLUSTER_USER}:{cluster_secret(srv)}".encode()).decode()
        with socket.create_connection(("127.0.0.1", srv.admin_port)) as again:
            assert http_status(again, member) == 200
    finally:
        for s in socks:
            s.close()
    assert rss_bytes(srv.pid) < before + 64 * 1024 * 1024
    # Slots come back as connections close.
    deadline = time.monotonic() + 5
    while True:
        try:
            assert health(srv) == 200
            break
        except OSError:
            assert time.monotonic() < deadline, "the admin port did not admit again"
            time.sleep(0.1)
    assert_serving(srv)


def test_a_silent_admin_connection_is_closed_and_a_talking_one_is_not(srv):
    import http.client
    silent = socket.create_connection(("127.0.0.1", srv.admin_port))
    silent.sendall(b"GET /health HT")  # half a request line, and then nothing
    began = time.monotonic()
    assert closed_at_once(silent, within_s=6), "a silent connection stayed open"
    took = time.monotonic() - began
    assert 2.5 <= took <= 5.5, f"closed after {took:.1f}s, not the 3 s idle limit"
    silent.close()
    talking = http.client.HTTPConnection("127.0.0.1", srv.admin_port, timeout=5)
    try:
        for _ in range(5):  # 5 s in all, over one kept-alive connection
            talking.request("GET", "/health")
            r = talking.getresponse()
            r.read()
            assert r.status == 200
            time.sleep(1.0)
    finally:
        talking.close()


def test_an_admin_request_not_done_in_time_is_answered_503(srv):
    import base64
    auth = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
    body = b'{"node": 99, "allow_data_loss": false}' + b" " * 60
    head = (f"POST /api/v1/cluster/failover HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Basic {auth}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    s = socket.create_connection(("127.0.0.1", srv.admin_port))
    try:
        s.sendall(head)
        began = time.monotonic()
        answer = b""
        s.settimeout(0.5)
        # One byte of the body every half second: never idle, never done.
        for b in body:
            try:
                s.sendall(bytes([b]))
            except OSError:
                break
            try:
                chunk = s.recv(4096)
            except socket.timeout:
                continue
            answer += chunk
            if not chunk or b"\r\n\r\n" in answer:
                break
        took = time.monotonic() - began
    finally:
        s.close()
    assert answer.startswith(b"HTTP/1.1 503"), answer[:200]
    assert b"admin-request-timeout-s" in answer or b"\r\n\r\n" in answer, answer
    assert 1.5 <= took <= 6, f"answered after {took:.1f}s, not the 2 s request limit"
    assert_serving(srv)
