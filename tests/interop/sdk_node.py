"""Fixtures shared by the Python SDK modules that need one node per bucket type and its
default collection (import them into a test module to use them)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from couchbase.auth import PasswordAuthenticator
from couchbase.cluster import Cluster
from couchbase.options import ClusterOptions, ClusterTimeoutOptions

from conftest import BUCKET, PASSWORD, USERNAME


@pytest.fixture(scope="module", params=["couchbase", "ephemeral"])
def sdk_server(request, sluice_module_factory):
    """One node with bucket `default` of each type in turn."""
    srv = sluice_module_factory(bucket_type=request.param, memcached=False)
    yield srv
    srv.cleanup()


def connect(connstr: str) -> Cluster:
    """An SDK cluster object for `connstr` (short timeouts)."""
    opts = ClusterOptions(
        PasswordAuthenticator(USERNAME, PASSWORD),
        timeout_options=ClusterTimeoutOptions(bootstrap_timeout=timedelta(seconds=10),
                                              kv_timeout=timedelta(seconds=3),
                                              kv_durable_timeout=timedelta(seconds=5)),
        enable_dns_srv=False)
    return Cluster(connstr, opts)


@pytest.fixture(scope="module")
def sdk_cluster(sdk_server):
    """`sdk_server` through the SDK."""
    cluster = connect(sdk_server.connstr)
    yield cluster
    cluster.close()


@pytest.fixture(scope="module")
def collection(sdk_cluster):
    """The default collection of `sdk_server`, through the SDK (short timeouts)."""
    return sdk_cluster.bucket(BUCKET).default_collection()
