"""memccapable -b (libmemcached-tools 1.1.4) against Sluice's memcached port.

memccapable prints one line per test: the name padded to 40 columns on
stdout, then "[pass]" on stdout or "[FAIL]" on stderr, and finally
"All tests passed" (stdout) or "N of M tests failed" (stderr). With -v a
failing test also prints "\\n<file>:<line>: <failed expression>" before
its [FAIL]. We run it under `stdbuf -o0` with stderr merged into stdout so
the two streams interleave in program order, then parse per test.

The same harness is first checked against the real memcached 1.6 (guard).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import pytest

from conftest import HOST, free_ports, wait_for_port

# The binary-protocol tests of memccapable 1.1.4, in the order it runs them
# (src/bin/memcapable.cc, `testcases[]`).
BINARY_TESTS = [
    "binary noop", "binary quit", "binary quitq", "binary set", "binary setq",
    "binary flush", "binary flushq", "binary add", "binary addq", "binary replace",
    "binary replaceq", "binary delete", "binary deleteq", "binary get", "binary getq",
    "binary getk", "binary getkq", "binary incr", "binary incrq", "binary decr",
    "binary decrq", "binary version", "binary append", "binary appendq",
    "binary prepend", "binary prependq", "binary stat",
]

MEMCCAPABLE = shutil.which("memccapable")
RUN_TIMEOUT_S = 120   # whole memccapable run
IO_TIMEOUT_S = 2      # memccapable -t: per socket read/write

_RESULT_RE = re.compile(
    r"^(?P<name>(?:binary|ascii) [a-z]+(?: noreply)?) +(?P<detail>.*?)\[(?P<status>pass|FAIL|skip)\]",
    re.M | re.S,
)


@dataclass
class MemcapableRun:
    port: int
    returncode: Optional[int]          # None: killed after RUN_TIMEOUT_S
    output: str
    results: Dict[str, Tuple[str, str]] = field(default_factory=dict)  # name -> (status, detail)

    def summary(self) -> str:
        lines = []
        for name in BINARY_TESTS:
            status, detail = self.results.get(name, ("not run", ""))
            lines.append(f"  {name:<20} {status}{'  ' + detail if detail else ''}")
        extra = sorted(set(self.results) - set(BINARY_TESTS))
        if extra:
            lines.append(f"  unexpected tests in output: {extra}")
        return "\n".join(lines)

    def failures(self) -> List[str]:
        return [n for n in BINARY_TESTS if self.results.get(n, ("not run",))[0] != "pass"]


def parse_output(text: str) -> Dict[str, Tuple[str, str]]:
    results = {}
    for m in _RESULT_RE.finditer(text):
        detail = " ".join(m.group("detail").split())
        results[m.group("name")] = (m.group("status"), detail)
    return results


def run_memccapable(port: int, host: str = HOST, test: Optional[str] = None) -> MemcapableRun:
    if MEMCCAPABLE is None:
        pytest.fail("memccapable not found: run scripts/install-test-deps "
                    "(Debian package libmemcached-tools)", pytrace=False)
    cmd = [MEMCCAPABLE, "-h", host, "-p", str(port), "-b", "-v", "-t", str(IO_TIMEOUT_S)]
    if test:
        cmd += ["-T", test]
    if shutil.which("stdbuf"):
        cmd = ["stdbuf", "-o0", "-e0"] + cmd
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
        rc: Optional[int] = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=10)
        rc = None
    text = out.decode("utf-8", "replace")
    return MemcapableRun(port=port, returncode=rc, output=text, results=parse_output(text))


def assert_all_passed(run: MemcapableRun, against: str) -> None:
    failed = run.failures()
    ok = (not failed and set(run.results) == set(BINARY_TESTS) and run.returncode == 0
          and "All tests passed" in run.output)
    if not ok:
        pytest.fail(
            f"memccapable -b against {against} (port {run.port}): "
            f"exit code {run.returncode if run.returncode is not None else 'TIMEOUT'}; "
            f"failed/not run: {failed or 'none'}\n"
            f"{run.summary()}\n--- raw output ---\n{run.output}",
            pytrace=False)


# ------------------------------------------------------------------ guard

@pytest.fixture(scope="module")
def real_memcached(tmp_path_factory):
    """The Debian memcached 1.6 on a free loopback port (reference server)."""
    exe = shutil.which("memcached")
    if exe is None:
        pytest.fail("memcached not found: run scripts/install-test-deps", pytrace=False)
    port = free_ports(1)[0]
    log = tmp_path_factory.mktemp("memcached") / "memcached.log"
    cmd = [exe, "-l", HOST, "-p", str(port), "-U", "0", "-m", "64", "-t", "1"]
    if os.geteuid() == 0:
        cmd += ["-u", "root"]  # memcached refuses to run as root without -u
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        wait_for_port(port, 10, proc)
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def test_guard_memccapable_against_real_memcached(real_memcached):
    """The harness itself works: memcached 1.6 passes every binary test and we parse all 27."""
    run = run_memccapable(real_memcached)
    assert_all_passed(run, "memcached 1.6 (reference)")


def test_guard_parser_sees_failures():
    """The parser attributes a [FAIL] (and its -v detail) to the right test."""
    sample = (
        "binary noop                             [pass]\n"
        "binary set                              \n"
        "memcapable.cc:478: rsp->plain.message.header.response.cas\n"
        "[FAIL]\n"
        "binary setq                             [pass]\n"
        "1 of 3 tests failed\n"
    )
    res = parse_output(sample)
    assert res["binary noop"] == ("pass", "")
    assert res["binary set"] == ("FAIL", "memcapable.cc:478: rsp->plain.message.header.response.cas")
    assert res["binary setq"] == ("pass", "")


# ------------------------------------------------------------------ sluice

@pytest.fixture(scope="module", params=["couchbase", "ephemeral"])
def sluice_memccapable(request, sluice_module_factory):
    """A fresh server per bucket type and the result of one full memccapable -b run on it."""
    srv = sluice_module_factory(bucket_type=request.param, memcached=True)
    assert srv.memcached_port
    run = run_memccapable(srv.memcached_port)
    yield srv, run
    srv.cleanup()  # free it before the next bucket type's server starts


@pytest.mark.parametrize("name", BINARY_TESTS)
def test_sluice_memccapable(sluice_memccapable, name):
    srv, run = sluice_memccapable
    status, detail = run.results.get(name, ("not run", ""))
    if status != "pass":
        pytest.fail(
            f"memccapable '{name}' against sluice ({srv.bucket_type} bucket, memcached port "
            f"{srv.memcached_port}): {status}\n  failed check(s): {detail or '-'}\n"
            f"  all failed/not run in this run: {run.failures()}\n"
            f"  (full memccapable output: see test_sluice_memccapable_exit_status)",
            pytrace=False)


def test_sluice_memccapable_exit_status(sluice_memccapable):
    srv, run = sluice_memccapable
    assert_all_passed(run, f"sluice ({srv.bucket_type} bucket)")
    assert srv.is_running(), f"sluice exited during memccapable (code {srv.returncode})"


def test_sluice_memccapable_second_run(sluice_memccapable):
    """Re-running on the same server passes too: needs FLUSH to really empty the
    store (the incr/decr tests expect their keys to be absent)."""
    srv, _ = sluice_memccapable
    run = run_memccapable(srv.memcached_port)
    assert_all_passed(run, f"sluice ({srv.bucket_type} bucket), second run")
