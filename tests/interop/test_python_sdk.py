"""Couchbase Python SDK 4.6.x (C++ core 1.3.x) against Sluice's KV port.

KV only: couchbase://127.0.0.1:<kv-port>, SCRAM auth as Administrator/password,
bucket "default", default collection. No wait_until_ready()/ping(): those use
the HTTP services. Timeouts are short so a broken server fails fast.
Set PYCBC_LOG_LEVEL=debug to see the SDK's own protocol log on stderr.
"""

from __future__ import annotations

import time
import uuid
import zlib
from datetime import timedelta

import pytest

from couchbase.auth import PasswordAuthenticator
from couchbase.cluster import Cluster
from couchbase.exceptions import (CasMismatchException, CouchbaseException,
                                  DocumentExistsException, DocumentNotFoundException)
from couchbase.options import (ClusterOptions, ClusterTimeoutOptions, GetOptions,
                               InsertOptions, ReplaceOptions, UpsertOptions)
from couchbase.transcoder import RawBinaryTranscoder, RawStringTranscoder

from conftest import BUCKET, HOST, PASSWORD, USERNAME, free_ports

pytestmark = pytest.mark.timeout(90)

BOOTSTRAP_TIMEOUT = timedelta(seconds=10)


def cluster_options(bootstrap: timedelta = BOOTSTRAP_TIMEOUT) -> ClusterOptions:
    return ClusterOptions(
        PasswordAuthenticator(USERNAME, PASSWORD),
        timeout_options=ClusterTimeoutOptions(
            bootstrap_timeout=bootstrap,
            connect_timeout=timedelta(seconds=5),
            resolve_timeout=timedelta(seconds=2),
            kv_timeout=timedelta(seconds=3),
            kv_durable_timeout=timedelta(seconds=5),
            management_timeout=timedelta(seconds=5),
        ),
        enable_dns_srv=False,
    )


def connect(connstr: str) -> Cluster:
    return Cluster(connstr, cluster_options())


def vbucket_of(key: str, num_vbuckets: int) -> int:
    """The client-side key -> vBucket hash (clients.md §0.6)."""
    return ((zlib.crc32(key.encode()) >> 16) & 0x7FFF) % num_vbuckets


