"""baton.aio: cancellation and timeouts leave no trace; the loop never waits."""

from __future__ import annotations

import asyncio
import time
import warnings
from typing import List

import pytest

import baton
import baton.aio
from conftest import Store


def run(coro: "asyncio.Future[None]") -> None:  # type: ignore[type-arg]
    asyncio.run(asyncio.wait_for(coro, 60))


async def ticks_during(awaitable: "asyncio.Future[object]", every: float = 0.01) -> int:  # type: ignore[type-arg]
    """How many times a 10 ms ticker ran while awaitable was awaited."""
    count = 0

    async def ticker() -> None:
        nonlocal count
        while True:
            await asyncio.sleep(every)
            count += 1

    t = asyncio.ensure_future(ticker())
    try:
        await awaitable
    finally:
        t.cancel()
    return count


async def no_waiters(c: baton.aio.Client, name: str, kind: str) -> bool:
    """The queue of `name` is empty. At once on every store but etcd://,
    where a request withdrawn at a timeout was seen listed by describe for
    a few ms more (2 timeouts of 40, gone 4 ms later, on the 3-member test
    cluster): there it may take up to 200 ms, and a warning says it did."""
    if not (await c.describe(name)).waiters:
        return True
    if kind != "etcd":
        return False
    end = time.monotonic() + 0.2
    while time.monotonic() < end:
        await asyncio.sleep(0.005)
        if not (await c.describe(name)).waiters:
            warnings.warn("etcd://: a withdrawn request was still listed just after the call")
            return True
    return False


def test_cancel_and_timeout_leave_no_trace(store: Store) -> None:
    name = store.name("aio")

    async def main() -> None:
        async with baton.aio.connect(store.url) as c:
            holder = await c.acquire(name, wait="5s", label="holder")
            # 1. Cancelling the task withdraws the waiting request.
            task = asyncio.ensure_future(c.acquire(name, label="cancelled"))
            for _ in range(2500):
                if (await c.describe(name)).waiters:
                    break
                await asyncio.sleep(0.002)
            assert [w.label for w in (await c.describe(name)).waiters] == ["cancelled"]
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await no_waiters(c, name, store.kind)
            assert [h.label for h in (await c.describe(name)).holders] == ["holder"]
            # 2. asyncio.wait_for's timeout cancels the same way.
            t0 = time.monotonic()
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(c.acquire(name, label="timed-out"), 0.3)
            assert time.monotonic() - t0 < 5
            assert await no_waiters(c, name, store.kind)
            # 3. The library's own wait ends with baton.Timeout, withdrawn.
            with pytest.raises(baton.Timeout):
                await c.acquire(name, wait="200ms")
            assert await no_waiters(c, name, store.kind)
            # 4. The event loop ran meanwhile: a blocked acquire does not block it.
            ticks = await ticks_during(
                asyncio.ensure_future(_expect_timeout(c.acquire(name, wait="300ms")))
            )
            assert ticks >= 5, ticks
            assert await c.release(holder)
            info = await c.describe(name)
            assert info.is_free and info.waiters == []

    run(main())


async def _expect_timeout(aw: "asyncio.Future[baton.Lease]") -> None:  # type: ignore[type-arg]
    with pytest.raises(baton.Timeout):
        await aw


def test_lock_context_and_lost_notice(store: Store) -> None:
    name = store.name("aio-lock")

    async def main() -> None:
        c = baton.aio.connect(store.url)
        try:
            async with c.lock(name, ttl="10s", wait="5s") as held:
                assert not held.lost
                other = asyncio.ensure_future(c.acquire(name, wait="5s"))
                await asyncio.sleep(0.05)
                assert not other.done()
            lease = await other  # granted at the release
            assert lease.fencing_token > held.fencing_token
            assert await c.release(lease)
            # The loss reaches the loop through the fd; the block's end raises.
            with pytest.raises(baton.LockLost):
                async with c.lock(name, ttl="500ms", renew_interval="1m") as held:
                    deadline = held.safe_deadline
                    await asyncio.wait_for(held.wait_lost(), 10)
                    assert held.lost and time.monotonic() >= deadline - 0.005
        finally:
            await c.close()

    run(main())


def test_many_waiters_cancelled_at_once(store: Store) -> None:
    """30 waiting acquires in one process with max_threads=10: 10 wait in
    the store (a worker thread each), 20 in the process, unsent. All
    cancelled: none stays queued, and the threads serve new calls."""
    if store.kind not in ("memory", "batond", "redis"):
        pytest.skip("the worker-thread machinery is the package's, not the store's: "
                    "memory:, baton:// and redis:// cover it")
    name = store.name("aio-many")

    async def main() -> None:
        async with baton.aio.connect(store.url, max_threads=10) as c:
            holder = await c.acquire(name)
            tasks = [asyncio.ensure_future(c.acquire(name)) for _ in range(30)]
            for _ in range(2500):
                if len((await c.describe(name)).waiters) == 10:
                    break
                await asyncio.sleep(0.002)
            await asyncio.sleep(0.05)
            assert len((await c.describe(name)).waiters) == 10  # the rest wait unsent
            for t in tasks:
                t.cancel()
            results = await asyncio.gather(*tasks, return_exceptions=True)
            assert all(isinstance(r, asyncio.CancelledError) for r in results)
            assert (await c.describe(name)).waiters == []
            await c.release(holder)
            leases = await asyncio.gather(*[c.acquire(store.name("after")) for _ in range(10)])
            assert len({lease.name for lease in leases}) == 10

    run(main())


def test_elector(store: Store) -> None:
    if store.kind not in ("memory", "batond"):
        pytest.skip("elections per store are covered by the blocking API's test; "
                    "this checks the asyncio wrapper on memory: and baton://")
    group = store.name("aio-elect")

    async def main() -> None:
        async with baton.aio.connect(store.url) as c:
            elected: List[int] = []
            a = c.elector(group, ttl="10s", label="a")
            b = c.elector(group, ttl="10s", label="b",
                          on_elected=lambda lease: elected.append(lease.fencing_token))
            async with a, b:
                term = await a.campaign(wait="5s")
                waiting = asyncio.ensure_future(b.campaign())
                await asyncio.sleep(0.05)
                assert not waiting.done() and a.is_leader
                leader = await b.observe()
                assert leader is not None and leader.label == "a"
                await a.resign()
                term_b = await asyncio.wait_for(waiting, 10)
                assert term_b.fencing_token > term.fencing_token and b.is_leader
                for _ in range(500):
                    if elected:
                        break
                    await asyncio.sleep(0.01)
                assert elected == [term_b.fencing_token]
                # A waiting campaign cancelled: withdrawn, a stays candidate-free.
                waiting_a = asyncio.ensure_future(a.campaign())
                await asyncio.sleep(0.05)
                waiting_a.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiting_a
                info = await c.describe(group)
                assert info.waiters == [] and [h.label for h in info.holders] == ["b"]

    run(main())


def test_plain_lease_contexts() -> None:
    async def main() -> None:
        async with baton.aio.connect("memory:") as c:
            async with await c.try_acquire("ctx") as lease:
                assert not (await c.describe("ctx")).is_free
            assert (await c.describe("ctx")).is_free
            lease = await c.try_acquire("ctx")
            with pytest.raises(TypeError, match="async with"):
                with lease:
                    pass
            assert await c.release(lease)

    run(main())
