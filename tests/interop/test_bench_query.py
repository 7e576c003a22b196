"""Smoke test of `sluice bench query --quick --no-pg` (issue 26): the bench loads documents,
builds its two indexes through the query service, runs every query phase (point, range,
bounded range, request_plus under writes) and the index-freshness phase, and reports them.

CI has no PostgreSQL (`--no-pg`); the PostgreSQL side runs where one is installed
(`--pg-bin`). Checks structure and sanity only (every phase and rate present, no errors or
timeouts, figures non-zero), never timings.
"""

import json
import os
import signal
import subprocess
import time

import pytest

from conftest import run_bench, sluice_binary

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench-query")
    run_bench("query", "--quick", "--no-pg", "--out", str(out), timeout=280)
    return out


def test_every_phase_ran_without_errors(quick_run):
    doc = json.loads((quick_run / "results.json").read_text())
    assert doc["scenario"] == "query"
    assert doc["args"]["no_pg"] is True and doc["args"]["quick"] is True
    phases = {p["phase"]: p for p in doc["phases"]}
    assert set(phases) == {"point", "range", "bounded", "point-under-writes"}
    for name, p in phases.items():
        assert p["system"] == "sluice", name
        assert p["errors"] == 0, (name, p["first_error"])
        assert p["qps"] > 0 and p["latency"]["count"] > 0, name
    # The request_plus phase ran under its writer, and the writer failed nothing.
    under = phases["point-under-writes"]
    assert under["writes_per_s"] > 0 and under["write_errors"] == 0


def test_indexes_were_built_and_freshness_was_sampled(quick_run):
    doc = json.loads((quick_run / "results.json").read_text())
    (setup,) = doc["setup"]
    assert setup["system"] == "sluice"
    assert [name for name, _ in setup["indexes"]] == ["ix_email", "ix_k"]
    assert all(secs > 0 for _, secs in setup["indexes"])
    rates = {f["target_writes_per_s"]: f for f in doc["freshness"]}
    assert set(rates) == set(doc["args"]["freshness_rates"])
    for rate, f in rates.items():
        assert f["errors"] == 0 and f["timeouts"] == 0, (rate, f["first_error"])
        assert f["samples"] >= doc["args"]["freshness_samples"], rate
        assert f["lag"]["p50_us"] > 0, rate


def test_report_has_its_tables_and_says_what_it_ran(quick_run):
    md = (quick_run / "report.md").read_text()
    for needle in [
        "# sluice bench query",
        "| phase | system | queries/s | p50 | p99 | errors | writes/s |",
        "| point lookup (email) | Sluice |",
        "| point, request_plus, under writes | Sluice |",
        "## Index freshness (Sluice)",
        "## Setup",
        "index memory quota",
    ]:
        assert needle in md, needle


def _children(pid: int) -> list:
    """Pids whose parent is `pid` (from /proc)."""
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read()
        except OSError:
            continue
        # The command sits in parentheses and may hold spaces; the ppid comes after it.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            kids.append(int(entry))
    return kids


def _alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_bench_stops_the_server_it_started(tmp_path, sig):
    bench = subprocess.Popen(
        [str(sluice_binary()), "bench", "query", "--quick", "--no-pg", "--out", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        # Its server is up once the documents load.
        deadline = time.monotonic() + 60
        servers = []
        while time.monotonic() < deadline and not servers:
            servers = [p for p in _children(bench.pid)
                       if b"server" in open(f"/proc/{p}/cmdline", "rb").read()]
            time.sleep(0.2)
        assert servers, "the bench started no server"
        time.sleep(1)
        bench.send_signal(sig)
        _, err = bench.communicate(timeout=60)
        assert bench.returncode != 0
        assert b"interrupted" in err, err[-2000:]
        for p in servers:
            assert not _alive(p), f"server {p} outlived the interrupted bench"
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