def new_key(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# ------------------------------------------------------------------ guard (no server)

def test_sdk_closed_port_fails_fast():
    """Sanity of the harness: bootstrap against a closed port raises within its timeout."""
    port = free_ports(1)[0]
    start = time.monotonic()
    with pytest.raises(CouchbaseException):
        Cluster(f"couchbase://{HOST}:{port}", cluster_options(timedelta(seconds=3)))
    assert time.monotonic() - start < 15


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module", params=["couchbase", "ephemeral"])
def server(request, sluice_module_factory):
    srv = sluice_module_factory(bucket_type=request.param, memcached=False)
    yield srv
    srv.cleanup()


def _connect_or_fail(srv) -> Cluster:
    try:
        return connect(srv.connstr)
    except CouchbaseException as e:
        err = e
    # (outside the except block: no chained traceback; the server's stderr
    # tail is attached to the report by conftest)
    pytest.fail(f"SDK bootstrap (HELLO / SASL SCRAM-SHA512 / GET_CLUSTER_CONFIG) against "
                f"{srv!r} failed: {err!r}", pytrace=False)


@pytest.fixture(scope="module")
def cluster(server):
    c = _connect_or_fail(server)
    yield c
    c.close()


@pytest.fixture(scope="module")
def collection(cluster, server):
    try:
        return cluster.bucket(BUCKET).default_collection()
    except CouchbaseException as e:
        err = e
    pytest.fail(f"opening bucket {BUCKET!r} (SELECT_BUCKET / GET_CLUSTER_CONFIG) on {server!r} "
                f"failed: {err!r}", pytrace=False)


# ------------------------------------------------------------------ tests

def test_upsert_get_json(collection):
    key = new_key("json")
    doc = {"name": "sluice", "n": 42, "nested": {"list": [1, 2, 3], "ok": True}, "u": "héllo"}
    r = collection.upsert(key, doc)
    assert r.cas
    g = collection.get(key)
    assert g.content_as[dict] == doc
    assert g.cas == r.cas


def test_upsert_get_string(collection):
    key = new_key("str")
    value = "plain text, not JSON: ünïcode ✓"
    tc = RawStringTranscoder()
    r = collection.upsert(key, value, UpsertOptions(transcoder=tc))
    assert r.cas
    g = collection.get(key, GetOptions(transcoder=tc))
    assert g.value == value  # decoding also checks the stored flags (UTF-8 format)
    assert g.cas == r.cas


def test_upsert_get_bytes(collection):
    key = new_key("bin")
    value = bytes(range(256)) * 4 + b"\x00\xff"
    tc = RawBinaryTranscoder()
    r = collection.upsert(key, value, UpsertOptions(transcoder=tc))
    assert r.cas
    g = collection.get(key, GetOptions(transcoder=tc))
    assert g.value == value  # decoding also checks the stored flags (binary format)


def test_get_missing_raises(collection):
    with pytest.raises(DocumentNotFoundException):
        collection.get(new_key("missing"))


def test_replace_with_cas(collection):
    key = new_key("cas")
    r1 = collection.upsert(key, {"v": 1})
    r2 = collection.replace(key, {"v": 2}, ReplaceOptions(cas=r1.cas))
    assert r2.cas and r2.cas != r1.cas
    assert collection.get(key).content_as[dict] == {"v": 2}


def test_replace_with_stale_cas_raises(collection):
    key = new_key("stale")
    r1 = collection.upsert(key, {"v": 1})
    r2 = collection.upsert(key, {"v": 2})
    assert r2.cas != r1.cas
    with pytest.raises(CasMismatchException):
        collection.replace(key, {"v": 3}, ReplaceOptions(cas=r1.cas))
    g = collection.get(key)
    assert g.content_as[dict] == {"v": 2}
    assert g.cas == r2.cas


def test_replace_missing_raises(collection):
    with pytest.raises(DocumentNotFoundException):
        collection.replace(new_key("nokey"), {"v": 1})


def test_insert_existing_raises(collection):
    key = new_key("ins")
    r = collection.insert(key, {"v": 1}, InsertOptions())
    assert r.cas
    with pytest.raises(DocumentExistsException):
        collection.insert(key, {"v": 2})
    assert collection.get(key).content_as[dict] == {"v": 1}


def test_remove_then_get_raises(collection):
    key = new_key("rm")
    collection.upsert(key, {"v": 1})
    collection.remove(key)
    with pytest.raises(DocumentNotFoundException):
        collection.get(key)
    with pytest.raises(DocumentNotFoundException):
        collection.remove(key)
    # the key can be created again
    collection.insert(key, {"v": 2})
    assert collection.get(key).content_as[dict] == {"v": 2}


def test_expiry(collection):
    key = new_key("ttl")
    t0 = time.monotonic()
    collection.upsert(key, {"v": "short-lived"}, UpsertOptions(expiry=timedelta(seconds=2)))
    assert collection.get(key).content_as[dict] == {"v": "short-lived"}
    time.sleep(max(0.0, t0 + 3.0 - time.monotonic()))
    # Expiry has 1 s granularity: allow a little slack after 3 s, bounded.
    deadline = t0 + 5.0
    while True:
        try:
            collection.get(key)
        except DocumentNotFoundException:
            break
        if time.monotonic() >= deadline:
            pytest.fail(f"document with 2 s expiry still readable "
                        f"{time.monotonic() - t0:.1f}s after upsert", pytrace=False)
        time.sleep(0.2)


def test_mutation_tokens(collection):
    key = new_key("tok")
    r1 = collection.upsert(key, {"v": 1})
    t1 = r1.mutation_token()
    # Without HELLO MUTATION_SEQNO (0x04) + 16-byte response extras the SDK still
    # returns a token, but with partition_uuid = sequence_number = 0.
    assert t1 is not None
    assert t1.sequence_number > 0 and t1.partition_uuid != 0, (
        f"empty mutation token {t1!r}: the server must acknowledge HELLO feature 0x04 "
        "MUTATION_SEQNO and return extras vbuuid u64 + seqno u64 on mutations")
    assert t1.bucket_name == BUCKET
    assert 0 <= t1.partition_id < 1024
    t2 = collection.upsert(key, {"v": 2}).mutation_token()
    assert t2 is not None
    assert t2.partition_id == t1.partition_id
    assert t2.partition_uuid == t1.partition_uuid
    assert t2.sequence_number > t1.sequence_number
    t3 = collection.remove(key).mutation_token()
    assert t3 is not None and t3.sequence_number > t2.sequence_number


def test_vbuckets_flag_and_key_hashing(sluice_factory):
    """--vbuckets 64: the SDK routes by the server's map; tokens carry the hashed vBucket."""
    srv = sluice_factory(vbuckets=64, memcached=False)
    c = _connect_or_fail(srv)
    try:
        col = c.bucket(BUCKET).default_collection()
        for i in range(8):
            key = f"vbkey-{i}"
            tok = col.upsert(key, {"i": i}).mutation_token()
            assert tok is not None
            assert tok.partition_id == vbucket_of(key, 64), key
            assert col.get(key).content_as[dict] == {"i": i}
    finally:
        c.close()
