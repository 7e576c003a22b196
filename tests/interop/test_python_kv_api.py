"""The rest of the KV calls a typical application makes, through the Couchbase Python SDK
4.6.x: get_and_lock / unlock (and a write to a locked document refused), get_and_touch,
exists, binary increment / decrement with an initial value, append / prepend.

One node per bucket type, the default collection.
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest

from couchbase.exceptions import (CasMismatchException, DocumentLockedException,
                                  DocumentNotFoundException)
from couchbase.options import (AppendOptions, DecrementOptions, DeltaValue, GetOptions,
                               IncrementOptions, ReplaceOptions, SignedInt64, UpsertOptions)
from couchbase.transcoder import RawBinaryTranscoder

from sdk_node import collection, sdk_cluster, sdk_server  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(120)


def new_key(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def test_get_and_lock_then_unlock(collection):
    key = new_key("lock")
    up = collection.upsert(key, {"v": 1})
    locked = collection.get_and_lock(key, timedelta(seconds=10))
    assert locked.content_as[dict] == {"v": 1}
    assert locked.cas not in (up.cas, 0)
    # A write without the lock's CAS is refused; the SDK retries LOCKED until its timeout.
    with pytest.raises(DocumentLockedException):
        collection.upsert(key, {"v": 2}, UpsertOptions(timeout=timedelta(seconds=1)))
    # A second lock is refused the same way.
    with pytest.raises(DocumentLockedException):
        collection.get_and_lock(key, timedelta(seconds=5))
    # Readers still read it.
    assert collection.get(key).content_as[dict] == {"v": 1}
    collection.unlock(key, locked.cas)
    collection.upsert(key, {"v": 3})
    assert collection.get(key).content_as[dict] == {"v": 3}


def test_the_holder_writes_through_its_lock(collection):
    key = new_key("holder")
    collection.upsert(key, {"v": 1})
    locked = collection.get_and_lock(key, timedelta(seconds=10))
    r = collection.replace(key, {"v": 2}, ReplaceOptions(cas=locked.cas))
    assert r.cas
    # The write ended the lock: anyone writes again.
    collection.upsert(key, {"v": 3})
    assert collection.get(key).content_as[dict] == {"v": 3}


def test_a_lock_times_out(collection):
    key = new_key("timeout")
    collection.upsert(key, {"v": 1})
    collection.get_and_lock(key, timedelta(seconds=1))
    with pytest.raises(DocumentLockedException):
        collection.upsert(key, {"v": 2}, UpsertOptions(timeout=timedelta(milliseconds=300)))
    time.sleep(2.1)
    collection.upsert(key, {"v": 2})


def test_get_and_touch_and_exists(collection):
    key = new_key("touch")
    collection.upsert(key, {"v": 1})
    g = collection.get_and_touch(key, timedelta(seconds=600))
    assert g.content_as[dict] == {"v": 1}
    left = collection.get(key, GetOptions(with_expiry=True)).expiry_time.timestamp() - time.time()
    assert 500 < left <= 601
    assert collection.exists(key).exists
    assert not collection.exists(new_key("absent")).exists
    collection.remove(key)
    assert not collection.exists(key).exists


def test_binary_counters_with_initial(collection):
    key = new_key("counter")
    b = collection.binary()
    r = b.increment(key, IncrementOptions(initial=SignedInt64(10), delta=DeltaValue(5)))
    assert r.content == 10
    assert b.increment(key, IncrementOptions(delta=DeltaValue(5))).content == 15
    assert b.decrement(key, DecrementOptions(delta=DeltaValue(20))).content == 0
    # A negative initial: the counter must exist (the SDK sends expiry 0xffffffff).
    missing = new_key("nocounter")
    with pytest.raises(DocumentNotFoundException):
        b.increment(missing, IncrementOptions(delta=DeltaValue(1), initial=SignedInt64(-1)))
    # No initial: the Python SDK creates the counter at 0.
    assert b.increment(missing, IncrementOptions(delta=DeltaValue(1))).content == 0


def test_append_prepend(collection):
    key = new_key("concat")
    tc = RawBinaryTranscoder()
    collection.upsert(key, b"middle", UpsertOptions(transcoder=tc))
    b = collection.binary()
    b.append(key, b"-end")
    up = b.prepend(key, b"start-")
    assert collection.get(key, GetOptions(transcoder=tc)).value == b"start-middle-end"
    with pytest.raises(CasMismatchException):
        b.append(key, b"x", AppendOptions(cas=up.cas + 1))
