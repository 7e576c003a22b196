"""Smoke test of `sluice bench replication --quick --vs redis` (issue 4's replication benchmark,
issue 5's scenario): it starts its own 2-node cluster and a Redis primary + replica, climbs a
short rate ladder on each, and writes report.md and results.json.

Checks structure and sanity only (figures present, non-zero, percentiles ordered, no lost
samples), never timings: this machine is shared and noisy, and benchmarks live in
docs/benchmarks.md.
"""

import json
import shutil
import subprocess

import pytest

from conftest import sluice_binary
from test_cluster_up import free_base

pytestmark = pytest.mark.timeout(240)

SECTIONS = [
    "## Highest set rate meeting each line",
    "## Replication latency, p80 / p95 / p99",
    "## Replication items remaining, avg / max",
    "## Replication bytes/s, MB/s avg / max / min",
    "## Load held",
]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server missing: scripts/install-test-deps installs it")
    out = tmp_path_factory.mktemp("bench-repl")
    data = tmp_path_factory.mktemp("bench-repl-data")
    proc = subprocess.run(
        [str(sluice_binary()), "bench", "replication", "--quick", "--vs", "redis",
         "--redis-persistence", "none,aof", "--out", str(out), "--data-dir", str(data),
         "--base-port", str(free_base())],
        capture_output=True, text=True, timeout=200)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    return out, proc


def test_report_has_every_table_with_a_column_per_target(quick_run):
    out, _ = quick_run
    md = (out / "report.md").read_text()
    for s in SECTIONS:
        assert s in md, s
    for target in ("sluice", "redis (no persistence)", "redis (AOF everysec)"):
        assert f"| {target} |" in md or f" {target} |" in md, target
    # The quick ladder: 2,000 and 10,000 sets/s.
    assert "| 2,000 |" in md


def test_results_are_sane(quick_run):
    out, _ = quick_run
    doc = json.loads((out / "results.json").read_text())
    assert doc["scenario"] == "replication"
    assert "password" not in doc["args"]
    steps = doc["steps"]
    assert {s["target"] for s in steps} == set(doc["targets"])
    assert len(doc["targets"]) == 3
    for s in steps:
        where = f'{s["target"]} at {s["rate"]}/s'
        assert s["achieved_per_s"] > 0, where
        assert s["set_errors"] == 0, where
        lat = s["repl_latency"]
        assert lat["samples"] > 50, where
        assert lat["timeouts"] == 0 and lat["errors"] == 0, where
        assert 0 < lat["p50_us"] <= lat["p80_us"] <= lat["p95_us"] <= lat["p99_us"] <= lat["max_us"], where
        assert lat["polls_per_sample"] >= 1, where
        lag = s["lag"]
        assert lag["samples"] >= 10, where
        assert 0 <= lag["items_remaining_avg"] <= lag["items_remaining_max"], where
        assert 0 < lag["bytes_mb_per_s_min"] <= lag["bytes_mb_per_s_avg"] <= lag["bytes_mb_per_s_max"], where
        # Every set carries a 1 KiB value: the stream moves at least rate × 1 KiB per second.
        assert lag["bytes_mb_per_s_avg"] * 1e6 >= 0.8 * s["achieved_per_s"] * 1024, where
        if s["target"] == "sluice":
            assert lag["producer_remaining_avg"] is not None, where
        else:
            assert 1024 < s["stream_bytes_per_set"] < 1200, where
    for h in doc["highest"]:
        assert h["sustained"] is not None, h


def test_stdout_prints_the_summary(quick_run):
    _, proc = quick_run
    assert "highest rate held" in proc.stdout
    assert "replication latency p80 / p95 / p99" in proc.stdout
