"""Fixtures: one private server set per store kind per pytest run.

The servers are started by the tool baton_test_servers
(tests/support/stores/README.md) on loopback, each kind once per run, all
kinds the collected tests need at once in the background as soon as
collection ends (so their start-ups overlap), and stopped at the end of
the run by sending `quit` (the tool stops every process it started). The
tool also injects faults: `freeze`/`thaw` (SIGSTOP/SIGCONT every server)
and `isolate`/`rejoin` (blackhole one slot's proxies).

Environment (set by the ctest entry, tests/python/CMakeLists.txt):
  BATON_LIBRARY       the libbaton.so.0 under test
  BATON_TEST_SERVERS  the baton_test_servers binary
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Callable, Dict, Iterator, Optional

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import baton  # noqa: E402

KINDS = ["memory", "batond", "postgres", "redis", "redlock", "zookeeper", "mysql", "etcd", "sqlite"]
SERVER_KINDS = [k for k in KINDS if k != "memory"]
SLOTS = 2  # slot 0: every client; slot 1: a holder to cut off


class Servers:
    """One baton_test_servers process: its URLs and its command channel."""

    def __init__(self, kind: str, root: str) -> None:
        self.kind = kind
        self.dir = os.path.join(root, kind)
        self.info: Dict[str, str] = {}
        self.error: Optional[str] = None
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self.proc: Optional[subprocess.Popen[str]] = None
        threading.Thread(target=self._start, name=f"start-{kind}", daemon=True).start()

    def _start(self) -> None:
        tool = os.environ.get("BATON_TEST_SERVERS", "")
        try:
            if not os.access(tool, os.X_OK):
                raise RuntimeError(f"BATON_TEST_SERVERS={tool!r} is not an executable")
            self.proc = subprocess.Popen(
                [tool, "--kind", self.kind, "--dir", self.dir, "--slots", str(SLOTS)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
            )
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                line = line.strip()
                if line == "ready":
                    break
                if line.startswith("error"):
                    raise RuntimeError(line)
                key, _, value = line.partition("=")
                self.info[key] = value
            else:
                raise RuntimeError("the tool exited before `ready`")
        except Exception as e:  # reported by the fixture that needs it
            self.error = f"{self.kind}: {e}"
        finally:
            self._ready.set()

    def wait(self, timeout: float = 120) -> None:
        if not self._ready.wait(timeout):
            raise RuntimeError(f"{self.kind} servers not ready within {timeout} s")
        if self.error:
            raise RuntimeError(self.error)

    def url(self, slot: int = 0) -> str:
        return self.info[f"slot_url.{slot}"]

    def command(self, cmd: str) -> None:
        """Sends one tool command (freeze, thaw, isolate 1, ...): `ok` or raise."""
        assert self.proc is not None and self.proc.stdin and self.proc.stdout
        with self._lock:
            self.proc.stdin.write(cmd + "\n")
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline().strip()
        if answer != "ok":
            raise RuntimeError(f"{self.kind}: {cmd!r} answered {answer!r}")

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            if self.proc.poll() is None and self.proc.stdin:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


class Store:
    """What a test gets: the store's URL, unique names, its fault commands."""

    def __init__(self, kind: str, servers: Optional[Servers]) -> None:
        self.kind = kind
        self.servers = servers
        self.url = servers.url(0) if servers else f"memory:pytest-{uuid.uuid4().hex[:8]}"

    def slot_url(self, slot: int) -> str:
        return self.servers.url(slot) if self.servers else self.url

    def name(self, what: str) -> str:
        """A lock name no other test uses (the servers are shared)."""
        return f"py/{what}/{uuid.uuid4().hex[:10]}"

    def connect(self, slot: int = 0, **options: object) -> baton.Client:
        return baton.connect(self.slot_url(slot), **options)  # type: ignore[arg-type]

    def command(self, cmd: str) -> None:
        if self.servers is None:
            pytest.skip(f"{self.kind} has no server process to {cmd.split()[0]}")
        self.servers.command(cmd)

    @property
    def has_server(self) -> bool:
        return self.servers is not None and self.kind != "sqlite"


_root: Optional[str] = None
_servers: Dict[str, Servers] = {}


def pytest_collection_finish(session: pytest.Session) -> None:
    """Starts, in the background, the servers of every kind the selected
    tests use, so that they start together."""
    global _root
    kinds = set()
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("store") in SERVER_KINDS:
            kinds.add(callspec.params["store"])
        if item.get_closest_marker("needs_batond"):
            kinds.add("batond")
    if kinds and _root is None:
        _root = tempfile.mkdtemp(prefix="baton-pytest-")
    for kind in sorted(kinds):
        if kind not in _servers:
            _servers[kind] = Servers(kind, _root or "")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    threads = [threading.Thread(target=s.stop) for s in _servers.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if _root:
        shutil.rmtree(_root, ignore_errors=True)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs_batond: the test starts a batond through the tool")


def servers_of(kind: str) -> Servers:
    s = _servers.get(kind)
    if s is None:  # not foreseen at collection: start it now
        global _root
        if _root is None:
            _root = tempfile.mkdtemp(prefix="baton-pytest-")
        s = _servers[kind] = Servers(kind, _root)
    s.wait()
    return s


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    kind = request.param
    yield Store(kind, None if kind == "memory" else servers_of(kind))


@pytest.fixture
def batond() -> Store:
    return Store("batond", servers_of("batond"))


def wait_until(cond: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Polls cond() every 2 ms until true; fails after `timeout` seconds."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not reached within {timeout} s")
        time.sleep(0.002)
