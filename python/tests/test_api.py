"""The package's own behaviour: bad input, errors, durations, threads, fork."""

from __future__ import annotations

import asyncio
import ctypes
import os
import threading
import time
from datetime import timedelta
from typing import Any, Callable, List

import pytest

import baton
import baton.aio
from conftest import Store, wait_until


def _bad_calls(c: baton.Client, name: str, counters: bool) -> List[Callable[[], Any]]:
    return [
        lambda: c.try_acquire(""),
        lambda: c.try_acquire("a\0b"),
        lambda: c.try_acquire(name, ttl="0s"),
        lambda: c.try_acquire(name, ttl="-1s"),
        lambda: c.try_acquire(name, ttl="8d"),
        lambda: c.try_acquire(name, ttl="30"),
        lambda: c.try_acquire(name, ttl="abc"),
        lambda: c.try_acquire(name, ttl=30),  # type: ignore[arg-type]
        lambda: c.try_acquire(name, ttl=timedelta(microseconds=1500)),
        lambda: c.try_acquire(name, capacity=0),
        lambda: c.try_acquire(name, capacity=-1),
        lambda: c.try_acquire(name, capacity=True),
        lambda: c.try_acquire(name, token="not-hex"),
        lambda: c.try_acquire(7),  # type: ignore[arg-type]
        lambda: c.acquire(name, wait="-5s"),
        lambda: c.acquire(name, wait=timedelta(seconds=-1)),
        lambda: c.acquire_shared(name, wait="soon"),
        lambda: c.acquire_some([], wait="0"),
        lambda: c.acquire_some([name, name], wait="0"),
        lambda: c.acquire_some(name, wait="0"),  # one string, not a list
        lambda: c.acquire_some([name], wait="0", reservation="xyz"),
        lambda: c.acquire_all([name, ""], wait="0"),
        lambda: c.release("lease"),  # type: ignore[arg-type]
        lambda: c.extend(baton.Lease.from_token(name, "0" * 32), "0s"),
        lambda: c.list(limit=0),
        lambda: c.counter(""),
        lambda: c.lock(name, ttl="1s", renew_interval="-1s").__enter__(),
        lambda: c.elector(name, ttl="0s"),
        lambda: baton.Lease.from_token(name, "12"),
    ] + ([
        lambda: c.counter(name).take(0),
        lambda: c.counter(name).take(-3),
        lambda: c.counter(name).add(2**63),
        lambda: c.counter(name).add(2**63 - 1),  # 3 + that overflows: the library says so
    ] if counters else [])


def test_bad_input_raises_invalid_argument_and_changes_nothing(store: Store) -> None:
    name = store.name("bad")
    with store.connect() as c:
        counters = store.kind != "redlock"  # redlock:// offers none
        k = c.counter(name)
        if counters:
            k.add(3)
        before = c.describe(name)
        for i, call in enumerate(_bad_calls(c, name, counters)):
            with pytest.raises(baton.InvalidArgument) as e:
                call()
            assert str(e.value), f"call {i}: an empty message"
            assert e.value.code == "invalid_argument" and not e.value.retryable
        after = c.describe(name)
        assert after == before and after.is_free and after.waiters == []
        if counters:
            assert k.get() == 3
        assert [i for i in c.list(name)] == []


def test_library_messages_and_hierarchy() -> None:
    with baton.connect("memory:") as c:
        with pytest.raises(baton.InvalidArgument, match="ttl: duration \"abc\""):
            c.try_acquire("x", ttl="abc")
        lease = c.try_acquire("x", label="me")
        with pytest.raises(baton.NotAcquired) as e:
            c.try_acquire("x")
        assert e.value.retryable and isinstance(e.value, baton.BatonError)
        assert [(h.label, h.fencing_token) for h in e.value.holders] == [("me", lease.fencing_token)]
        assert '"x"' in str(e.value) and e.value.retry_after is None
        with pytest.raises(TimeoutError):  # baton.Timeout is a TimeoutError
            c.acquire("x", wait="10ms")
        with pytest.raises(ValueError):  # InvalidArgument is a ValueError
            c.acquire("x", wait="later")
        c.release(lease)
    with pytest.raises(baton.InvalidArgument, match="bogus"):
        baton.connect("bogus://x")
    with pytest.raises(baton.Unavailable) as u:
        baton.connect("redis://127.0.0.1:1")
    assert isinstance(u.value, ConnectionError) and u.value.retryable
    assert u.value.retry_after is None  # refused: the store could not say when
    with pytest.raises(baton.InvalidArgument, match="closed"):
        c.try_acquire("x")


