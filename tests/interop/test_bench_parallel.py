"""Smoke test of `sluice bench parallel --quick` (issue 5's seed 004 scenario): 4 and 8 clients
× 1 and 2 nodes, each client building (create, read, update, delete) a small tree of
documents through its own smart client.

Checks structure and sanity only (the seed's table, no errors, every operation counted by the
nodes, CPU per node present), never timings.
"""

import json

import pytest

from conftest import assert_charts, run_bench
from test_cluster_up import free_base

pytestmark = pytest.mark.timeout(240)

FILES = 500
# Per file: create; read, create, update; read; delete × 2. Per directory of 16: create,
# update, delete. The image: create, delete.
OPS_PER_CLIENT = FILES * 7 + 3 * ((FILES + 15) // 16) + 2


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench-parallel")
    data = tmp_path_factory.mktemp("bench-parallel-data")
    run_bench("parallel", "--quick", "--out", str(out), "--data-dir", str(data),
              "--base-port", str(free_base()))
    return out


def test_report_has_the_seeds_table_and_ours(quick_run):
    md = (quick_run / "report.md").read_text()
    for needle in [
        "| # of clients | # of nodes | Time (s) | Average Sum of Client Latency (s) |",
        "| RAM/Cores | # of Clients | # of MDSs | Time | Average Sum of Client Latency |",
        "## Operations: what the clients asked, what the nodes counted",
    ]:
        assert needle in md, needle


def test_every_build_completed_and_the_nodes_counted_it(quick_run):
    doc = json.loads((quick_run / "results.json").read_text())
    assert doc["scenario"] == "parallel"
    cells = doc["medians"]
    assert sorted((c["clients"], c["nodes"]) for c in cells) == [(4, 1), (4, 2), (8, 1), (8, 2)]
    for c in cells:
        where = f'{c["clients"]} clients on {c["nodes"]} node(s)'
        assert c["errors"] == 0, (where, c["first_error"])
        assert c["ops"] == c["clients"] * OPS_PER_CLIENT, where
        assert c["time_s"] > 0 and c["ops_per_s"] > 0, where
        # No client can spend longer waiting for answers than the whole cell took.
        assert 0 < c["avg_latency_sum_s"] <= c["time_s"] * 1.01, where
        assert 0 < c["op_p50_us"] <= c["op_p99_us"] <= c["op_max_us"], where
        assert len(c["node_cpu_pct"]) == c["nodes"], where
        assert all(p > 0 for p in c["node_cpu_pct"]), where
        # Updates are a get and a set; the nodes saw every request (replica writes are not
        # front-end sets).
        files, dirs = FILES * c["clients"], ((FILES + 15) // 16) * c["clients"]
        assert c["node_gets"] == 2 * files + files + dirs, where
        assert c["node_sets"] == files + files + files + dirs + dirs + c["clients"], where
        assert c["node_deletes"] == 2 * files + dirs + c["clients"], where


def test_charts_are_drawn(quick_run):
    assert_charts(quick_run, ["parallel-time.png", "parallel-latency-sum.png"])
