"""Smoke test of `sluice bench query --quick --no-pg` (issue 26): the bench loads documents,
builds its two indexes through the query service, runs every query phase (point, range,
bounded range, request_plus under writes) and the index-freshness phase, and reports them.

CI has no PostgreSQL (`--no-pg`); the PostgreSQL side runs where one is installed
(`--pg-bin`). Checks structure and sanity only (every phase and rate present, no errors or
timeouts, figures non-zero), never timings.
"""

import json

import pytest

from conftest import run_bench

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
