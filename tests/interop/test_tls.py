"""TLS with the Python SDK: `sluice cluster up` makes a cluster CA and node certificates
under its data directory and serves KV and admin HTTP over TLS beside the cleartext ports.
The SDK connects with `couchbases://` trusting that CA and does CRUD on every node (it finds
the TLS ports in the map's `nodesExt`: `kvSSL`, `mgmtSSL`, and over TLS it logs in with
PLAIN). Plain `couchbase://` keeps working. The same `couchbases://` with a CA that did not
sign the nodes' certificates fails: the SDK really verifies, so the first run was TLS.

The nodes call each other over TLS as well (`cluster up` starts them with
`--cluster-encryption control`): a member's identity is refused on the cleartext admin
port and taken on the TLS one, so the cluster forming and serving proves its members'
calls went over TLS.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from couchbase.auth import PasswordAuthenticator
from couchbase.cluster import Cluster
from couchbase.exceptions import CouchbaseException, DocumentNotFoundException
from couchbase.options import ClusterOptions, ClusterTimeoutOptions

from conftest import PASSWORD, USERNAME
from test_cluster_up import cluster_up, free_base, stop, wait_up


def connect(conn_str: str, ca=None):
    auth = PasswordAuthenticator(USERNAME, PASSWORD, cert_path=str(ca) if ca else None)
    opts = ClusterOptions(auth, timeout_options=ClusterTimeoutOptions(
        connect_timeout=timedelta(seconds=10), kv_timeout=timedelta(seconds=5)))
    return Cluster(conn_str, opts)


@pytest.mark.timeout(300)
def test_python_sdk_over_couchbases_with_the_generated_ca(tmp_path):
    base = free_base()
    proc = cluster_up(tmp_path, base)
    try:
        info = wait_up(proc, tmp_path)
        ca = info["ca"]
        tls = info["tls_connection_string"]
        assert ca and tls and tls.startswith("couchbases://"), info
        assert all(n["kv_tls_port"] == n["kv_port"] + 7 for n in info["nodes"]), info

        # The map names every node's TLS ports; fetched over the TLS admin port itself.
        node0 = info["nodes"][0]
        ctx = ssl.create_default_context(cafile=ca)
        req = urllib.request.Request(
            f"https://127.0.0.1:{node0['admin_tls_port']}/pools/default/b/default")
        token = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            doc = json.load(r)
        for entry, n in zip(doc["nodesExt"], info["nodes"]):
            assert entry["services"]["kvSSL"] == n["kv_tls_port"], entry
            assert entry["services"]["mgmtSSL"] == n["admin_tls_port"], entry

        cluster = connect(tls, ca)
        col = cluster.bucket("default").default_collection()
        docs = {f"tls-{i}": {"i": i} for i in range(300)}  # every vbucket, every node
        for k, v in docs.items():
            col.upsert(k, v)
        for k, v in docs.items():
            assert col.get(k).content_as[dict] == v
        col.replace("tls-1", {"i": "replaced"})
        assert col.get("tls-1").content_as[dict] == {"i": "replaced"}
        col.remove("tls-2")
        with pytest.raises(DocumentNotFoundException):
            col.get("tls-2")
        cluster.close()

        # Cleartext as before, and it sees what TLS wrote.
        plain = connect(info["connection_string"])
        pcol = plain.bucket("default").default_collection()
        assert pcol.get("tls-0").content_as[dict] == {"i": 0}
        plain.close()

        # The members call each other over TLS: their identity is refused in the clear.
        assert all("--cluster-encryption" in n["args"] for n in info["nodes"]), info
        secret = (Path(node0["data_dir"]) / "cluster_secret").read_text().strip()
        member = "Basic " + base64.b64encode(f"@cluster:{secret}".encode()).decode()
        path = "/internal/rebalance/map_rev"
        clear = urllib.request.Request(f"http://127.0.0.1:{node0['admin_port']}{path}",
                                       headers={"Authorization": member})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(clear, timeout=10)
        assert refused.value.code == 403
        assert "TLS" in json.load(refused.value)["error"]
        over_tls = urllib.request.Request(f"https://127.0.0.1:{node0['admin_tls_port']}{path}",
                                          headers={"Authorization": member})
        with urllib.request.urlopen(over_tls, context=ctx, timeout=10) as r:
            assert "map_revs" in json.load(r)

        # A CA that did not sign the nodes' certificates: no connection.
        other = tmp_path / "other-ca.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                        "-keyout", str(tmp_path / "other-key.pem"), "-out", str(other),
                        "-days", "1", "-subj", "/CN=not the cluster CA"],
                       check=True, capture_output=True)
        with pytest.raises(CouchbaseException):
            bad = connect(tls, other)
            bad.bucket("default").default_collection().get("tls-0")
    finally:
        stop(proc)
