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

from conftest import sluice_binary

pytestmark = pytest.mark.timeout(240)

VALUE_BYTES = 524
KEY_BYTES = 32


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    if shutil.which("memcached") is None:
        pytest.fail("memcached missing: scripts/install-test-deps installs it")
    out = tmp_path_factory.mktemp("bench-footprint")
    proc = subprocess.run(
        [str(sluice_binary()), "bench", "footprint", "--quick", "--vs", "memcached",
         "--out", str(out)],
        capture_output=True, text=True, timeout=200)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
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
