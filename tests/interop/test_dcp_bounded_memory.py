"""Seed 001's failure, reversed: many consumers backfilling a bucket larger than its quota,
while writes go on, must not grow the server's memory without bound or stall the writes.

Ten gocbcore DCP clients (the interop `dcpstream` program) stream every vbucket from seqno 0
while `sluice bench kv` writes at a fixed rate. The server's resident set is sampled all the
while and must stay under

    quota + 10 x backfill buffer (20 MiB) + BASELINE_ALLOWANCE

where BASELINE_ALLOWANCE is what the same process holds outside the bucket's accounting:
the storage engine's block cache and memtables (sized from the quota), thread stacks, the
binary, and allocator slack (documented in docs/benchmarks.md with the measured figures).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import PASSWORD, USERNAME, sluice_binary
from test_dcp_gocbcore import dcpstream_binary

QUOTA_MB = 64
CONSUMERS = 10
BACKFILL_BUFFER_MB = 20
BASELINE_ALLOWANCE_MB = int(os.environ.get("SLUICE_RSS_ALLOWANCE_MB", "200"))
KEYS = 150_000
VALUE_BYTES = 1024
WRITE_RATE = 2000
WRITE_SECONDS = 40


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


class Sampler(threading.Thread):
    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid = pid
        self.samples: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.samples.append(rss_mb(self.pid))
            except (OSError, RuntimeError):
                return
            time.sleep(0.1)


def bench(port: int, out: Path, *, rate: int, duration_s: int) -> subprocess.Popen:
    return subprocess.Popen(
        [str(sluice_binary()), "bench", "kv", "--connect", f"127.0.0.1:{port}",
         "--keys", str(KEYS), "--value-bytes", str(VALUE_BYTES), "--get-ratio", "0",
         "--connections", "8", "--rate", str(rate), "--duration-s", str(duration_s),
         "--warmup-s", "0", "--out", str(out), "--log", "warn"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.timeout(900)
def test_ten_consumers_backfilling_a_bucket_larger_than_memory(sluice_factory, tmp_path):
    srv = sluice_factory(bucket_type="couchbase", memory_quota_mb=QUOTA_MB)
    # Fill: 150k x 1 KiB is more than twice the quota (the bench prefills its key space).
    fill = bench(srv.kv_port, tmp_path / "fill", rate=0, duration_s=1)
    out, _ = fill.communicate(timeout=600)
    assert fill.returncode == 0, out
    time.sleep(2)
    baseline = rss_mb(srv.pid)

    sampler = Sampler(srv.pid)
    sampler.start()
    writer = bench(srv.kv_port, tmp_path / "load", rate=WRITE_RATE, duration_s=WRITE_SECONDS)
    consumers = []
    for i in range(CONSUMERS):
        d = tmp_path / f"c{i}"
        d.mkdir()
        consumers.append(subprocess.Popen(
            [str(dcpstream_binary()), "--addr", f"127.0.0.1:{srv.kv_port}",
             "--user", USERNAME, "--password", PASSWORD, "--name", f"bounded-{i}",
             "--state", str(d / "state.json"), "--events", os.devnull,
             "--timeout", "600"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    for p in consumers:
        o, e = p.communicate(timeout=700)
        results.append((p.returncode, o, e[-2000:]))
    wout, _ = writer.communicate(timeout=300)
    sampler.stop.set()
    sampler.join()

    for code, o, e in results:
        assert code == 0, f"consumer failed ({code}): {o}\n{e}"
        summary = json.loads(o.strip().splitlines()[-1])
        assert summary["items"] >= KEYS * 0.9, summary
    assert writer.returncode == 0, wout
    load = json.loads((tmp_path / "load" / "results.json").read_text())["targets"][0]["runs"][0]
    peak = max(sampler.samples)
    bound = QUOTA_MB + CONSUMERS * BACKFILL_BUFFER_MB + BASELINE_ALLOWANCE_MB
    report = {"baseline_rss_mb": round(baseline, 1), "peak_rss_mb": round(peak, 1),
              "bound_mb": bound, "samples": len(sampler.samples),
              "write_ops_per_s": round(load["ops_per_s"]), "write_errors": load["errors"],
              "write_p99_us": load["latency"]["p99_us"]}
    print(json.dumps(report, indent=1)[:3000])
    assert peak <= bound, report
    # The write load kept its rate while ten backfills ran, with (almost) no refusals.
    assert load["ops_per_s"] >= 0.9 * WRITE_RATE, report
    assert load["errors"] <= 0.01 * load["ops"], report
