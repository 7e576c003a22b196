"""Smoke test of `sluice bench replication --quick --vs redis` (issue 4's replication benchmark,
issue 5's scenario): it starts its own 2-node cluster and a Redis primary + replica, climbs a
short rate ladder on each (on Sluice twice: replication only, then with one real index
(`views`: defined through the query service, fed by DCP, queried during the ladder), XDCR
to a second local cluster the bench starts, and two external DCP clients reading beside
it), and writes report.md, results.json and the charts.

Checks structure and sanity only (figures present, non-zero, percentiles ordered, no lost
samples), never timings: this machine is shared and noisy, and benchmarks live in
docs/benchmarks.md.
"""

import json
import shutil

import pytest

from conftest import assert_charts, run_bench
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
    proc = run_bench("replication", "--quick", "--vs", "redis",
                     "--redis-persistence", "none,aof", "--out", str(out), "--data-dir", str(data),
                     "--base-port", str(free_base()),
                     "--columns", "replication,views+xdcr+clients:2")
    return out, proc


def test_report_has_every_table_with_a_column_per_target(quick_run):
    out, _ = quick_run
    md = (out / "report.md").read_text()
    for s in SECTIONS:
        assert s in md, s
    for target in ("sluice", "sluice + 1 index + XDCR + 2 DCP clients",
                   "redis (no persistence)", "redis (AOF everysec)"):
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
    assert len(doc["targets"]) == 4
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
        if s["target"].startswith("sluice"):
            assert lag["producer_remaining_avg"] is not None, where
            assert 0 < s["resident_pct"] <= 100, where
        else:
            assert 1024 < s["stream_bytes_per_set"] < 1200, where
    for h in doc["highest"]:
        assert h["sustained"] is not None, h


def test_the_column_readers_read(quick_run):
    out, _ = quick_run
    doc = json.loads((out / "results.json").read_text())
    [column] = doc["readers"]
    assert column["target"] == "sluice + 1 index + XDCR + 2 DCP clients"
    kinds = {r["kind"]: r for r in column["readers"]}
    assert set(kinds) == {"DCP clients"}
    for r in kinds.values():
        assert r["errors"] == 0, r
    # Each client one connection per node (2 nodes).
    assert kinds["DCP clients"]["connections"] == 4
    # The XDCR column's real replication to a second cluster: the initial copy wrote every
    # prefilled document (20,000 in --quick) to the 1-node target.
    x = column["xdcr"]
    assert (x["target_nodes"], x["target_replicas"]) == (1, 0), x
    assert x["initial_docs"] >= 20_000 and x["initial_s"] > 0, x
    assert x["replication"].endswith("/default/default"), x
    # Every step of the column: the documents written during its measured part crossed.
    steps = [s for s in doc["steps"] if s["target"] == column["target"]]
    assert len(steps) == 2
    for s in steps:
        w = s["xdcr"]
        where = f'{s["rate"]}/s: {w}'
        # The load overwrites the prefilled keys: each set is one document for XDCR, less
        # what the pipeline deduplicated (several sets of one key in one batch).
        assert 0.5 * s["achieved_per_s"] <= w["docs_per_s"] <= 1.2 * s["achieved_per_s"], where
        # 1 KiB values: at least 1,000 bytes per document crossed.
        assert w["mb_per_s"] * 1e6 >= 1000 * w["docs_per_s"], where
        assert 0 < w["lag_p50_us"] <= w["lag_p99_us"] <= w["lag_max_us"], where
        assert w["drain_s"] >= 0, where
    assert all("xdcr" not in s for s in doc["steps"] if s["target"] != column["target"])
    # The views column's real index: built over the prefilled documents, then queried.
    ix = column["indexes"]
    assert ix["indexes"] == 1 and len(ix["build_s"]) == 1, ix
    assert ix["entries_built"][0] >= 20_000, ix
    assert ix["queries"] > 0 and ix["errors"] == 0, ix
    # Each client read every prefilled document from seqno 0 (20,000 in --quick).
    assert kinds["DCP clients"]["items"] >= 2 * 20_000
    md = (out / "report.md").read_text()
    assert "## What the columns' DCP readers did" in md
    assert "XDCR, the initial copy" in md and "XDCR lag p50 / p99 / max" in md


def test_charts_are_drawn(quick_run):
    out, _ = quick_run
    assert_charts(out, ["repl-latency-p99.png", "repl-items-remaining.png",
                        "repl-sluice-2000-latency.png", "repl-sluice-2000-items-remaining.png",
                        "repl-sluice-1-index-xdcr-2-dcp-clients-10000-latency.png"])


def test_stdout_prints_the_summary(quick_run):
    _, proc = quick_run
    assert "highest rate held" in proc.stdout
    assert "replication latency p80 / p95 / p99" in proc.stdout
