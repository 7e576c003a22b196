"""Users and roles through the Python SDK (couchbase 4.x from PyPI): the SDK's own user
manager creates a data_reader, who can then read documents and cannot write them, and a user
without a role on the bucket cannot open it. The SDK reaches the admin port the cluster map
lists as `mgmt`, as the administrator (HTTP Basic)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from couchbase.auth import PasswordAuthenticator
from couchbase.cluster import Cluster
from couchbase.exceptions import AuthenticationException, CouchbaseException
from couchbase.management.users import Role, User
from couchbase.options import ClusterOptions, ClusterTimeoutOptions

from conftest import BUCKET, PASSWORD, USERNAME

pytestmark = pytest.mark.timeout(120)


def connect(connstr: str, user: str, password: str) -> Cluster:
    opts = ClusterOptions(
        PasswordAuthenticator(user, password),
        timeout_options=ClusterTimeoutOptions(
            bootstrap_timeout=timedelta(seconds=10), connect_timeout=timedelta(seconds=5),
            kv_timeout=timedelta(seconds=3), management_timeout=timedelta(seconds=10)),
        enable_dns_srv=False)
    return Cluster(connstr, opts)


@pytest.fixture(scope="module")
def server(sluice_module_factory):
    srv = sluice_module_factory(bucket_type="couchbase", memcached=False)
    yield srv
    srv.cleanup()


def test_the_sdk_user_manager_makes_a_reader_who_cannot_write(server):
    admin = connect(server.connstr, USERNAME, PASSWORD)
    try:
        admin.bucket(BUCKET).default_collection().upsert("doc", {"v": 1})
        users = admin.users()
        users.upsert_user(User(username="reader", password="reader-pw",
                               roles=[Role(name="data_reader", bucket=BUCKET)]))
        users.upsert_user(User(username="outsider", password="outsider-pw",
                               roles=[Role(name="data_reader", bucket="other")]))
        listed = {u.user.username: u for u in users.get_all_users()}
        assert set(listed) == {"reader", "outsider"}, listed
        got = users.get_user("reader").user
        assert [(r.name, r.bucket) for r in got.roles] == [("data_reader", BUCKET)]
    finally:
        admin.close()

    reader = connect(server.connstr, "reader", "reader-pw")
    try:
        coll = reader.bucket(BUCKET).default_collection()
        assert coll.get("doc").content_as[dict] == {"v": 1}
        # EACCESS (0x24 = 36), which the SDK raises as AuthenticationException.
        with pytest.raises(AuthenticationException) as refused:
            coll.upsert("doc", {"v": 2})
        assert "'status_code': 36" in repr(refused.value), repr(refused.value)
    finally:
        reader.close()
    admin = connect(server.connstr, USERNAME, PASSWORD)
    try:
        assert admin.bucket(BUCKET).default_collection().get("doc").content_as[dict] == {"v": 1}
    finally:
        admin.close()

    with pytest.raises(CouchbaseException):
        outsider = connect(server.connstr, "outsider", "outsider-pw")
        try:
            outsider.bucket(BUCKET).default_collection().get("doc")
        finally:
            outsider.close()
