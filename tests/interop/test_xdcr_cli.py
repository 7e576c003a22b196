"""XDCR through the `sluice xdcr` command line, and the replication's figures where an
operator reads them: `sluice xdcr status`, STAT group `xdcr` on the KV port, `/metrics`.

Cluster A (`sluice cluster up`, 2 nodes, 1 replica, 64 vbuckets) is the source, B (one
`sluice server`, its own administrator B_USER / B_PASS) the target, as in test_xdcr.py. Every
`sluice` call names A's admin port with `--admin` and logs in with `--username/--password`.

* test_cli_remote_add_list_remove: `xdcr remote add` with a wrong remote password exits
  non-zero with "Authentication failed" (and does not echo the password); with the right one
  it exits 0 naming B's uuid (B's `GET /pools` uuid); `remote list` shows name, host, user
  and uuid, never the password; `remote remove` takes it away; removing it again fails.
* test_cli_replication_lifecycle_and_figures: `xdcr create --filter` prints `<uuid B>/X/Y`;
  documents written on A with the SDK (some the filter keeps back) show in `xdcr status`
  (running, `docs written` = the matching ones, `changes left 0`), in STAT xdcr (summed over
  A's nodes, `latency_p99_us` present) and in /metrics (`sluice_xdcr_docs_written_total` and
  the `sluice_xdcr_latency_seconds` histogram, summed over A's nodes); `xdcr pause` shows
  paused (status and `pauseRequested`), holds new writes (`changes left` grows, `docs
  written` does not), `xdcr resume` catches up; `remote remove` of the reference in use
  fails; `xdcr delete` takes the replication out of status; `xdcr create --paused
  --filter-deletion --optimistic-threshold 1024` makes one shown paused from the start with
  those settings; `xdcr settings ID` prints them as JSON, changes the ones given
  (`--filter-deletion false --bypass-expiry --optimistic-threshold 0`, checked over REST too)
  and refuses a threshold over 20 MiB naming the field; `--filter EXPR --skip-restream`
  replaces the filter (shown over REST), a filter that does not compile is refused naming
  `filterExpression`, and `--skip-restream` alone is a usage error; then the reference can
  be removed.

Run: cd tests/interop && python3 -m pytest test_xdcr_cli.py -q -p no:cacheprovider
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from typing import Callable, Dict, List, Optional, Tuple

import pytest

from conftest import HOST, PASSWORD, USERNAME, sluice_binary
from mcbin import kv_connect
from test_cluster_up import free_base
from xdcr_helpers import (AUTH_A, AUTH_B, B_PASS, B_USER, VBS, connect, create_bucket,
                          http, pools_uuid, ready_collection, settings, start_cluster_a,
                          stop_cluster, wait_cluster_uuid)

pytestmark = pytest.mark.timeout(120)

A_NODES = 2
DEADLINE_S = 30.0      # bound on every poll here


# ------------------------------------------------------------------ clusters

@pytest.fixture(scope="module")
def cluster_a(tmp_path_factory):
    a = start_cluster_a(tmp_path_factory.mktemp("xdcr-cli-a"), free_base(), A_NODES,
                        replicas=1)
    try:
        yield a
    finally:
        stop_cluster(a.proc)


@pytest.fixture(scope="module")
def node_b(sluice_module_factory):
    srv = sluice_module_factory(username=B_USER, password=B_PASS, memcached=False,
                                vbuckets=VBS)
    wait_cluster_uuid(srv.admin_url, AUTH_B)
    return srv


def b_hostname(b) -> str:
    return f"{HOST}:{b.admin_port}"


# ------------------------------------------------------------------ the CLI

class Run:
    def __init__(self, args: List[str], proc: subprocess.CompletedProcess):
        self.args = args
        self.code = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    @property
    def both(self) -> str:
        return self.out + self.err

    def __str__(self) -> str:
        return (f"$ sluice {' '.join(self.args)}\nexit {self.code}\n"
                f"--- stdout ---\n{self.out}--- stderr ---\n{self.err[-3000:]}")


def sluice_xdcr(a, *args: str, timeout: float = 60.0) -> Run:
    """`sluice xdcr ARGS --admin <A node 0> --username --password` (any exit code)."""
    full = ["xdcr", *args, "--admin", f"{HOST}:{a.admin_ports[0]}",
            "--username", USERNAME, "--password", PASSWORD]
    # No SLUICE_* from the caller's environment may stand in for a flag.
    # RUST_BACKTRACE=1 (set for the servers) would append a stack backtrace to every
    # refusal the CLI reports (anyhow), burying its one-line message.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SLUICE_") and k not in ("RUST_BACKTRACE", "RUST_LIB_BACKTRACE")}
    proc = subprocess.run([str(sluice_binary()), *full], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    return Run(full, proc)


def ok(r: Run) -> Run:
    assert r.code == 0, f"expected success:\n{r}"
    return r


def refused(r: Run, *needles: str) -> Run:
    assert r.code != 0, f"expected a non-zero exit:\n{r}"
    assert r.both.strip(), f"a refusal without any message:\n{r}"
    for n in needles:
        assert re.search(n, r.both, re.I), f"the refusal does not say {n!r}:\n{r}"
    return r


def parse_status(text: str) -> Dict[str, dict]:
    """`xdcr status` output: id -> {"status", "source", "target", "lines": {label: rest}}.
    A replication's first line is `ID  STATUS  SOURCE -> TARGET`; its figures follow,
    indented, as `label   value...` (label and value separated by 2+ spaces)."""
    out: Dict[str, dict] = {}
    cur: Optional[dict] = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            m = re.match(r"^(\S+)\s{2}(\S+)\s{2}(\S+) -> (\S+)$", line)
            assert m, f"unexpected `xdcr status` line {line!r} in:\n{text}"
            cur = {"status": m.group(2), "source": m.group(3), "target": m.group(4),
                   "lines": {}}
            out[m.group(1)] = cur
        else:
            assert cur is not None, f"figures before any replication in:\n{text}"
            m = re.match(r"^\s+(\S.*?)\s{2,}(\S.*)$", line)
            if m:
                cur["lines"][m.group(1)] = m.group(2)
            else:
                cur["lines"][line.strip()] = ""
    return out


def first_int(s: Optional[str]) -> Optional[int]:
    m = re.match(r"\s*(\d+)", s or "")
    return int(m.group(1)) if m else None


def status_of(a, rid: str) -> Tuple[Optional[dict], Run]:
    r = ok(sluice_xdcr(a, "status"))
    return parse_status(r.out).get(rid), r


# ------------------------------------------------------------------ STAT and /metrics

def stat_xdcr(port: int, bucket: str) -> Dict[str, str]:
    with kv_connect(port, USERNAME, PASSWORD, bucket=bucket) as c:
        return c.stat("xdcr")


LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)$")


def metric_samples(text: str) -> List[Tuple[str, Dict[str, str], float]]:
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if m:
            out.append((m.group(1), dict(LABEL.findall(m.group(2) or "")),
                        float(m.group(3))))
    return out


def metrics_text(url: str) -> str:
    r = http("GET", f"{url}/metrics", auth=AUTH_A)
    assert r.status == 200, f"GET {url}/metrics: {r}"
    return r.text


def poll(what: str, check: Callable[[], object], diag: Callable[[], str],
         timeout: float = DEADLINE_S, interval: float = 0.25):
    """check()'s first truthy result before the deadline; else fail with what diag() says."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\n{diag()}",
                        pytrace=False)
        time.sleep(interval)


