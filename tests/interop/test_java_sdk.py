"""The Couchbase Java SDK 3.12.2 (com.couchbase.client:java-client, from Maven Central)
against Sluice: `java_sdk/` is a Maven project whose one program makes the document-API
calls an application makes (lookup_in, mutate_in with xattrs and a macro, get with expiry
and projection, get_and_lock / unlock and a write refused meanwhile, get_and_touch,
exists, binary counters with an initial value, append / prepend, and a created scope and
collections: documents in them, the same key in two, a drop that removes one's documents)
and fails at the first that does not behave as Couchbase documents it. scripts/install-test-deps builds its jar.
Run once per bucket type, on one node, and once on `sluice cluster up` (3 nodes, 1 replica).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import BUCKET, PASSWORD, USERNAME
from sdk_node import sdk_server  # noqa: F401 (fixture)

JAR = Path(__file__).parent / "java_sdk" / "target" / "java-sdk-interop.jar"

pytestmark = pytest.mark.timeout(300)


def run_java(connstr: str) -> str:
    if not JAR.exists():
        pytest.fail(f"{JAR} is missing: run scripts/install-test-deps (it builds it with Maven)")
    p = subprocess.run(["java", "-jar", str(JAR), connstr, USERNAME, PASSWORD, BUCKET],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0 and "all ok" in p.stdout, (
        f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr (tail):\n{p.stderr[-4000:]}")
    return p.stdout


def test_java_sdk_document_api(sdk_server):
    out = run_java(sdk_server.connstr)
    for name in ["lookup_in", "mutate_in", "mutate_in_failures", "xattrs_and_macros",
                 "get_with_expiry_and_projection", "lock", "get_and_touch_and_exists",
                 "binary", "collections"]:
        assert f"ok {name}\n" in out, out


def test_java_sdk_on_a_three_node_cluster(tmp_path):
    from test_cluster_up import cluster_up, free_base, stop, wait_up

    base = free_base()
    proc = cluster_up(tmp_path, base)
    try:
        wait_up(proc, tmp_path)
        run_java(f"couchbase://127.0.0.1:{base}")
    finally:
        stop(proc)
