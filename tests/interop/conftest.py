"""Fixtures that run a real `sluice server` process for interop tests.

Nothing is built here: the binary must already exist (scripts/test builds it
with `cargo build --release -p sluice-cli`). Override its location with
SLUICE_BIN=/path/to/sluice (e.g. a debug build).

Fixtures
--------
sluice_factory   function-scoped factory: ``srv = sluice_factory(bucket_type="ephemeral",
                 memory_quota_mb=256, vbuckets=64)`` starts a server and waits for it;
                 every server it started is killed at teardown.
sluice_module_factory
                 the same, module-scoped (for an expensive shared server).
sluice           a module-scoped default server (bucket "default", memcached port on).
                 Indirectly parametrizable: ``@pytest.mark.parametrize("sluice",
                 [{"bucket_type": "ephemeral"}], indirect=True)``.

The server object (SluiceServer) has kv_port, admin_port, memcached_port,
data_dir, log_path, connstr, start(), stop(), kill9(), restart(), stderr_tail().

When a test fails, the stderr tail of every server it used is attached to the
failure report ("sluice stderr" section). Servers run under
`setpriv --pdeathsig KILL`, so they die even if pytest is killed.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BIN = REPO_ROOT / "target" / "release" / "sluice"
HOST = "127.0.0.1"

READY_TIMEOUT_S = float(os.environ.get("SLUICE_READY_TIMEOUT", "30"))
STOP_TIMEOUT_S = 15.0
DEFAULT_TEST_TIMEOUT_S = 180  # per test, enforced by pytest-timeout when installed

USERNAME = "Administrator"
PASSWORD = "password"
BUCKET = "default"

# Every server started in this pytest process, so a hard exit still kills them.
_ALL_SERVERS: List["SluiceServer"] = []


def sluice_binary() -> Path:
    """Path of the sluice binary; pytest.fail()s with a clear message if absent."""
    path = Path(os.environ.get("SLUICE_BIN", DEFAULT_BIN))
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.fail(
            f"sluice binary not found or not executable at {path}.\n"
            "Build it first: cargo build --release -p sluice-cli "
            "(or run scripts/test, or set SLUICE_BIN=/path/to/sluice).",
            pytrace=False,
        )
    return path


def run_bench(*args: str, timeout: float = 200) -> subprocess.CompletedProcess:
    """`sluice bench ARGS...`, which must succeed (its output is shown when it does not)."""
    proc = subprocess.run([str(sluice_binary()), "bench", *args],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{clip(proc.stderr)}"
    return proc


def clip(text: str, keep: int = 3000) -> str:
    """`text` with its middle left out when long: a panic's message is at the head of stderr
    and what led to it at the tail, and a backtrace in between can bury both."""
    if len(text) <= 2 * keep:
        return text
    return f"{text[:keep]}\n[... {len(text) - 2 * keep} characters left out ...]\n{text[-keep:]}"


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_charts(out: Path, names: List[str]) -> None:
    """A bench report shows each named chart, and each is a PNG with something drawn in it
    (a blank 1000x560 image compresses to far less than 5 kB)."""
    md = (out / "report.md").read_text()
    assert "## Charts" in md
    for name in names:
        assert f"](charts/{name})" in md, name
        data = (out / "charts" / name).read_bytes()
        assert data[:8] == PNG_SIGNATURE and len(data) > 5000, name


def free_ports(n: int) -> List[int]:
    """n distinct currently-free loopback TCP ports (held open together so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_open(port: int, host: str = HOST, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for_port(port: int, timeout: float, proc: Optional[subprocess.Popen] = None,
                  host: str = HOST) -> None:
    """Wait (bounded) until host:port accepts TCP connections.

    Raises RuntimeError if proc exits first, TimeoutError after `timeout` seconds.
    """
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with code {proc.returncode} "
                               f"before {host}:{port} accepted connections")
        if port_open(port, host):
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{host}:{port} did not accept connections within {timeout:.0f}s")
        time.sleep(delay)
        delay = min(delay * 2, 0.25)


def _tail(path: Path, max_lines: int = 80, max_bytes: int = 64 * 1024) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except OSError as e:
        return f"<cannot read {path}: {e}>"
    lines = data.decode("utf-8", "replace").splitlines()
    return "\n".join(lines[-max_lines:])


class SluiceServer:
    """One `sluice server` process on loopback ports and a data dir.

    Ports and data dir stay the same across stop()/start()/restart(), so a
    restarted server reopens the same data and clients can reconnect.
    """

    def __init__(self, binary: Path, data_dir: Path, log_dir: Path, *,
                 bucket: str = BUCKET,
                 bucket_type: Optional[str] = None,
                 memory_quota_mb: Optional[int] = None,
                 vbuckets: Optional[int] = None,
                 username: str = USERNAME,
                 password: str = PASSWORD,
                 memcached: bool = True,
                 extra_args: tuple = (),
                 env: Optional[Dict[str, str]] = None,
                 ready_timeout: float = READY_TIMEOUT_S):
        self.binary = Path(binary)
        self.data_dir = Path(data_dir)
        self.log_dir = Path(log_dir)
        self.bucket = bucket
        self.bucket_type = bucket_type
        self.memory_quota_mb = memory_quota_mb
        self.vbuckets = vbuckets
        self.username = username
        self.password = password
        self.memcached = memcached
        self.extra_args = tuple(extra_args)
        self.env = dict(env or {})
        self.ready_timeout = ready_timeout
        self.kv_port: int = 0
        self.admin_port: int = 0
        self.memcached_port: Optional[int] = None
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0
        self.log_path = self.log_dir / "sluice-0.log"
        self._pick_ports()

    # ------------------------------------------------------------ properties
    @property
    def host(self) -> str:
        return HOST

    @property
    def connstr(self) -> str:
        return f"couchbase://{HOST}:{self.kv_port}"

    @property
    def admin_url(self) -> str:
        return f"http://{HOST}:{self.admin_port}"

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc else None

    @property
    def returncode(self) -> Optional[int]:
        return self.proc.poll() if self.proc else None

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def args(self) -> List[str]:
        a = [str(self.binary), "server",
             "--data-dir", str(self.data_dir),
             "--kv-port", str(self.kv_port),
             "--admin-port", str(self.admin_port),
             "--bucket", self.bucket,
             "--username", self.username,
             "--password", self.password]
        if self.memcached_port is not None:
            a += ["--memcached-port", str(self.memcached_port)]
        if self.bucket_type is not None:
            a += ["--bucket-type", self.bucket_type]
        if self.memory_quota_mb is not None:
            a += ["--memory-quota-mb", str(self.memory_quota_mb)]
        if self.vbuckets is not None:
            a += ["--vbuckets", str(self.vbuckets)]
        a += list(self.extra_args)
        return a

    def _pick_ports(self) -> None:
        ports = free_ports(3 if self.memcached else 2)
        self.kv_port, self.admin_port = ports[0], ports[1]
        self.memcached_port = ports[2] if self.memcached else None

    # ------------------------------------------------------------ lifecycle
    def start(self) -> "SluiceServer":
        """Start the process and wait (bounded) until its ports accept connections."""
        if self.is_running():
            raise RuntimeError("sluice server already running")
        attempts = 3 if self.starts == 0 else 1  # fresh ports may race with other processes
        for attempt in range(attempts):
            self._spawn()
            try:
                self.wait_ready()
                return self
            except RuntimeError:
                # Exited early. A port taken between picking and binding is the
                # only cause we retry (first start only, new ports).
                log = _tail(self.log_path, 200).lower()
                if attempt + 1 < attempts and ("address already in use" in log or "addrinuse" in log):
                    self._pick_ports()
                    continue
                raise RuntimeError(self._failure_text("sluice server exited during startup")) from None
            except TimeoutError:
                self.kill9()
                raise RuntimeError(self._failure_text(
                    f"sluice server not ready within {self.ready_timeout:.0f}s")) from None
        raise AssertionError("unreachable")

    def _spawn(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.log_dir / f"sluice-{self.starts}.log"
        self.starts += 1
        cmd = self.args()
        # Kill the server if pytest itself dies without running teardown.
        if shutil.which("setpriv"):
            cmd = ["setpriv", "--pdeathsig", "KILL", "--"] + cmd
        env = dict(os.environ)
        env.setdefault("RUST_BACKTRACE", "1")
        env.update(self.env)
        with open(self.log_path, "wb") as log:
            log.write(("$ " + " ".join(self.args()) + "\n").encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=env,
                                         cwd=str(self.data_dir.parent),
                                         start_new_session=True)
        if self not in _ALL_SERVERS:
            _ALL_SERVERS.append(self)

    def wait_ready(self, timeout: Optional[float] = None) -> None:
        """Bounded wait until the KV port (and the memcached port, if any) accept TCP."""
        deadline = time.monotonic() + (self.ready_timeout if timeout is None else timeout)
        ports = [self.kv_port] + ([self.memcached_port] if self.memcached_port else [])
        for port in ports:
            wait_for_port(port, max(0.1, deadline - time.monotonic()), self.proc)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> Optional[int]:
        """SIGTERM, then wait up to `timeout` s; SIGKILL if it is still alive.

        Returns the exit code (negative = killed by that signal), or None if
        there was no process. Raises TimeoutError if SIGTERM was not enough
        (after killing it), so a test calling stop() notices a hung shutdown.
        """
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
                raise TimeoutError(self._failure_text(
                    f"sluice server ignored SIGTERM for {timeout:.0f}s; killed with SIGKILL"))
        return self.proc.returncode

    def kill9(self) -> Optional[int]:
        """SIGKILL the server (crash simulation) and reap it."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover (D state)
                pass
        return self.proc.returncode

    def restart(self, kill: bool = False, timeout: float = STOP_TIMEOUT_S) -> "SluiceServer":
        """Stop (SIGTERM, or SIGKILL if kill=True) and start again on the same ports/data dir."""
        if kill:
            self.kill9()
        else:
            self.stop(timeout=timeout)
        return self.start()

    def cleanup(self) -> None:
        """Teardown: make sure the process is gone (SIGTERM briefly, then SIGKILL)."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.stop(timeout=5)
            except TimeoutError:
                pass
            self.kill9()

    # ------------------------------------------------------------ diagnostics
    def stderr_tail(self, lines: int = 80) -> str:
        return _tail(self.log_path, lines)

    def _failure_text(self, what: str) -> str:
        rc = self.returncode
        return (f"{what} (exit code {rc}; command: {' '.join(self.args())})\n"
                f"--- last lines of {self.log_path} ---\n{self.stderr_tail()}")

    def health(self, timeout: float = 2.0) -> int:
        """HTTP status of GET /health on the admin port."""
        with urllib.request.urlopen(f"{self.admin_url}/health", timeout=timeout) as r:
            return r.status

    def __repr__(self) -> str:
        return (f"SluiceServer(kv={self.kv_port}, admin={self.admin_port}, "
                f"memcached={self.memcached_port}, pid={self.pid}, data={self.data_dir})")


@atexit.register
def _kill_leftovers() -> None:
    for srv in _ALL_SERVERS:
        if srv.proc is not None and srv.proc.poll() is None:
            srv.proc.kill()


# ---------------------------------------------------------------- fixtures

class _Factory:
    def __init__(self, tmp_factory: pytest.TempPathFactory):
        self._tmp = tmp_factory
        self.servers: List[SluiceServer] = []

    def __call__(self, *, start: bool = True, **opts) -> SluiceServer:
        binary = sluice_binary()
        base = self._tmp.mktemp("sluice")
        srv = SluiceServer(binary, base / "data", base / "logs", **opts)
        self.servers.append(srv)
        if start:
            srv.start()
        return srv

    def cleanup(self) -> None:
        for srv in self.servers:
            srv.cleanup()


@pytest.fixture
def sluice_factory(tmp_path_factory):
    """Start sluice servers with custom options; all are killed at teardown."""
    f = _Factory(tmp_path_factory)
    yield f
    f.cleanup()


@pytest.fixture(scope="module")
def sluice_module_factory(tmp_path_factory):
    """Module-scoped variant of sluice_factory (servers shared by a module's tests)."""
    f = _Factory(tmp_path_factory)
    yield f
    f.cleanup()


@pytest.fixture(scope="module")
def sluice(sluice_module_factory, request):
    """A running default server (module scope). Indirect param: dict of SluiceServer options."""
    opts = dict(getattr(request, "param", None) or {})
    return sluice_module_factory(**opts)


# ---------------------------------------------------------------- hooks

def pytest_configure(config):
    # Registered by pytest-timeout too; declared here so a run without it does not warn.
    config.addinivalue_line("markers", "timeout(seconds): per-test time limit (pytest-timeout)")


def pytest_collection_modifyitems(config, items):
    # A per-test upper bound, if pytest-timeout is installed (scripts/install-test-deps does).
    if config.pluginmanager.hasplugin("timeout"):
        for item in items:
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(DEFAULT_TEST_TIMEOUT_S))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed:
        return
    # Servers the test used: fixture values that are servers (or tuples holding
    # them) and everything its own function-scoped sluice_factory started.
    servers: List[SluiceServer] = []

    def add(v):
        if isinstance(v, SluiceServer) and v not in servers:
            servers.append(v)

    values = dict(getattr(item, "funcargs", {}))
    # Fixtures already set up when a later one failed in setup are not in
    # funcargs yet; their cached values are on the fixture definitions.
    try:
        for name, defs in item._fixtureinfo.name2fixturedefs.items():
            cached = getattr(defs[-1], "cached_result", None)
            if name not in values and cached and cached[0] is not None:
                values[name] = cached[0]
    except Exception:  # private pytest API: best effort only
        pass
    for name, value in values.items():
        if name == "sluice_factory" and isinstance(value, _Factory):
            for s in value.servers:
                add(s)
        elif isinstance(value, (tuple, list)):
            for v in value:
                add(v)
        else:
            add(value)
    for s in servers:
        state = "running" if s.is_running() else f"exited with {s.returncode}"
        rep.sections.append((f"sluice stderr ({s!r}, {state}) tail",
                             s.stderr_tail()))