# ------------------------------------------------------------------ 1. remote references

def test_cli_remote_add_list_remove(cluster_a, node_b):
    a, b = cluster_a, node_b
    uuid_b = pools_uuid(b.admin_url, AUTH_B)
    name = "cli-ref"
    wrong = "not-the-" + B_PASS
    try:
        r = refused(sluice_xdcr(a, "remote", "add", name, "--hostname", b_hostname(b),
                                "--remote-username", B_USER, "--remote-password", wrong),
                    "Authentication failed")
        print(f"wrong remote password (exit {r.code}): {r.both.strip()}")
        assert wrong not in r.both, f"the refusal echoes the remote password:\n{r}"
        listed = ok(sluice_xdcr(a, "remote", "list"))
        assert name not in listed.out, f"a refused reference is listed:\n{listed}"

        r = ok(sluice_xdcr(a, "remote", "add", name, "--hostname", b_hostname(b),
                           "--remote-username", B_USER, "--remote-password", B_PASS))
        print(r.out, end="")
        assert uuid_b in r.out, f"`remote add` does not name B's uuid {uuid_b}:\n{r}"
        assert name in r.out, r
        assert B_PASS not in r.both, f"`remote add` shows the remote password:\n{r}"

        listed = ok(sluice_xdcr(a, "remote", "list"))
        print(listed.out, end="")
        assert B_PASS not in listed.both, f"`remote list` shows the password:\n{listed}"
        lines = [ln for ln in listed.out.splitlines() if ln.split("\t")[:1] == [name]]
        assert len(lines) == 1, f"{name} not listed exactly once:\n{listed}"
        for part in (b_hostname(b), B_USER, uuid_b):
            assert part in lines[0], f"{part!r} missing from the line {lines[0]!r}"

        r = refused(sluice_xdcr(a, "remote", "add", name, "--hostname", b_hostname(b),
                                "--remote-username", B_USER, "--remote-password", B_PASS))
        print(f"duplicate name: {r.both.strip()}")

        r = ok(sluice_xdcr(a, "remote", "remove", name))
        listed = ok(sluice_xdcr(a, "remote", "list"))
        assert not [ln for ln in listed.out.splitlines() if ln.split("\t")[:1] == [name]], \
            f"{name} still listed after `remote remove`:\n{listed}"
        r = refused(sluice_xdcr(a, "remote", "remove", name))
        print(f"remove again: {r.both.strip()}")
    finally:
        sluice_xdcr(a, "remote", "remove", name)


