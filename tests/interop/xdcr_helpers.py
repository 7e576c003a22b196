"""Helpers shared by the XDCR interop tests (test_xdcr.py, test_xdcr_both_ways.py,
test_xdcr_faults.py): the Couchbase-shaped REST calls (form-encoded, any status returned),
clusters made with `sluice cluster up` (as any administrator), SDK connections, `$document`
reads, bounded polls, the A/B document comparison and failure diagnostics.

Conventions: cluster A runs as `Administrator` (AUTH_A), cluster B as B_USER (AUTH_B), so
a remote reference has to carry B's own credentials: start_cluster_b's `sluice server`
nodes, and `start_cluster_a(..., username=B_USER, password=B_PASS)` for a B made by
`sluice cluster up` (two_clusters' B is the exception: it runs as `Administrator`). Every
poll is bounded (`eventually`) and its failure message carries what the caller's `diag`
returns.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import couchbase.subdocument as SD
import pytest
from couchbase.auth import PasswordAuthenticator
from couchbase.cluster import Cluster
from couchbase.exceptions import CouchbaseException, DocumentNotFoundException
from couchbase.options import (ClusterOptions, ClusterTimeoutOptions, GetOptions,
                               LookupInOptions)
from couchbase.transcoder import Transcoder

from admin_http import basic
from conftest import HOST, PASSWORD, USERNAME, port_open, sluice_binary
from mcbin import kv_connect, vbucket_of
from test_cluster_up import free_base

VBS = 64
# B's administrator differs from A's: a pipeline has to use the reference's credentials.
B_USER = "xdcr-admin-b"
B_PASS = "B-s3cret-for-xdcr-7431"
AUTH_A = basic(USERNAME, PASSWORD)
AUTH_B = basic(B_USER, B_PASS)

CONVERGE_S = 60.0          # bound on every "B eventually holds X" poll
# `$document` fields that must be equal on both sides (seqno and vbucket_uuid are per cluster).
DOC_FIELDS = ("CAS", "revid", "exptime", "flags", "deleted", "datatype", "value_bytes",
              "value_crc32c", "last_modified")


# ------------------------------------------------------------------ HTTP

@dataclass
class Resp:
    status: int
    body: object     # parsed JSON, or None
    text: str

    def __str__(self) -> str:
        return f"HTTP {self.status}: {self.text[:2000]}"


def http(method: str, url: str, form: Optional[Dict[str, str]] = None,
         auth: Optional[str] = AUTH_A, timeout: float = 60.0,
         json_body: object = None) -> Resp:
    """One request, `form` sent as application/x-www-form-urlencoded (or `json_body` as
    JSON, for Sluice's own /api/v1 routes); any status returned."""
    headers = {}
    data = None
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        headers["content-type"] = "application/x-www-form-urlencoded"
    elif json_body is not None:
        data = json.dumps(json_body).encode()
        headers["content-type"] = "application/json"
    if auth:
        headers["authorization"] = auth
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    text = raw.decode("utf-8", "replace")
    try:
        body = json.loads(text) if text.strip() else None
    except ValueError:
        body = None
    return Resp(status, body, text)


def field_errors(r: Resp) -> Dict[str, object]:
    """A refusal's field -> message object: the body itself, or its "errors" member (the
    shape /pools/default/buckets answers, which Sluice uses here too)."""
    body = r.body
    if isinstance(body, dict) and isinstance(body.get("errors"), dict) and len(body) == 1:
        return body["errors"]
    return body if isinstance(body, dict) else {}


def is_field_errors(r: Resp) -> bool:
    """A 400 body as specified: a non-empty JSON object of field -> message."""
    errors = field_errors(r)
    return bool(errors) and all(isinstance(m, str) for m in errors.values())


def quoted(rid: str) -> str:
    return urllib.parse.quote(rid, safe="")


# ------------------------------------------------------------------ polling

def eventually(what: str, check: Callable[[], object], timeout: float = CONVERGE_S,
               diag: Optional[Callable[[], str]] = None, interval: float = 0.25):
    """check()'s first truthy result, polled until `timeout` (SDK/socket errors retried)."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            got = check()
            if got:
                return got
            last = got
        except (CouchbaseException, OSError) as e:
            last = e
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}"
                        f"{safe_diag(diag)}", pytrace=False)
        time.sleep(interval)


def safe_diag(diag: Optional[Callable[[], str]]) -> str:
    """"\\n" + diag(), or why it failed: diagnostics must not hide the failure."""
    if diag is None:
        return ""
    try:
        return "\n" + diag()
    except Exception as e:  # noqa: BLE001
        return f"\n(diagnostics failed: {e!r})"


# ------------------------------------------------------------------ cluster A

def log_tail_of(path: Path, lines: int = 25) -> str:
    """A server log's last lines, and its last lines that mention XDCR."""
    try:
        all_lines = path.read_text(errors="replace").splitlines()
    except OSError as e:
        return f"--- {path}: {e}"
    xdcr = [line for line in all_lines if re.search(r"xdcr|replicat|remote", line, re.I)]
    return (f"--- {path}: last XDCR-ish lines ---\n" + "\n".join(xdcr[-lines:]) +
            f"\n--- {path}: last lines ---\n" + "\n".join(all_lines[-lines:]))


class ClusterA:
    """A cluster made by `sluice cluster up` (node i: KV base+10i, admin +1), run by the
    administrator `username` / `password` (`auth`: their HTTP Basic header). Mostly a
    source, but test_xdcr.py and test_xdcr_tls.py use one as the target too. `extra_logs`
    lists the logs of nodes a test added (joined) so the diagnostics show them too."""

    def __init__(self, data_dir: Path, base: int, proc: subprocess.Popen, nodes: int,
                 username: str = USERNAME, password: str = PASSWORD):
        self.data_dir = data_dir
        self.base = base
        self.proc = proc
        self.nodes = nodes
        self.username = username
        self.password = password
        self.auth = basic(username, password)
        self.kv_ports = [base + 10 * i for i in range(nodes)]
        self.admin_ports = [base + 10 * i + 1 for i in range(nodes)]
        self.urls = [f"http://{HOST}:{p}" for p in self.admin_ports]
        self.url = self.urls[0]
        self.connstr = "couchbase://" + ",".join(f"{HOST}:{p}" for p in self.kv_ports)
        self.down: set = set()       # nodes a test killed
        self.extra_logs: List[Path] = []

    def info(self) -> dict:
        return json.loads((self.data_dir / "cluster.json").read_text())

    def pid(self, node: int) -> int:
        return next(n["pid"] for n in self.info()["nodes"] if n["id"] == node)

    def live_urls(self) -> List[str]:
        return [u for i, u in enumerate(self.urls) if i not in self.down]

    def live_kv_ports(self) -> List[int]:
        return [p for i, p in enumerate(self.kv_ports) if i not in self.down]

    def log_tail(self, lines: int = 25) -> str:
        paths = [self.data_dir / f"node-{i}" / "server.log" for i in range(self.nodes)]
        return "\n".join(log_tail_of(p, lines) for p in paths + self.extra_logs)


def stop_cluster(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def wait_cluster_uuid(url: str, auth: str, timeout: float = 20.0) -> None:
    """Bounded wait until GET /pools names the cluster: a node that has just started answers
    uuid "" until its metadata is up (for well under a second). A reference made in that
    window would record the empty uuid, so the fixtures wait it out; the tests then check
    the uuid themselves."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = http("GET", f"{url}/pools", auth=auth)
        if r.status == 404 or (isinstance(r.body, dict) and r.body.get("uuid")):
            return
        time.sleep(0.1)


def start_cluster_a(data_dir: Path, base: int, nodes: int, replicas: int,
                    vbuckets: int = VBS, username: str = USERNAME, password: str = PASSWORD,
                    env: Optional[Dict[str, str]] = None) -> ClusterA:
    """`sluice cluster up` (no automatic failover) with `username` / `password` as its
    administrator (A's by default; B_USER / B_PASS for a target with its own) and `env`
    added to the nodes' environment (e.g. a server option's SLUICE_* variable), waited
    until every node names the cluster; the caller stops it with stop_cluster(a.proc)."""
    started = time.monotonic()
    # The administrator goes by environment (as `cluster up` passes it to its nodes), so
    # the password is in no command line and no cluster.json.
    proc_env = {**os.environ, **(env or {}),
                "SLUICE_USERNAME": username, "SLUICE_PASSWORD": password}
    with open(data_dir / "cluster-up.stderr", "w") as err:
        proc = subprocess.Popen(
            [str(sluice_binary()), "cluster", "up", "--nodes", str(nodes),
             "--replicas", str(replicas), "--data-dir", str(data_dir),
             "--base-port", str(base), "--vbuckets", str(vbuckets),
             "--memory-quota-mb", "128", "--auto-failover-timeout", "0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True,
            env=proc_env)
    line = proc.stdout.readline()  # the connection string once the cluster is formed
    if not line.startswith("couchbase://"):
        stop_cluster(proc)
        pytest.fail(f"cluster up failed: {line!r}\n"
                    f"{(data_dir / 'cluster-up.stderr').read_text()[-4000:]}", pytrace=False)
    a = ClusterA(data_dir, base, proc, nodes, username, password)
    for url in a.urls:
        wait_cluster_uuid(url, a.auth)
    print(f"cluster {data_dir.name} ({nodes} nodes, {replicas} replicas, administrator "
          f"{username}) up in {time.monotonic() - started:.1f}s: {a.connstr}")
    return a


@contextmanager
def two_clusters(tmp_path: Path, b_nodes: int = 1, b_replicas: int = 0):
    """A (one node) and B, both made by `sluice cluster up` as Administrator, each with its
    own data directory and CA; (a, b), both stopped afterwards."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = start_cluster_a(tmp_path / "a", free_base(), nodes=1, replicas=0)
    try:
        # A's ports are bound by now, so B's free range cannot take them.
        b = start_cluster_a(tmp_path / "b", free_base(), nodes=b_nodes, replicas=b_replicas)
        try:
            yield a, b
        finally:
            stop_cluster(b.proc)
    finally:
        stop_cluster(a.proc)


def wait_pid_gone(pid: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"process {pid} still exists {timeout:.0f}s after SIGKILL",
                        pytrace=False)
        time.sleep(0.05)


def kill9_node(a: ClusterA, node: int) -> int:
    """SIGKILL node `node` of A and prove it: the process is gone and its ports refuse."""
    pid = a.pid(node)
    os.kill(pid, signal.SIGKILL)
    wait_pid_gone(pid)
    eventually(f"node {node}'s ports closed",
               lambda: not port_open(a.kv_ports[node]) and not port_open(a.admin_ports[node]),
               timeout=10)
    a.down.add(node)
    return pid


def cluster_view(url: str, auth: str = AUTH_A) -> dict:
    r = http("GET", f"{url}/api/v1/cluster", auth=auth, timeout=10)
    assert r.status == 200 and isinstance(r.body, dict), f"GET {url}/api/v1/cluster: {r}"
    return r.body


def rebalance_status(url: str, auth: str = AUTH_A) -> dict:
    r = http("GET", f"{url}/api/v1/cluster/rebalance", auth=auth, timeout=15)
    assert r.status == 200 and isinstance(r.body, dict), f"rebalance status: {r}"
    return r.body


def rebalance_and_wait(url: str, want_nodes: List[int], auth: str = AUTH_A,
                       timeout: float = 150.0,
                       diag: Optional[Callable[[], str]] = None) -> dict:
    """POST /api/v1/cluster/rebalance (202), then waits until it is no longer running and
    the map lists `want_nodes`; fails if it ended with an error."""
    started = time.monotonic()
    r = http("POST", f"{url}/api/v1/cluster/rebalance", auth=auth, json_body={}, timeout=15)
    assert r.status == 202, f"rebalance refused: {r}"

    def done():
        st = rebalance_status(url, auth)
        if st.get("running"):
            return None
        view = cluster_view(url, auth)
        return st if view.get("map_nodes") == want_nodes else None

    st = eventually(f"the rebalance onto {want_nodes} done", done, timeout=timeout,
                    diag=diag, interval=0.5)
    assert st.get("error") is None, f"rebalance failed: {st}{safe_diag(diag)}"
    print(f"rebalance onto {want_nodes}: {st.get('moves_done')}/{st.get('moves_total')} "
          f"moves in {time.monotonic() - started:.1f}s")
    return st


def vbucket_actives(url: str, bucket: str, auth: str = AUTH_A) -> List[int]:
    """Each vbucket's active node as a KV port (-1 for none), from the bucket's map."""
    r = http("GET", f"{url}/pools/default/b/{bucket}", auth=auth, timeout=10)
    assert r.status == 200 and isinstance(r.body, dict), f"map of {bucket}: {r}"
    m = r.body["vBucketServerMap"]
    ports = [int(s.rsplit(":", 1)[1]) for s in m["serverList"]]
    return [ports[chain[0]] if chain and chain[0] >= 0 else -1 for chain in m["vBucketMap"]]


# ------------------------------------------------------------------ SDK, buckets, items

def connect(connstr: str, user: str, password: str) -> Cluster:
    opts = ClusterOptions(
        PasswordAuthenticator(user, password),
        timeout_options=ClusterTimeoutOptions(bootstrap_timeout=timedelta(seconds=10),
                                              kv_timeout=timedelta(seconds=5),
                                              management_timeout=timedelta(seconds=30)),
        enable_dns_srv=False)
    return Cluster(connstr, opts)


def pools_uuid(url: str, auth: str) -> str:
    r = http("GET", f"{url}/pools", auth=auth)
    assert r.status == 200 and isinstance(r.body, dict), f"GET {url}/pools: {r}"
    uuid = r.body.get("uuid")
    assert isinstance(uuid, str) and uuid, f"GET {url}/pools has no uuid: {r}"
    return uuid


def add_remote_ref(url: str, name: str, hostname: str, username: str, password: str,
                   auth: str = AUTH_A) -> dict:
    """A remote cluster reference made on the cluster at `url`; its JSON."""
    r = http("POST", f"{url}/pools/default/remoteClusters",
             {"name": name, "hostname": hostname, "username": username,
              "password": password}, auth=auth)
    assert r.status == 200 and isinstance(r.body, dict), f"remote reference {name}: {r}"
    return r.body


def create_bucket(url: str, auth: str, name: str, **fields) -> None:
    r = http("POST", f"{url}/pools/default/buckets",
             {"name": name, "ramQuotaMB": "100", **fields}, auth=auth)
    assert r.status in (200, 202), f"create bucket {name} at {url}: {r}"


def probe_keys(vbuckets: int = VBS, prefix: str = "xdcr-probe-") -> List[str]:
    """Keys that between them fall in every vbucket."""
    seen: Dict[int, str] = {}
    i = 0
    while len(seen) < vbuckets:
        k = f"{prefix}{i}"
        seen.setdefault(vbucket_of(k.encode(), vbuckets), k)
        i += 1
    return list(seen.values())


PROBES = probe_keys()


def ready_collection(cluster: Cluster, bucket: str, timeout: float = 30.0):
    """The bucket's default collection once a read in every vbucket gets an answer (a new
    bucket's vbuckets become active shortly after the 202)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            col = cluster.bucket(bucket).default_collection()
            for k in PROBES:
                try:
                    col.get(k, GetOptions(timeout=timedelta(seconds=2)))
                except DocumentNotFoundException:
                    pass
            return col
        except CouchbaseException as e:
            if time.monotonic() > deadline:
                pytest.fail(f"bucket {bucket} not serving every vbucket within {timeout}s: "
                            f"{e!r}", pytrace=False)
            time.sleep(0.3)


def active_items(kv_ports: Iterable[int], user: str, password: str, bucket: str) -> int:
    """Live documents in the bucket's active vbuckets over all the given nodes (a node's
    curr_items counts its replicas' too): `vb_N:items` of every vbucket STAT vbucket shows
    active."""
    total = 0
    for port in kv_ports:
        with kv_connect(port, user, password, bucket=bucket) as c:
            states = c.stat("vbucket")
            seqnos = c.stat("vbucket-seqno")
        total += sum(int(seqnos[f"{vb}:items"]) for vb, state in states.items()
                     if state == "active")
    return total


# ------------------------------------------------------------------ replications

def create_replication(url: str, from_bucket: str, to_cluster: str, to_bucket: str,
                       auth: str = AUTH_A, **extra: str) -> Resp:
    form = {"fromBucket": from_bucket, "toCluster": to_cluster, "toBucket": to_bucket,
            "replicationType": "continuous", **extra}
    return http("POST", f"{url}/controller/createReplication", form, auth=auth)


def start_replication_at(url: str, from_bucket: str, remote: dict, to_bucket: str,
                         auth: str = AUTH_A, **extra: str) -> str:
    """createReplication at the cluster of `url` to `remote` (a reference's JSON); the id."""
    r = create_replication(url, from_bucket, remote["name"], to_bucket, auth=auth, **extra)
    assert r.status == 200 and isinstance(r.body, dict), f"createReplication: {r}"
    rid = r.body.get("id")
    assert rid == f"{remote['uuid']}/{from_bucket}/{to_bucket}", r
    return rid


def settings(url: str, rid: str, auth: str = AUTH_A) -> Resp:
    return http("GET", f"{url}/settings/replications/{quoted(rid)}", auth=auth)


def set_paused(url: str, rid: str, paused: bool, auth: str = AUTH_A) -> Resp:
    return http("POST", f"{url}/settings/replications/{quoted(rid)}",
                {"pauseRequested": "true" if paused else "false"}, auth=auth)


def cancel(url: str, rid: str, auth: str = AUTH_A) -> Resp:
    return http("DELETE", f"{url}/controller/cancelXDCR/{quoted(rid)}", auth=auth)


def xdcr_tasks(url: str, auth: str = AUTH_A) -> List[dict]:
    r = http("GET", f"{url}/pools/default/tasks", auth=auth)
    assert r.status == 200 and isinstance(r.body, list), f"GET {url}/pools/default/tasks: {r}"
    return [t for t in r.body if isinstance(t, dict) and t.get("type") == "xdcr"]


def task_of(url: str, rid: str, auth: str = AUTH_A) -> Optional[dict]:
    return next((t for t in xdcr_tasks(url, auth) if t.get("id") == rid), None)


def tasks_report(urls: Sequence[str], auth: str = AUTH_A) -> str:
    """The xdcr tasks as every given node answers them (or why it did not)."""
    out = []
    for url in urls:
        try:
            out.append(f"tasks at {url}: {json.dumps(xdcr_tasks(url, auth))}")
        except Exception as e:  # noqa: BLE001
            out.append(f"tasks at {url}: {e!r}")
    return "\n".join(out)


# ------------------------------------------------------------------ documents

class Passthrough(Transcoder):
    """Bytes in and out as they are, with the flags given (encode) or found (decode)."""

    def __init__(self, flags: int = 0):
        self.flags = flags

    def encode_value(self, value):
        return bytes(value), self.flags

    def decode_value(self, value, flags):
        return bytes(value), flags


RAW = Passthrough()


def live_state(col, key: str) -> Optional[dict]:
    """What a reader sees of a live document: `$document`'s metadata, the `meta` user
    xattr, the body's bytes and flags, the CAS. None if the document does not exist."""
    try:
        r = col.lookup_in(key, [SD.get("$document", xattr=True), SD.get("meta", xattr=True)])
        g = col.get(key, GetOptions(transcoder=RAW))
    except DocumentNotFoundException:
        return None
    doc = r.content_as[dict](0)
    st = {f: doc.get(f) for f in DOC_FIELDS}
    st["datatype"] = sorted(set(st["datatype"] or []) - {"snappy"})
    st["lookup_cas"] = r.cas
    st["meta_xattr"] = r.content_as[dict](1) if r.exists(1) else None
    st["body"], st["get_flags"] = g.value
    st["get_cas"] = g.cas
    return st


def tombstone_state(col, key: str) -> Optional[dict]:
    """`$document` of a key read with access_deleted: the tombstone's (or live document's)
    CAS, revision and deleted flag; None if the key is unknown."""
    try:
        r = col.lookup_in(key, [SD.get("$document", xattr=True)],
                          LookupInOptions(access_deleted=True))
    except DocumentNotFoundException:
        return None
    doc = r.content_as[dict](0)
    return {f: doc.get(f) for f in ("CAS", "revid", "deleted")}


def absent(col, key: str) -> bool:
    try:
        col.get(key, GetOptions(transcoder=RAW))
        return False
    except DocumentNotFoundException:
        return True


def side_state(col, key: str) -> Tuple[str, Optional[dict]]:
    """("live", live_state) or ("deleted", tombstone_state or None)."""
    st = live_state(col, key)
    if st is not None:
        return "live", st
    return "deleted", tombstone_state(col, key)


def state_difference(a: Tuple[str, Optional[dict]], b: Tuple[str, Optional[dict]]
                     ) -> Optional[str]:
    """Why two sides' states of one key differ (None if they agree): live on both with every
    `$document` field, the body, its flags and the user xattr equal; or deleted on both
    (their tombstones, where both keep one, with the same CAS and revision)."""
    (ka, sa), (kb, sb) = a, b
    if ka != kb:
        la = "absent" if sa is None else ka
        lb = "absent" if sb is None else kb
        return f"{la} on A, {lb} on B (A: {brief(sa)}, B: {brief(sb)})"
    if ka == "live":
        diff = {f: (sa.get(f), sb.get(f)) for f in sa if sa.get(f) != sb.get(f)}
        return f"(A, B) differ in {diff}" if diff else None
    if sa is not None and sb is not None and sa != sb:
        return f"tombstones differ: A {sa}, B {sb}"
    return None


def brief(st: Optional[dict]) -> str:
    if st is None:
        return "no tombstone"
    keep = {k: st.get(k) for k in ("CAS", "revid", "deleted") if k in st}
    if "body" in st:
        keep["body"] = st["body"][:80]
    return str(keep)


def converge_equal(col_a, col_b, keys: Sequence[str], what: str,
                   diag: Optional[Callable[[], str]] = None,
                   timeout: float = CONVERGE_S) -> Dict[str, Tuple[str, Optional[dict]]]:
    """Polls until every key reads the same on both sides (`state_difference`), re-reading
    only the keys that still differ; returns A's state of every key. Both sides are read
    on every pass, so this also serves replications both ways."""
    pending = set(keys)
    last: Dict[str, str] = {}
    final: Dict[str, Tuple[str, Optional[dict]]] = {}

    def converged() -> bool:
        for k in sorted(pending):
            sa, sb = side_state(col_a, k), side_state(col_b, k)
            why = state_difference(sa, sb)
            if why:
                last[k] = f"{k}: {why}"
                continue
            final[k] = sa
            pending.discard(k)
            last.pop(k, None)
        return not pending

    def not_converged() -> str:
        return (f"{len(pending)} of {len(keys)} keys differ between A and B, e.g.:\n"
                + "\n".join(list(last.values())[:20]) + safe_diag(diag))

    started = time.monotonic()
    eventually(what, converged, timeout=timeout, diag=not_converged, interval=0.5)
    print(f"{what}: {len(keys)} keys equal on both sides "
          f"(after {time.monotonic() - started:.1f}s)")
    return final


def recheck_equal(col_a, col_b, keys: Sequence[str], what: str,
                  diag: Optional[Callable[[], str]] = None) -> None:
    """One more read of every key on both sides, which must agree now (no poll)."""
    problems = []
    for k in keys:
        why = state_difference(side_state(col_a, k), side_state(col_b, k))
        if why:
            problems.append(f"{k}: {why}")
    assert not problems, (f"{what}: {len(problems)} keys differ:\n" + "\n".join(problems[:20])
                          + safe_diag(diag))


# ------------------------------------------------------------------ cluster B

class ClusterB:
    """A target made of `sluice server` processes (conftest's SluiceServer) with B's own
    administrator: the first starts a cluster of one, the others join it."""

    def __init__(self, servers: List):
        self.servers = servers

    @property
    def url(self) -> str:
        return self.servers[0].admin_url

    @property
    def urls(self) -> List[str]:
        return [s.admin_url for s in self.servers]

    @property
    def hostname(self) -> str:
        return f"{HOST}:{self.servers[0].admin_port}"

    @property
    def kv_ports(self) -> List[int]:
        return [s.kv_port for s in self.servers]

    @property
    def connstr(self) -> str:
        return "couchbase://" + ",".join(f"{HOST}:{p}" for p in self.kv_ports)

    def log_tail(self, lines: int = 25) -> str:
        return "\n".join(log_tail_of(s.log_path, lines) for s in self.servers)


def start_cluster_b(factory, nodes: int = 1, extra_args: Tuple[str, ...] = ()) -> ClusterB:
    """B: one `sluice server` (a new cluster of one, `default` bucket, no replica; given
    `extra_args` too), and `nodes - 1` more joined and rebalanced in."""
    started = time.monotonic()
    srv = factory(username=B_USER, password=B_PASS, memcached=False, vbuckets=VBS,
                  extra_args=tuple(extra_args))
    wait_cluster_uuid(srv.admin_url, AUTH_B)
    b = ClusterB([srv])
    for _ in range(nodes - 1):
        join_b(factory, b)
    if nodes > 1:
        rebalance_and_wait(b.url, list(range(nodes)), auth=AUTH_B, diag=b.log_tail)
    print(f"cluster B ({nodes} nodes) up in {time.monotonic() - started:.1f}s: {b.connstr}")
    return b


def join_b(factory, b: ClusterB):
    """Starts one more B node joining through B's first node, waited until the first node
    lists it (it holds nothing until a rebalance takes it in); the server."""
    srv = factory(username=B_USER, password=B_PASS, memcached=False, vbuckets=VBS,
                  extra_args=("--join", f"{HOST}:{b.servers[0].admin_port}"))
    b.servers.append(srv)
    n = len(b.servers)
    eventually(f"B's node {n - 1} listed by its first node",
               lambda: len(cluster_view(b.url, AUTH_B).get("nodes", [])) >= n, timeout=30,
               diag=b.log_tail)
    return srv
