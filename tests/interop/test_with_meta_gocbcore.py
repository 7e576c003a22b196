"""SET_WITH_META / DEL_WITH_META / GET_META (the commands an XDCR target receives) driven by a
client written by others: gocbcore v10.8.1's Agent.SetMeta / DeleteMeta / GetMeta, through
``dcp_gocbcore/bin/metaops`` (source in dcp_gocbcore/metaops/main.go; built by
scripts/install-test-deps). gocbcore sends the 30-byte extras form (flags, expiry, rev_seqno,
cas, options, extended-meta length 0), header CAS 0, and GET_META version 2 (the answer's
21st extras byte is the datatype).

test_conflict_resolution_by_revision, as the Administrator on a couchbase bucket:

* a new key is stored with the request's meta CAS, rev, flags; GET_META shows them;
* an older revision is refused with KEY_EEXISTS (gocbcore: ErrDocumentExists), a newer one
  with a smaller CAS wins (revision compares first), and a value carrying an xattr section
  (datatype JSON|XATTR) is accepted and GET_META shows the XATTR bit;
* DEL_WITH_META leaves a tombstone GET_META shows (deleted, its rev and CAS), and an older
  SET_WITH_META is refused behind it;
* REGENERATE_CAS alone and FORCE_ACCEPT_WITH_META_OPS are EINVAL (ErrInvalidArgument);
  SKIP_CONFLICT_RESOLUTION|REGENERATE_CAS stores even rev 1, answering a CAS of its own
  (above every CAS the document had, the tombstone's included);
* a local SET afterwards gets a larger CAS and rev + 1, and the very same metadata sent
  again is refused.

test_with_meta_needs_replication_target: over REST, a data_writer[default] user and a
replication_target[default] user; the writer's SET_WITH_META, GET_META and DEL_WITH_META are
refused with EACCESS 0x24 (gocbcore: ErrAuthenticationFailure) and store nothing, the
target's all succeed.

test_last_write_wins_bucket_resolves_by_cas_first: an `lww` bucket made over REST (its mode
shown, fixed for its life, an unknown mode refused); the same walk with
FORCE_ACCEPT_WITH_META_OPS on every write (`--lww`, as XDCR sends them), where the CAS
decides before the revision; a SET_WITH_META without the flag is EINVAL and stores nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Dict, List

import pytest

from admin_http import basic
from conftest import BUCKET, PASSWORD, USERNAME

HERE = Path(__file__).resolve().parent
GO_DIR = HERE / "dcp_gocbcore"
METAOPS = Path(os.environ.get("METAOPS_BIN", GO_DIR / "bin" / "metaops"))

pytestmark = pytest.mark.timeout(120)

C = 0x7000_0000_0000_0000   # the meta CAS metaops sends (its remoteCas)
SUCCESS, KEY_EEXISTS, EINVAL, EACCESS = 0x00, 0x02, 0x04, 0x24
DT_XATTR = 0x04


def metaops_binary() -> Path:
    if not (METAOPS.is_file() and os.access(METAOPS, os.X_OK)):
        pytest.fail(f"{METAOPS} not found: run scripts/install-test-deps (it builds the gocbcore "
                    "clients with Go), or set METAOPS_BIN=/path/to/metaops", pytrace=False)
    return METAOPS


def metaops(srv, user: str, password: str, scenario: str, key: str) -> Dict[str, dict]:
    """Runs a metaops scenario; its steps by name (each name occurs once)."""
    args = [str(metaops_binary()), "--addr", f"127.0.0.1:{srv.kv_port}", "--bucket", BUCKET,
            "--user", user, "--password", password, "--scenario", scenario, "--key", key,
            "--timeout", "20"]
    p = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=90)
    if p.returncode != 0:
        pytest.fail(f"metaops ({scenario} as {user}) exited {p.returncode}\n"
                    f"--- stderr ---\n{p.stderr[-4000:]}", pytrace=False)
    steps: List[dict] = json.loads(p.stdout)
    by_name = {s["step"]: s for s in steps}
    assert len(by_name) == len(steps), steps
    return by_name


def ok(step: dict) -> dict:
    assert step["ok"], f"{step['step']} failed: {step}"
    return step


def refused(step: dict, status: int, sentinel: str) -> None:
    assert not step["ok"], f"{step['step']} succeeded, want status {status:#x}: {step}"
    assert step.get("status") == status, f"{step['step']}: want status {status:#x}: {step}"
    assert step.get("sentinel") == sentinel, f"{step['step']}: want {sentinel}: {step}"


def meta(step: dict) -> dict:
    return ok(step)["meta"]


def put_user(srv, name: str, password: str, roles: str) -> None:
    """PUT /settings/rbac/users/local/NAME (a form, as Couchbase's REST API takes it)."""
    body = urllib.parse.urlencode({"password": password, "roles": roles}).encode()
    req = urllib.request.Request(
        f"{srv.admin_url}/settings/rbac/users/local/{name}", data=body, method="PUT",
        headers={"content-type": "application/x-www-form-urlencoded", "authorization": basic()})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert 200 <= r.status < 300, (name, r.status, r.read())


@pytest.fixture(scope="module")
def server(sluice_module_factory):
    return sluice_module_factory(bucket_type="couchbase", memcached=False)


def test_conflict_resolution_by_revision(server):
    s = metaops(server, USERNAME, PASSWORD, "full", "xdcr-doc")
    problems: List[str] = []

    def check(cond: bool, what: str) -> None:
        if not cond:
            problems.append(what)

    def expect(name: str, status: int, sentinel: str = "") -> None:
        st = s[name]
        if status == SUCCESS:
            check(st["ok"], f"{name}: want success, got {st}")
        else:
            check(not st["ok"] and st.get("status") == status and st.get("sentinel") == sentinel,
                  f"{name}: want status {status:#x} ({sentinel}), got {st}")

    def meta_is(name: str, **want) -> None:
        m = s[name].get("meta")
        if not s[name]["ok"] or m is None:
            problems.append(f"{name}: GET_META failed: {s[name]}")
            return
        got = {k: m[k] for k in want}
        check(got == want, f"{name}: meta {got}, want {want} (all: {m})")

    # A new key: the request's CAS comes back and is what GET_META shows.
    expect("set_new", SUCCESS)
    check(s["set_new"]["cas"] == C, f"set_new: cas {s['set_new']['cas']:#x}, want {C:#x}")
    meta_is("get_meta_new", deleted=0, rev=10, cas=C, flags=0x11, expiry=0)
    # Revision decides, not CAS: rev 9 (CAS C+10) loses, rev 11 (CAS C-5) wins.
    expect("set_older_rev", KEY_EEXISTS, "document_exists")
    expect("set_newer_rev_xattr", SUCCESS)
    check(s["set_newer_rev_xattr"]["cas"] == C - 5,
          f"set_newer_rev_xattr: {s['set_newer_rev_xattr']}")
    meta_is("get_meta_xattr", deleted=0, rev=11, cas=C - 5, flags=0x11)
    m = s["get_meta_xattr"].get("meta") or {}
    check(m.get("datatype", 0) & DT_XATTR != 0,
          f"get_meta_xattr: datatype {m.get('datatype')} lacks XATTR (0x04)")
    # A deletion made elsewhere leaves a tombstone with its metadata...
    expect("delete_meta", SUCCESS)
    check(s["delete_meta"]["cas"] == C + 1, f"delete_meta: {s['delete_meta']}")
    meta_is("get_meta_tombstone", deleted=1, rev=12, cas=C + 1)
    # ... which an older version cannot get past.
    expect("set_behind_tombstone", KEY_EEXISTS, "document_exists")
    # Option combinations: REGENERATE_CAS needs skip; FORCE_ACCEPT is for LWW buckets.
    expect("set_regenerate_alone", EINVAL, "invalid_argument")
    expect("set_force_accept", EINVAL, "invalid_argument")
    # Skip + regenerate: stored although rev 1 < 12, with a CAS the server made. Its clock
    # (a hybrid logical clock, as Couchbase's) has seen C+1, so the new CAS is above that.
    expect("set_skip_regenerate", SUCCESS)
    regen = s["set_skip_regenerate"]["cas"]
    check(regen != C + 3 and regen > C + 1,
          f"set_skip_regenerate: cas {regen:#x}, want one of the server's above {C + 1:#x} "
          f"(sent {C + 3:#x})")
    meta_is("get_meta_regenerated", deleted=0, rev=1, cas=regen, flags=0x22)
    # A local write after it: larger CAS, rev + 1.
    expect("local_set", SUCCESS)
    local = s["local_set"]["cas"]
    check(local > regen, f"local_set: cas {local:#x} not above {regen:#x}")
    meta_is("get_meta_local", deleted=0, rev=2, cas=local)
    # The current version's own metadata again (and no xattrs): nothing to store.
    expect("set_identical", KEY_EEXISTS, "document_exists")

    assert not problems, "\n".join(problems) + "\n--- steps ---\n" + json.dumps(
        list(s.values()), indent=1)


def test_with_meta_needs_replication_target(server):
    put_user(server, "writer", "writer-pw", f"data_writer[{BUCKET}]")
    put_user(server, "target", "target-pw", f"replication_target[{BUCKET}]")

    # The writer bootstraps (data_writer is a role on the bucket, so SELECT_BUCKET is fine),
    # but every command here is refused: EACCESS, which gocbcore maps to
    # ErrAuthenticationFailure (and does not retry).
    w = metaops(server, "writer", "writer-pw", "short", "by-writer")
    for name in ("set_new", "get_meta", "delete_meta"):
        refused(w[name], EACCESS, "authentication_failure")

    # Nothing was stored: the administrator's SET_WITH_META of that very version (rev 5,
    # CAS C) succeeds, which identical metadata would not if the writer's had been stored.
    a = metaops(server, USERNAME, PASSWORD, "short", "by-writer")
    ok(a["set_new"])
    assert a["set_new"]["cas"] == C, a["set_new"]
    assert meta(a["get_meta"])["rev"] == 5, a["get_meta"]

    t = metaops(server, "target", "target-pw", "short", "by-target")
    ok(t["set_new"])
    assert t["set_new"]["cas"] == C, t["set_new"]
    m = meta(t["get_meta"])   # GET_META is a replication_target's too
    assert (m["deleted"], m["rev"], m["cas"]) == (0, 5, C), m
    ok(t["delete_meta"])
    assert t["delete_meta"]["cas"] == C + 1, t["delete_meta"]


def create_bucket(srv, name: str, **fields) -> tuple:
    """POST /pools/default/buckets (a form, as Couchbase's REST takes it): (status, body)."""
    body = urllib.parse.urlencode({"name": name, "ramQuotaMB": "100", **fields}).encode()
    req = urllib.request.Request(
        f"{srv.admin_url}/pools/default/buckets", data=body, method="POST",
        headers={"content-type": "application/x-www-form-urlencoded", "authorization": basic()})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def bucket_info(srv, name: str) -> dict:
    req = urllib.request.Request(f"{srv.admin_url}/pools/default/buckets/{name}",
                                 headers={"authorization": basic()})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def test_last_write_wins_bucket_resolves_by_cas_first(server):
    # The conflict mode is chosen at creation and shown; an unknown one is refused.
    status, body = create_bucket(server, "lww", conflictResolutionType="lww")
    assert status == 202, (status, body)
    assert bucket_info(server, "lww")["conflictResolutionType"] == "lww"
    assert bucket_info(server, BUCKET)["conflictResolutionType"] == "seqno"
    status, body = create_bucket(server, "bad", conflictResolutionType="newest")
    assert status == 400 and b"conflictResolutionType" in body, (status, body)
    # ... and fixed for the bucket's life.
    edit = urllib.request.Request(
        f"{server.admin_url}/pools/default/buckets/lww",
        data=urllib.parse.urlencode({"conflictResolutionType": "seqno"}).encode(),
        method="POST",
        headers={"content-type": "application/x-www-form-urlencoded", "authorization": basic()})
    with pytest.raises(urllib.error.HTTPError) as refused_edit:
        urllib.request.urlopen(edit, timeout=10)
    assert refused_edit.value.code == 400

    args = [str(metaops_binary()), "--addr", f"127.0.0.1:{server.kv_port}", "--bucket", "lww",
            "--user", USERNAME, "--password", PASSWORD, "--scenario", "full", "--key",
            "lww-doc", "--timeout", "20", "--lww"]
    deadline = time.monotonic() + 30
    while True:   # the new bucket's vbuckets become active on every node shortly after 202
        p = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=90)
        if p.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert p.returncode == 0, p.stderr[-4000:]
    s = {st["step"]: st for st in json.loads(p.stdout)}

    # Every version sent to a last-write-wins bucket must carry FORCE_ACCEPT_WITH_META_OPS
    # (--lww adds it to each step, as XDCR does); one without is refused and not stored.
    refused(s["set_without_force_accept"], EINVAL, "invalid_argument")
    ok(s["set_new"])
    # CAS decides, not revisions (the opposite of the revision bucket's walk above): rev 9
    # with CAS C+10 wins, rev 11 with CAS C-5 loses.
    assert ok(s["set_older_rev"])["cas"] == C + 10
    refused(s["set_newer_rev_xattr"], KEY_EEXISTS, "document_exists")
    m = meta(s["get_meta_xattr"])
    assert (m["deleted"], m["rev"], m["cas"]) == (0, 9, C + 10), m
    # A deletion with a smaller CAS loses too, whatever its revision.
    refused(s["delete_meta"], KEY_EEXISTS, "document_exists")
    m = meta(s["get_meta_tombstone"])
    assert (m["deleted"], m["rev"], m["cas"]) == (0, 9, C + 10), m
    refused(s["set_behind_tombstone"], KEY_EEXISTS, "document_exists")
    refused(s["set_regenerate_alone"], EINVAL, "invalid_argument")
    regen = ok(s["set_skip_regenerate"])["cas"]
    assert regen > C + 10, hex(regen)
    # FORCE_ACCEPT_WITH_META_OPS does not skip conflict resolution: a CAS below the one
    # here loses.
    refused(s["set_force_accept"], KEY_EEXISTS, "document_exists")
    local = ok(s["local_set"])["cas"]
    assert local > regen, (hex(local), hex(regen))
    refused(s["set_identical"], KEY_EEXISTS, "document_exists")
