"""The lost notice through the Python package: lease.lost is set no later
than the local safe deadline, and before the store can grant the lock to
anyone else; leaving the block then raises LockLost."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from typing import Iterator, List

import pytest

import baton
from conftest import Store

# The callback's delivery is checked, not its lateness: the library's
# notice thread writes the fd at the deadline (capi_test times it), but the
# Python thread that runs the callback may wait for the CPU and the GIL for
# a long time on a shared, loaded machine (1.7 s seen at load 24 on 2 cores).
CALLBACK_WITHIN = 5.0
POLL = 0.002


def poll_lost(held: baton.HeldLease, deadline: float, timeout: float = 10) -> float:
    """Polls held.lost until True; returns the end of the first read that
    said True. Each read is bracketed by clock readings, so the check is
    exact whatever the scheduling: no read that began at or after the
    deadline may say False."""
    end = time.monotonic() + timeout
    while True:
        before = time.monotonic()
        lost = held.lost
        after = time.monotonic()
        if lost:
            return after
        assert before < deadline, f"lost read False {before - deadline:.4f} s after the deadline"
        assert after < end, "the lease was not reported lost"
        time.sleep(POLL)


def wait_called(called: List[float]) -> None:
    end = time.monotonic() + CALLBACK_WITHIN
    while not called and time.monotonic() < end:
        time.sleep(POLL)
    assert called, f"on_lost not called within {CALLBACK_WITHIN} s"


def test_lost_inside_with_block(store: Store) -> None:
    """A keeper that cannot renew in time (renew interval beyond the TTL):
    the body sees lease.lost at the deadline, on_lost runs, the block's end
    raises LockLost, and the lock is free for the next holder."""
    name = store.name("lost-with")
    called: List[float] = []
    with store.connect() as c:
        with pytest.raises(baton.LockLost) as e:
            with c.lock(name, ttl="500ms", renew_interval="1m",
                        on_lost=lambda h: called.append(time.monotonic())) as held:
                deadline = held.safe_deadline
                assert not held.lost
                t = poll_lost(held, deadline)
                assert t >= deadline - 0.005, "not reported lost before its deadline"
                assert held.wait_lost(0) is True
                other = c.acquire(name, wait="10s")  # granted after expiry
                assert other.fencing_token > held.fencing_token
                assert time.monotonic() >= deadline
                c.release(other)
        assert name in str(e.value) and e.value.code == "lock_lost"
        wait_called(called)
        assert called[0] >= deadline - 0.005


def test_body_error_and_loss(store: Store) -> None:
    """The body raised and the lease was lost: LockLost, chained to the
    body's error (as redis-py's LockNotOwnedError is)."""
    if store.kind != "memory":
        pytest.skip("the wrapping is the package's, not the store's: memory: covers it")
    with store.connect() as c:
        with pytest.raises(baton.LockLost) as e:
            with c.lock(store.name("lost-err"), ttl="100ms", renew_interval="1m") as held:
                held.wait_lost(5)
                raise KeyError("body")
        assert isinstance(e.value.__context__, KeyError)


@contextlib.contextmanager
def sqlite_write_lock(url: str) -> Iterator[None]:
    """Holds the SQLite file's write lock from another connection, so the
    store's renewals wait on it (sqlite:// has no server to freeze)."""
    db = sqlite3.connect(url[len("sqlite://"):], timeout=5, isolation_level=None)
    db.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        db.execute("ROLLBACK")
        db.close()


@contextlib.contextmanager
def frozen(store: Store) -> Iterator[None]:
    if store.kind == "sqlite":
        with sqlite_write_lock(store.url):
            yield
        return
    store.command("freeze")
    try:
        yield
    finally:
        store.command("thaw")


def test_lost_notice_store_frozen(store: Store) -> None:
    if store.kind == "memory":
        pytest.skip("memory: is in-process: nothing to freeze (test_lost_inside_with_block "
                    "covers its notice)")
    name = store.name("lost-frozen")
    called: List[float] = []
    with store.connect(request_timeout="1s") as c:
        with pytest.raises(baton.LockLost):
            with c.lock(name, ttl="500ms",
                        on_lost=lambda h: called.append(time.monotonic())) as held:
                with frozen(store):
                    time.sleep(0.05)  # a renewal in flight at the freeze has settled
                    deadline = held.safe_deadline
                    poll_lost(held, deadline)
                    assert held.wait_lost(0)
                    wait_called(called)
                assert called[0] >= deadline - 0.005
        # After the thaw the lock can be taken again.
        lease = c.acquire(name, wait="10s")
        assert lease.fencing_token > held.fencing_token
        c.release(lease)


def test_lost_notice_holder_cut_off(store: Store) -> None:
    """The holder's connections are blackholed at the proxy while another
    client waits: the holder's lease.lost is set before that client is
    granted the lock."""
    if not store.has_server:
        pytest.skip(f"{store.kind} has no server connection to cut off "
                    "(test_lost_notice_store_frozen blocks its renewals instead)")
    name = store.name("lost-cut")
    granted: List[float] = []
    errors: List[BaseException] = []
    with store.connect(slot=1, request_timeout="1s") as holder_client, store.connect() as other:
        held = holder_client.lock(name, ttl="500ms").__enter__()
        try:
            def wait_for_lock() -> None:
                try:
                    lease = other.acquire(name, wait="20s")
                    granted.append(time.monotonic())
                    other.release(lease)
                except BaseException as e:
                    errors.append(e)

            store.command("isolate 1")
            try:
                time.sleep(0.05)
                deadline = held.safe_deadline
                waiter = threading.Thread(target=wait_for_lock)
                waiter.start()
                t = poll_lost(held, deadline)
                waiter.join(30)
            finally:
                store.command("rejoin 1")
            assert not errors, errors
            assert granted, "the other client got the lock"
            # The contract: the holder's safe deadline (from which on lost
            # reads True, checked by poll_lost) comes before anyone else holds
            # the lock.
            assert deadline <= granted[0], (deadline, granted)
            assert t > 0
        finally:
            with pytest.raises(baton.LockLost):
                held.__exit__(None, None, None)


def test_elector_term_lost(store: Store) -> None:
    """A term that is not renewed in time (retry interval beyond the TTL):
    on_lost runs on the notifier thread, elector.lost is set, and leaving
    leadership() raises LockLost."""
    if store.kind not in ("memory", "batond"):
        pytest.skip("the wrapping is the package's, not the store's: memory: and baton:// cover it")
    called: List[float] = []
    with store.connect() as c:
        with c.elector(store.name("term"), ttl="300ms", retry_interval="1m",
                       on_lost=lambda e: called.append(time.monotonic())) as e:
            with pytest.raises(baton.LockLost):
                with e.leadership(wait="5s"):
                    deadline = e.safe_deadline
                    assert e.is_leader and deadline > time.monotonic()
                    end = time.monotonic() + 10
                    while not e.lost and time.monotonic() < end:
                        time.sleep(POLL)
                    assert e.lost and not e.is_leader
            wait_called(called)
            assert called[0] >= deadline - 0.005