def test_retry_after_in_seconds_or_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a store that knows when it can answer (redlock:// under its
    restart_guard) gives baton_error_retry_after_ms(); none here does, so
    a stand-in for that one function shows how the exception reads it."""
    from baton import _errors, _lib

    def error_handle() -> int:
        ms = ctypes.c_int64()
        err = _lib.lib.baton_parse_duration(b"10", ctypes.byref(ms))
        assert err
        return int(err)

    assert _lib.lib.baton_error_retry_after_ms(None) == 0
    plain = _errors.from_handle(error_handle())
    assert isinstance(plain, baton.InvalidArgument) and plain.retry_after is None

    class Said:
        def __getattr__(self, name: str) -> Any:
            return getattr(_lib.lib, name)

        def baton_error_retry_after_ms(self, err: int) -> int:
            return 2500

    monkeypatch.setattr(_errors, "lib", Said())
    said = _errors.from_handle(error_handle())
    assert isinstance(said, baton.InvalidArgument) and said.retry_after == timedelta(milliseconds=2500)


def test_durations_and_lease_values() -> None:
    with baton.connect("memory:") as c:
        for ttl, ms in [("1m30s", 90_000), (timedelta(seconds=2), 2000), ("500ms", 500)]:
            lease = c.try_acquire("d", ttl=ttl)
            assert lease.ttl == timedelta(milliseconds=ms)
            assert 0 < lease.local_deadline - time.monotonic() <= ms / 1000
            assert not lease.lost and lease.holds == 1 and lease.capacity == 1
            assert len(lease.token) == 32
            c.release(lease)
        with c.acquire("d", wait="0") as lease:  # a plain lease as a context
            assert c.describe("d").holders[0].fencing_token == lease.fencing_token
        assert c.describe("d").is_free
        r1 = c.try_acquire("r", reentrancy_key="job-1")
        r2 = c.try_acquire("r", reentrancy_key="job-1")
        assert r2.holds == 2 and r1.fencing_token == r2.fencing_token
        token = baton.random_token()
        t1 = c.try_acquire("t", token=token)
        assert t1.token == token
        assert c.release(baton.Lease.from_token("t", token))  # by token alone
        assert baton.library_version == baton.__version__


def test_blocking_call_releases_the_gil(batond: Store) -> None:
    """While a thread waits in acquire (inside the library), this thread
    runs Python and talks to the store: the wait holds no GIL."""
    name = batond.name("gil")
    with batond.connect() as c:
        holder = c.acquire(name)
        got: List[baton.Lease] = []
        t = threading.Thread(target=lambda: got.append(c.acquire(name, wait="20s")))
        t.start()
        wait_until(lambda: len(c.describe(name).waiters) == 1, what="the waiter queued")
        for _ in range(5):
            c.release(c.try_acquire(batond.name("gil-other")))
        assert t.is_alive() and len(c.describe(name).waiters) == 1
        c.release(holder)
        t.join(30)
        assert got and got[0].fencing_token > holder.fencing_token
        c.release(got[0])


def in_child(body: Callable[[], str]) -> str:
    """What body() returns (or raises) in a child of os.fork()."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, then _exit
        os.close(r)
        try:
            out = body()
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            out = f"{type(e).__name__}: {e}"
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        report = f.read()
    os.waitpid(pid, 0)
    return report


@pytest.mark.needs_batond
def test_fork_child_is_refused_and_may_open_its_own(batond: Store) -> None:
    name = batond.name("fork")
    with batond.connect() as c:
        lease = c.acquire(name)

        def child() -> str:
            try:
                c.try_acquire(name + "-child")
                return "the parent's client worked in the child"
            except baton.InvalidArgument as e:
                if "fork()" not in str(e) or str(os.getpid()) not in str(e):
                    return f"unclear message: {e}"
            own = baton.connect(batond.url)
            with pytest.raises(baton.NotAcquired):
                own.try_acquire(name)  # the parent holds it
            own.release(own.try_acquire(name + "-child"))
            own.close()
            asyncio.run(_aio_round(batond.url, name + "-child-aio"))
            return "ok"

        assert in_child(child) == "ok"
        assert c.release(lease)  # the parent's client is untouched


async def _aio_round(url: str, name: str) -> None:
    async with baton.aio.connect(url) as c:
        await c.release(await c.try_acquire(name))


def test_aio_client_refused_after_fork() -> None:
    client = baton.aio.connect("memory:")

    def child() -> str:
        try:
            asyncio.run(client.try_acquire("x"))
            return "worked"
        except baton.InvalidArgument as e:
            return "ok" if "fork()" in str(e) else str(e)

    assert in_child(child) == "ok"
