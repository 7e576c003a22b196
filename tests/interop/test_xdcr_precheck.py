"""XDCR's source-side pre-check (issue 28), Couchbase's optimistic replication threshold.

A document whose value is larger than 256 bytes is not sent on the chance that it wins. The
pipeline first asks the target for the key's metadata (GET_META) and applies the target's
conflict resolution at the source. A version that would lose is kept back and counted in
`docsFailedCrSource`. A small document is sent as it is, and the target refuses it
(`docsFailedCrTarget`).

Before the replication exists, B holds `big` and `small` at revision 5, and A holds them at
revision 1; `fresh` (large) exists on A only. The replication then sends `fresh` (the
GET_META finds nothing), keeps `big` back, and sends `small`, which B refuses. Each counter
is exactly 1, and B keeps its own two documents. When A then writes `big` past B's
revision, it crosses.
"""

from __future__ import annotations

import pytest

from conftest import PASSWORD, USERNAME
from xdcr_helpers import (AUTH_A, add_remote_ref, connect, eventually, start_replication_at,
                          task_of, two_clusters)

pytestmark = pytest.mark.timeout(240)

BIG = "x" * 600      # above the 256-byte threshold
SMALL = "y" * 20


def test_large_documents_that_would_lose_are_not_sent(tmp_path):
    with two_clusters(tmp_path) as (a, b):
        run(a, b)


def run(a, b):
    col_a = connect(a.connstr, USERNAME, PASSWORD).bucket("default").default_collection()
    col_b = connect(b.connstr, USERNAME, PASSWORD).bucket("default").default_collection()
    for rev in range(5):
        col_b.upsert("big", {"side": "B", "rev": rev, "pad": BIG})
        col_b.upsert("small", {"side": "B", "rev": rev, "pad": SMALL})
    col_a.upsert("big", {"side": "A", "pad": BIG})
    col_a.upsert("small", {"side": "A", "pad": SMALL})
    col_a.upsert("fresh", {"side": "A", "pad": BIG})

    info_b = b.info()
    ref = add_remote_ref(a.url, "b", f"127.0.0.1:{info_b['nodes'][0]['admin_port']}",
                         USERNAME, PASSWORD, auth=AUTH_A)
    rid = start_replication_at(a.url, "default", ref, "default")

    def settled():
        t = task_of(a.url, rid)
        return t if t and t["changesLeft"] == 0 and t["docsReceivedFromDcp"] >= 3 else None

    t = eventually("the replication caught up", settled, diag=lambda: a.log_tail())
    assert t["docsFailedCrSource"] == 1, t     # big: kept back after GET_META
    assert t["docsFailedCrTarget"] == 1, t     # small: sent, refused by B
    assert t["docsWritten"] == 1, t            # fresh: GET_META found nothing
    assert col_b.get("big").content_as[dict]["side"] == "B"
    assert col_b.get("small").content_as[dict]["side"] == "B"
    assert col_b.get("fresh").content_as[dict] == {"side": "A", "pad": BIG}

    # Past B's revisions, A's version wins the pre-check and crosses.
    for rev in range(10):
        col_a.upsert("big", {"side": "A", "rev": rev, "pad": BIG})
    eventually("A's newer `big` on B",
               lambda: col_b.get("big").content_as[dict] == {"side": "A", "rev": 9, "pad": BIG},
               diag=lambda: str(task_of(a.url, rid)))
    # (A's versions from before its revisions passed B's may have been kept back too.)
    t = task_of(a.url, rid)
    assert t["docsFailedCrSource"] >= 1 and t["docsWritten"] >= 2, t
