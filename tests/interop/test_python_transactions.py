"""Distributed ACID transactions through the Couchbase Python SDK 4.6.x.

The SDK's transactions are built from sub-document commands on the server: an insert is
staged in a tombstone (create-as-deleted, access-deleted), a replace or remove stages its
change in xattrs after saving the document's CAS, expiry and revision with `${$document…}`
macros, and the commit revives the tombstone or replaces the body with the staged xattr
(REPLACE_BODY_WITH_XATTR). An active transaction record (ATR) document tracks each attempt.

One node per bucket type, then a 3-node cluster with 1 replica and majority durability.
Each test reads the documents back outside the transaction to check what was committed.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from couchbase.auth import PasswordAuthenticator
from couchbase.cluster import Cluster
from couchbase.durability import DurabilityLevel, ServerDurability
from couchbase.exceptions import DocumentNotFoundException, TransactionFailed
from couchbase.options import ClusterOptions, ClusterTimeoutOptions, TransactionConfig

from conftest import BUCKET, PASSWORD, USERNAME
from sdk_node import sdk_server  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(180)


def connect(connstr: str, level: DurabilityLevel) -> Cluster:
    opts = ClusterOptions(
        PasswordAuthenticator(USERNAME, PASSWORD),
        timeout_options=ClusterTimeoutOptions(bootstrap_timeout=timedelta(seconds=10),
                                              kv_timeout=timedelta(seconds=5),
                                              kv_durable_timeout=timedelta(seconds=10)),
        transaction_config=TransactionConfig(durability=ServerDurability(level),
                                             timeout=timedelta(seconds=30)),
        enable_dns_srv=False)
    return Cluster(connstr, opts)


def new_key(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class Rollback(Exception):
    """Raised inside a transaction's logic to make it roll back."""


def commit_and_rollback(collection, cluster: Cluster) -> None:
    """One transaction that inserts, replaces and removes, committed; then the same kind of
    transaction rolled back by an exception in its logic. Checks every document after."""
    inserted, replaced, removed = new_key("ins"), new_key("rep"), new_key("rem")
    collection.upsert(replaced, {"v": 1})
    collection.upsert(removed, {"v": 1})

    def logic(ctx):
        ctx.insert(collection, inserted, {"v": "new"})
        doc = ctx.get(collection, replaced)
        ctx.replace(doc, {"v": doc.content_as[dict]["v"] + 1})
        ctx.remove(ctx.get(collection, removed))
        # Inside the transaction its own writes are visible.
        assert ctx.get(collection, inserted).content_as[dict] == {"v": "new"}

    result = cluster.transactions.run(logic)
    assert result.transaction_id
    assert collection.get(inserted).content_as[dict] == {"v": "new"}
    assert collection.get(replaced).content_as[dict] == {"v": 2}
    with pytest.raises(DocumentNotFoundException):
        collection.get(removed)

    # Rolled back: nothing it staged is visible, the documents it touched are unchanged.
    staged_insert, kept = new_key("ins"), new_key("kept")
    collection.upsert(kept, {"v": 1})

    def failing(ctx):
        ctx.insert(collection, staged_insert, {"v": "never"})
        doc = ctx.get(collection, replaced)
        ctx.replace(doc, {"v": 100})
        ctx.remove(ctx.get(collection, kept))
        raise Rollback("on purpose")

    with pytest.raises(TransactionFailed):
        cluster.transactions.run(failing)
    with pytest.raises(DocumentNotFoundException):
        collection.get(staged_insert)
    assert collection.get(replaced).content_as[dict] == {"v": 2}
    assert collection.get(kept).content_as[dict] == {"v": 1}
    # The rolled-back insert's tombstone is free for a plain insert.
    collection.insert(staged_insert, {"v": "plain"})
    assert collection.get(staged_insert).content_as[dict] == {"v": "plain"}


def test_transactions_commit_and_roll_back(sdk_server):
    cluster = connect(sdk_server.connstr, DurabilityLevel.NONE)
    try:
        commit_and_rollback(cluster.bucket(BUCKET).default_collection(), cluster)
    finally:
        cluster.close()


def test_concurrent_transactions_lose_no_update(sdk_server):
    """Two threads bump one counter in transactions at once. A transaction whose staged
    change loses the race to the other's (CAS mismatch on the document) fails as a whole:
    this SDK raises TransactionFailed for any error in the logic and does not retry it.
    Whatever interleaving happens, the counter ends at exactly the number of transactions
    that committed: none is lost, none applied twice."""
    import threading

    cluster = connect(sdk_server.connstr, DurabilityLevel.NONE)
    try:
        coll = cluster.bucket(BUCKET).default_collection()
        key = new_key("counter")
        coll.upsert(key, {"n": 0})
        committed, failed, other = [], [], []

        def bump(ctx):
            doc = ctx.get(coll, key)
            ctx.replace(doc, {"n": doc.content_as[dict]["n"] + 1})

        def worker():
            for _ in range(10):
                try:
                    committed.append(cluster.transactions.run(bump))
                except TransactionFailed as e:
                    failed.append(e)
                except Exception as e:  # anything else fails the test below
                    other.append(e)

        threads = [threading.Thread(target=worker) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not other, other
        assert len(committed) + len(failed) == 20
        assert committed, "some transaction commits"
        assert coll.get(key).content_as[dict] == {"n": len(committed)}
    finally:
        cluster.close()


@pytest.mark.timeout(300)
def test_transactions_on_a_three_node_cluster(tmp_path):
    """On `sluice cluster up` (3 nodes, 1 replica), with majority durability: the staged
    writes and the commit are SyncWrites, and the committed documents reach their
    replicas."""
    from test_cluster_up import cluster_up, free_base, stop, wait_up
    from test_buckets import eventually

    base = free_base()
    proc = cluster_up(tmp_path, base)
    try:
        wait_up(proc, tmp_path)
        cluster = connect(f"couchbase://127.0.0.1:{base}", DurabilityLevel.MAJORITY)
        coll = cluster.bucket(BUCKET).default_collection()
        eventually("the bucket takes writes", lambda: coll.upsert("warm", {}) is not None)
        commit_and_rollback(coll, cluster)
        keys = [new_key("many") for _ in range(20)]

        def many(ctx):
            for k in keys:
                ctx.insert(coll, k, {"k": k})

        cluster.transactions.run(many)
        for k in keys:
            eventually(f"replica of {k}",
                       lambda k=k: coll.get_any_replica(k).content_as[dict] == {"k": k})
        cluster.close()
    finally:
        stop(proc)
