"""JSON over HTTP to a node's admin port, as the administrator (HTTP Basic). Every route
but /health needs credentials; see crates/manager/src/admin_auth.rs."""

from __future__ import annotations

import base64
import json
import urllib.request

USERNAME = "Administrator"
PASSWORD = "password"


def basic(user: str = USERNAME, password: str = PASSWORD) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def request(url: str, body=None, auth: str | None = None) -> urllib.request.Request:
    """A request for `url` (POST with `body` as JSON if given), as the administrator unless
    `auth` gives another Authorization header."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"content-type": "application/json", "authorization": auth or basic()}
    return urllib.request.Request(url, data=data, headers=headers)


def get_json(url: str, body=None, timeout: float = 5.0):
    with urllib.request.urlopen(request(url, body), timeout=timeout) as r:
        return json.loads(r.read())
