"""Smoke test of `sluice bench footprint --quick --vs memcached` (issue 5's seed 003 scenario):
every row (in process and over local sockets, ephemeral and couchbase, 64 MiB and 2 GiB
quotas) plus memcached's socket rows with the same memory limits.

Checks structure and sanity only (every row present, no errors or misses, figures non-zero,
memory per item at least the key and value it stores), never timings.
"""

import json
import shutil
import subprocess

import pytest

from conftest import assert_charts, run_bench, sluice_binary

pytestmark = pytest.mark.timeout(240)

VALUE_BYTES = 524
KEY_BYTES = 32


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    if shutil.which("memcached") is None:
        pytest.fail("memcached missing: scripts/install-test-deps installs it")
    out = tmp_path_factory.mktemp("bench-footprint")
    run_bench("footprint", "--quick", "--vs", "memcached", "--out", str(out))
    return out


def test_report_has_every_row_the_ratios_and_the_seed(quick_run):
    md = (quick_run / "report.md").read_text()
    for needle in [
        "| path | bucket | quota | update ops/s | GET ops/s |",
        "| in process | ephemeral (in memory) | 64 MiB |",
        "| local sockets | couchbase (durable) | 2048 MiB |",
        "| local sockets | memcached | 64 MiB |",
        "## Against memcached, same memory limit",
        "## Seed 003, as published",
    ]:
        assert needle in md, needle


def test_rows_are_sane(quick_run):
    doc = json.loads((quick_run / "results.json").read_text())
    assert doc["scenario"] == "footprint"
    rows = doc["rows"]
    # 2 paths × 2 buckets × 2 quotas, and memcached at both quotas.
    assert len(rows) == 10
    for r in rows:
        where = f'{r["target"]} {r["mode"]} {r["bucket_type"]} {r["quota_mb"]} MiB'
        assert r["items"] == 10_000, where
        assert r["update_ops_per_s"] > 0 and r["get_ops_per_s"] > 0, where
        assert r["runs"]["errors"] == 0 and r["runs"]["get_misses"] == 0, where
        # Whatever the server counts, an item costs at least its key and value, unless
        # values were evicted (a couchbase bucket under a small quota keeps keys only).
        floor = KEY_BYTES if r["bucket_type"] == "couchbase" else KEY_BYTES + VALUE_BYTES
        assert r["engine_bytes_per_item"] >= floor, where
        assert r["rss_bytes_per_item"] >= 0, where
        if r["mode"] == "sockets":
            assert all(p > 0 for p in r["runs"]["update_p99_us"] + r["runs"]["get_p99_us"]), where


def test_charts_are_drawn(quick_run):
    assert_charts(quick_run, ["footprint-ops-in-process.png", "footprint-ops-sockets.png",
                              "footprint-bytes-per-item.png"])


def test_a_run_is_repeated_from_its_saved_configuration(tmp_path):
    """`sluice bench rerun DIR` runs the scenario again with DIR/config.json's options (here a
    one-row in-process footprint run), into DIR-rerun1, and never saves the password."""
    first = tmp_path / "fp"
    args = ["--modes", "in-process", "--bucket-types", "ephemeral", "--quotas-mb", "64",
            "--items", "3000", "--vbuckets", "64", "--duration-s", "1", "--warmup-s", "1"]
    run_bench("footprint", *args, "--out", str(first), "--password", "not-saved-anywhere",
              timeout=120)
    config = json.loads((first / "config.json").read_text())
    assert config["scenario"] == "footprint"
    assert config["args"]["items"] == 3000 and config["args"]["duration_s"] == 1
    assert "not-saved-anywhere" not in (first / "config.json").read_text()
    assert "not-saved-anywhere" not in (first / "results.json").read_text()

    run_bench("rerun", str(first), timeout=120)
    again = tmp_path / "fp-rerun1"
    rows = json.loads((again / "results.json").read_text())["rows"]
    assert [(r["mode"], r["bucket_type"], r["quota_mb"], r["items"]) for r in rows] == \
        [("in-process", "ephemeral", 64, 3000)]
    assert rows[0]["update_ops_per_s"] > 0 and rows[0]["runs"]["errors"] == 0
    # The rerun saved the same options again (pointing at its own directory).
    config2 = json.loads((again / "config.json").read_text())
    assert config2["scenario"] == "footprint"
    assert {k: v for k, v in config2["args"].items() if k != "out"} == \
        {k: v for k, v in config["args"].items() if k != "out"}

    missing = subprocess.run([str(sluice_binary()), "bench", "rerun", str(tmp_path / "nope")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode != 0 and "config.json" in missing.stderr