# ------------------------------------------------------------------ 2. replications

def test_cli_replication_lifecycle_and_figures(cluster_a, node_b):
    a, b = cluster_a, node_b
    uuid_b = pools_uuid(b.admin_url, AUTH_B)
    src, dst = "cli_src", "cli_dst"
    ref = "cli-b"
    create_bucket(a.url, AUTH_A, src)
    create_bucket(b.admin_url, AUTH_B, dst)
    sdk = connect(a.connstr, USERNAME, PASSWORD)
    rid: Optional[str] = None
    try:
        col = ready_collection(sdk, src)
        r = ok(sluice_xdcr(a, "remote", "add", ref, "--hostname", b_hostname(b),
                           "--remote-username", B_USER, "--remote-password", B_PASS))
        assert uuid_b in r.out, r

        # Refusals first: an unknown source bucket, an unknown reference.
        r = refused(sluice_xdcr(a, "create", "--from-bucket", "no_such_bucket",
                                "--to-cluster", ref, "--to-bucket", dst), "fromBucket|bucket")
        print(f"unknown bucket: {r.both.strip()}")
        r = refused(sluice_xdcr(a, "create", "--from-bucket", src, "--to-cluster", "no-ref",
                                "--to-bucket", dst), "toCluster|cluster|remote")
        print(f"unknown reference: {r.both.strip()}")

        r = ok(sluice_xdcr(a, "create", "--from-bucket", src, "--to-cluster", ref,
                           "--to-bucket", dst, "--filter", "^cli-"))
        rid = r.out.strip()
        assert rid == f"{uuid_b}/{src}/{dst}", f"`xdcr create` printed {rid!r}:\n{r}"

        def diag() -> str:
            parts = [str(sluice_xdcr(a, "status"))]
            for port in a.kv_ports:
                try:
                    parts.append(f"STAT xdcr at {port}: {stat_xdcr(port, src)}")
                except Exception as e:  # noqa: BLE001
                    parts.append(f"STAT xdcr at {port}: {e!r}")
            parts.append(a.log_tail())
            return "\n".join(parts)

        st, run = status_of(a, rid)
        assert st is not None, f"the new replication is not in `xdcr status`:\n{run}"
        assert st["status"] == "running", f"created without --paused:\n{run}"
        assert st["source"] == src and st["target"] == f"/remoteClusters/{uuid_b}/buckets/{dst}", \
            run
        assert st["lines"].get("filter") == "^cli-", f"the filter line:\n{run}"

        # Writes on A: `keep` match the filter, `drop` do not.
        keep = [f"cli-{i}" for i in range(150)]
        drop = [f"other-{i}" for i in range(50)]
        for k in drop + keep:
            col.upsert(k, {"k": k})
        n = len(keep)

        def figures_match():
            st, run = status_of(a, rid)
            if st is None:
                return None
            written = first_int(st["lines"].get("docs written"))
            left = first_int(st["lines"].get("changes left"))
            return (st, run) if (written == n and left == 0) else None

        st, run = poll(f"`xdcr status` to show docs written {n} and changes left 0",
                       figures_match, diag)
        print(run.out, end="")
        assert st["status"] == "running", run
        received = st["lines"].get("docs received", "")
        assert re.match(rf"{n + len(drop)}\s+\(filtered: {len(drop)}\)", received), \
            f"docs received / filtered: {received!r}, wrote {n} matching and {len(drop)} " \
            f"others\n{run}"
        assert re.search(r"conflict resolution at the target: 0;.*metadata newer: 0\)",
                         st["lines"].get("docs written", "")), \
            f"conflict-resolution failures on a fresh target:\n{run}"
        a_stats = poll("figures of the replication in STAT xdcr on A's nodes",
                       lambda: stat_sums(a, src, rid, n), diag, timeout=10)

        # STAT xdcr: per node, summed over A's nodes.
        p = f"replication:{rid}:"
        per_node, sums = a_stats
        for port, stats in per_node.items():
            print(f"STAT xdcr at {port}: {stats}")
            for k in ("docs_written", "changes_left", "docs_received_from_dcp",
                      "docs_filtered", "latency_p50_us", "latency_p99_us"):
                assert f"{p}{k}" in stats, f"STAT xdcr at {port} lacks {p}{k}: {stats}"
        assert sums["docs_written"] == n, f"docs_written summed over A's nodes: {sums}"
        assert sums["docs_filtered"] == len(drop), f"docs_filtered summed: {sums}"
        assert sums["changes_left"] == 0, sums
        assert max(int(s[f"{p}latency_p99_us"]) for s in per_node.values()) > 0, per_node
        # A bucket without replications has no xdcr figures.
        other = stat_xdcr(a.kv_ports[0], "default")
        assert not [k for k in other if rid in k], f"STAT xdcr of `default`: {other}"

        # /metrics: the counter and the histogram, summed over A's nodes.
        labels = {"bucket": src, "replication": rid}
        written_total = 0.0
        hist_count = 0.0
        inf_bucket = 0.0
        for url in a.urls:
            text = metrics_text(url)
            samples = metric_samples(text)
            assert "# TYPE sluice_xdcr_latency_seconds histogram" in text, \
                f"no xdcr latency histogram at {url}/metrics:\n" + \
                "\n".join(ln for ln in text.splitlines() if "xdcr" in ln)[:3000]
            mine = [(nm, lb, v) for nm, lb, v in samples
                    if nm.startswith("sluice_xdcr_") and
                    {k: lb.get(k) for k in labels} == labels]
            names = {nm for nm, _, _ in mine}
            for want in ("sluice_xdcr_docs_written_total", "sluice_xdcr_latency_seconds_count",
                         "sluice_xdcr_latency_seconds_sum",
                         "sluice_xdcr_latency_seconds_bucket"):
                assert want in names, f"{url}/metrics lacks {want}{labels}: has {sorted(names)}"
            assert f'sluice_xdcr_docs_written_total{{bucket="{src}",replication="{rid}"}}' \
                in text, f"the exact counter line at {url}/metrics"
            written_total += sum(v for nm, _, v in mine
                                 if nm == "sluice_xdcr_docs_written_total")
            hist_count += sum(v for nm, _, v in mine
                              if nm == "sluice_xdcr_latency_seconds_count")
            inf_bucket += sum(v for nm, lb, v in mine
                              if nm == "sluice_xdcr_latency_seconds_bucket"
                              and lb.get("le") == "+Inf")
        assert written_total == n, f"sluice_xdcr_docs_written_total summed over A: " \
                                   f"{written_total}, wrote {n}"
        assert hist_count == n == inf_bucket, \
            f"latency histogram count {hist_count}, +Inf bucket {inf_bucket}, written {n}"

        # Pause: shown paused, holds new writes.
        r = ok(sluice_xdcr(a, "pause", rid))
        assert rid in r.out, r
        st, run = status_of(a, rid)
        assert st and st["status"] == "paused", f"after `xdcr pause`:\n{run}"
        s = settings(a.url, rid)
        assert s.status == 200 and s.body.get("pauseRequested") is True, f"settings: {s}"
        more = [f"cli-more-{i}" for i in range(20)]
        for k in more:
            col.upsert(k, {"k": k})

        def held():
            st, run = status_of(a, rid)
            if st and first_int(st["lines"].get("changes left")) == len(more):
                return st, run
            return None

        st, run = poll(f"`changes left {len(more)}` while paused", held, diag)
        assert st["status"] == "paused", run
        assert first_int(st["lines"].get("docs written")) == n, \
            f"documents were written while paused:\n{run}"

        r = ok(sluice_xdcr(a, "resume", rid))
        st, run = status_of(a, rid)
        assert st and st["status"] == "running", f"after `xdcr resume`:\n{run}"
        assert settings(a.url, rid).body.get("pauseRequested") is False
        n += len(more)
        poll(f"`xdcr status` to show docs written {n} and changes left 0 after resume",
             figures_match, diag)

        # A reference in use stays.
        r = refused(sluice_xdcr(a, "remote", "remove", ref))
        print(f"remove a reference in use: {r.both.strip()}")
        assert ref in ok(sluice_xdcr(a, "remote", "list")).out

        # Delete: gone from status; again: refused.
        r = ok(sluice_xdcr(a, "delete", rid))
        st, run = status_of(a, rid)
        assert st is None, f"still in `xdcr status` after `xdcr delete`:\n{run}"
        r = refused(sluice_xdcr(a, "delete", rid))
        print(f"delete again: {r.both.strip()}")
        rid = None

        # Created paused, with settings: paused from the start, the settings as asked.
        r = ok(sluice_xdcr(a, "create", "--from-bucket", src, "--to-cluster", ref,
                           "--to-bucket", dst, "--paused", "--filter-deletion",
                           "--optimistic-threshold", "1024"))
        rid = r.out.strip()
        assert rid == f"{uuid_b}/{src}/{dst}", r
        st, run = status_of(a, rid)
        assert st and st["status"] == "paused", f"created with --paused:\n{run}"
        assert "filter" not in st["lines"], f"a filter shown where none was asked:\n{run}"
        s = settings(a.url, rid).body
        assert s.get("pauseRequested") is True, s
        assert (s.get("filterDeletion"), s.get("filterExpiration"), s.get("filterBypassExpiry"),
                s.get("optimisticReplicationThreshold")) == (True, False, False, 1024), s
        print(f"re-created paused:\n{run.out}", end="")

        # `xdcr settings`: shows them (JSON), changes those given, refuses bad values.
        shown = json.loads(ok(sluice_xdcr(a, "settings", rid)).out)
        assert shown.get("optimisticReplicationThreshold") == 1024, shown
        changed = json.loads(ok(sluice_xdcr(a, "settings", rid, "--filter-deletion", "false",
                                            "--bypass-expiry", "--optimistic-threshold",
                                            "0")).out)
        assert (changed.get("filterDeletion"), changed.get("filterBypassExpiry"),
                changed.get("optimisticReplicationThreshold"),
                changed.get("pauseRequested")) == (False, True, 0, True), changed
        s = settings(a.url, rid).body
        assert (s.get("filterDeletion"), s.get("filterBypassExpiry"),
                s.get("optimisticReplicationThreshold")) == (False, True, 0), s
        r = refused(sluice_xdcr(a, "settings", rid, "--optimistic-threshold", "20971521"),
                    "optimisticReplicationThreshold")
        print(f"threshold over 20 MiB: {r.both.strip()}")
        changed = json.loads(ok(sluice_xdcr(a, "settings", rid, "--filter", 'kind = "x"',
                                            "--skip-restream")).out)
        assert changed.get("filterExpression") == 'kind = "x"', changed
        assert settings(a.url, rid).body.get("filterExpression") == 'kind = "x"'
        r = refused(sluice_xdcr(a, "settings", rid, "--filter", "kind = ("), "filterExpression")
        print(f"a filter that does not compile: {r.both.strip()}")
        r = sluice_xdcr(a, "settings", rid, "--skip-restream")
        assert r.code == 2 and "--filter" in r.err, f"--skip-restream without --filter: {r}"
        ok(sluice_xdcr(a, "delete", rid))
        rid = None

        # Unused now: the reference goes.
        r = ok(sluice_xdcr(a, "remote", "remove", ref))
        listed = ok(sluice_xdcr(a, "remote", "list"))
        assert not [ln for ln in listed.out.splitlines() if ln.split("\t")[:1] == [ref]], \
            f"{ref} still listed:\n{listed}"
    finally:
        if rid is not None:
            sluice_xdcr(a, "delete", rid)
        sluice_xdcr(a, "remote", "remove", ref)
        sdk.close()


def stat_sums(a, bucket: str, rid: str, want_written: int):
    """(per node STAT xdcr, sums of `replication:<rid>:NAME` over A's nodes) once the
    summed docs_written is `want_written`."""
    p = f"replication:{rid}:"
    per_node = {port: stat_xdcr(port, bucket) for port in a.kv_ports}
    sums: Dict[str, int] = {}
    for stats in per_node.values():
        for k, v in stats.items():
            if k.startswith(p) and re.fullmatch(r"\d+", v):
                sums[k[len(p):]] = sums.get(k[len(p):], 0) + int(v)
    return (per_node, sums) if sums.get("docs_written") == want_written else None
