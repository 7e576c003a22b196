"""Smoke test of `sluice bench clients --quick` (issue 5's seed 002 scenario): two small cases
(1 and 3 servers), each a fresh cluster; every user is a fresh smart client that connects and
makes one request, a write phase then a read phase over the same keys.

Checks structure and sanity only (tables present, counts exact, no errors, figures ordered,
the nodes saw the users' connections), never timings.
"""

import json

import pytest

from conftest import assert_charts, run_bench
from test_cluster_up import free_base

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench-clients")
    data = tmp_path_factory.mktemp("bench-clients-data")
    run_bench("clients", "--quick", "--out", str(out), "--data-dir", str(data),
              "--base-port", str(free_base()))
    return out


def test_report_has_the_seeds_jmeter_tables(quick_run):
    md = (quick_run / "report.md").read_text()
    for needle in [
        "## Test case 1: (50 users, 1 server, 1 s ramp-up)",
        "## Test case 2: (100 users, 3 servers, 2 s ramp-up)",
        "### Write", "### Read", "### Where the time goes",
        "| sampler_label | count | average | min | max | error% | Throughput/sec |",
        "| TOTAL | 50 |", "| TOTAL | 100 |",
    ]:
        assert needle in md, needle


def test_every_user_succeeded_and_the_figures_are_sane(quick_run):
    doc = json.loads((quick_run / "results.json").read_text())
    assert doc["scenario"] == "clients"
    assert "password" not in doc["settings"]
    cases = doc["cases"]
    assert [(c["case"]["users"], c["case"]["servers"]) for c in cases] == [(50, 1), (100, 3)]
    for c in cases:
        assert c["nodes"] == c["case"]["servers"]
        for phase in ("write", "read"):
            p = c[phase]
            where = f'{c["case"]} {phase}'
            assert p["count"] == c["case"]["users"] and p["errors"] == 0, (where, p["first_error"])
            assert 0 < p["min_ms"] <= p["median_ms"] <= p["p90_ms"] <= p["p99_ms"] <= p["max_ms"], where
            assert p["min_ms"] <= p["avg_ms"] <= p["max_ms"], where
            # A sample is bootstrap + request.
            assert p["bootstrap_avg_ms"] > 0 and p["request_avg_ms"] > 0, where
            assert p["bootstrap_avg_ms"] + p["request_avg_ms"] == pytest.approx(p["avg_ms"], rel=0.05), where
            # Throughput as JMeter counts it: users over the span, which the ramp-up bounds.
            ramp = c["case"]["ramp_s"]
            assert 0 < p["throughput_per_s"] <= p["count"] / (ramp * (p["count"] - 1) / p["count"]), where
            # Each user opened at least its bootstrap connection on some node.
            assert p["connections_opened"] >= p["count"], where
            assert p["server_cpu_s"] > 0 and p["bench_cpu_s"] > 0, where


def test_charts_are_drawn(quick_run):
    assert_charts(quick_run, ["clients-sample-time.png"])
