"""asyncio mirror of the baton API (as redis.asyncio is of redis).

    import baton.aio
    client = baton.aio.connect("baton://127.0.0.1:7420")   # opened on first use
    async with client.lock("nightly", ttl="30s", wait="10s") as lease:
        await write(lease.fencing_token)                      # lease.lost, await lease.wait_lost()
    lease = await client.acquire("jobs/7", wait="5s")

The C ABI is blocking, so every call that talks to the store runs on a
worker thread of the client's pool (the GIL is released while the library
works) and the event loop never waits for the store. A waiting acquire
holds one worker thread for as long as it waits; `max_threads` (default
1024) bounds how many wait at once, later ones queue in the process
(nothing sent yet). The other calls have a pool of their own
(`call_threads`, default 32), so waiters never hold up a release. Cancelling the awaiting task (task.cancel(), asyncio.timeout,
asyncio.wait_for) requests the call's baton.Cancel from the event loop:
the library withdraws the request (nothing stays queued in the store) and
the task raises CancelledError once the withdrawal is done; a lease
granted just before the cancellation is released.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Callable, Generator, List, Optional, Sequence, TypeVar

from . import _client, _handle
from ._client import random_token
from ._elector import Elector as _SyncElector
from ._errors import (BatonError, Cancelled, Holder, InternalError, InvalidArgument,
                      LockLost, NotAcquired, PermissionDenied, Timeout, Unavailable,
                      Unsupported)
from ._handle import eventfd_read, new_eventfd
from ._held import Cancel, HeldLease as _SyncHeld
from ._held import Counter as _SyncCounter
from ._workers import Job, Workers
from ._values import Duration, Grant, Leader, Lease, LockInfo, Waiter, lost_error

T = TypeVar("T")

# The same names as baton's (the exceptions are the same classes).
__all__ = [
    "BatonError", "Cancel", "Cancelled", "Client", "Counter", "Duration", "Elector",
    "Grant", "HeldLease", "Holder", "InternalError", "InvalidArgument", "Leader", "Lease",
    "LockInfo", "LockLost", "NotAcquired", "PermissionDenied", "Timeout", "Unavailable",
    "Unsupported", "Waiter", "connect", "random_token",
]


async def _uncancellable(fut: "asyncio.Future[T]") -> None:
    """Waits until fut is done, whatever cancellations come meanwhile."""
    while not fut.done():
        try:
            await asyncio.shield(fut)
        except BaseException:  # noqa: B036 - the caller re-raises its own
            pass


def _threads(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{what} must be an int >= 1, not {value!r}")
    return value


class _Pool:
    """The worker threads of one client, refused after fork(). Waiting calls
    (acquire with a wait, lock, campaign) and the others (try_acquire,
    release, describe, ...: each bounded by the request timeout) have pools
    of their own, so that waiters never keep a release or a describe from
    running (a release stuck behind the waiters it would grant: deadlock)."""

    def __init__(self, max_threads: int, call_threads: int) -> None:
        self._waits = Workers(_threads(max_threads, "max_threads"))
        self._calls = Workers(_threads(call_threads, "call_threads"))
        self._pid = os.getpid()
        self._generation = _handle.fork_generation

    def run(self, fn: Callable[..., T], *args: Any) -> "asyncio.Future[T]":
        """fn(*args) on a call thread."""
        return self._submit(self._calls, fn, *args).fut

    def _submit(self, pool: Workers, fn: Callable[..., T], *args: Any) -> Job[T]:
        if self._generation != _handle.fork_generation:
            raise InvalidArgument(
                f"this baton.aio client was made in process {self._pid} and is "
                f"used in process {os.getpid()} after fork(): its worker threads "
                "and connections stay with the parent; open a new client in the child"
            )
        return pool.submit(fn, *args)

    async def blocking(self, call: Callable[[Cancel], T], undo: Callable[[T], Any]) -> T:
        """Runs call(cancel) on a worker; if the awaiting task is cancelled,
        requests the cancel, waits for the withdrawal, undoes a result that
        arrived anyway, and re-raises the cancellation."""
        cancel = Cancel()
        job = self._submit(self._waits, call, cancel)
        fut = job.fut
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            cancel.request()
            if job.claim():
                raise  # still queued in this process: nothing was sent
            await _uncancellable(fut)
            if not fut.cancelled() and fut.exception() is None:
                await _uncancellable(self.run(undo, fut.result()))
            raise

    def shutdown(self) -> None:
        self._waits.shutdown()
        self._calls.shutdown()


class HeldLease:
    """A lease renewed in the background (see baton.HeldLease); the loss is
    delivered to the event loop through an eventfd (loop.add_reader), never
    by running Python on the library's notice thread."""

    def __init__(self, held: _SyncHeld, pool: _Pool) -> None:
        self._held = held
        self._pool = pool
        self.lease, self.name = held.lease, held.name
        self.fencing_token, self.token = held.fencing_token, held.token
        self._event = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(held.lost_fd, self._on_fd)

    def _on_fd(self) -> None:
        self._loop.remove_reader(self._held.lost_fd)
        self._event.set()

    @property
    def lost(self) -> bool:
        """True once lost (or released); at the local safe deadline at the latest."""
        return self._held.lost

    @property
    def safe_deadline(self) -> float:
        return self._held.safe_deadline

    async def wait_lost(self) -> None:
        """Returns when the lease is lost (or released)."""
        if not self.lost:
            await self._event.wait()

    async def release(self) -> bool:
        """Stops renewal and releases: True if still held, False if lost."""
        return await self._pool.run(self._held.release)

    async def close(self) -> None:
        if not self._event.is_set():
            self._loop.remove_reader(self._held.lost_fd)
            self._event.set()
        await self._pool.run(self._held.close)

    async def __aenter__(self) -> "HeldLease":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            released = await self.release()
        finally:
            await self.close()
        if not released:
            raise lost_error(self.name, self.fencing_token, "the kept lease")


class _LockRequest:
    def __init__(
        self, client: "Client", make: Callable[[_client.Client, Cancel, int], int]
    ) -> None:
        self._client, self._make = client, make
        self._held: Optional[HeldLease] = None

    async def __aenter__(self) -> HeldLease:
        client = await self._client._open()
        fd = new_eventfd()
        handed: List[_SyncHeld] = []  # once made, the keeper closes fd

        def call(cancel: Cancel) -> _SyncHeld:
            keeper = self._make(client, cancel, fd)
            handed.append(_SyncHeld(keeper, fd, None))
            return handed[0]

        def undo(held: _SyncHeld) -> None:
            held.close()  # releases: the task was cancelled meanwhile

        try:
            held = await self._client._pool.blocking(call, undo)
        except BaseException:
            if not handed:
                os.close(fd)
            raise
        self._held = HeldLease(held, self._client._pool)
        return self._held

    async def __aexit__(self, *exc: Any) -> None:
        assert self._held is not None
        await self._held.__aexit__(*exc)


class Counter:
    def __init__(self, counter: _SyncCounter, pool: _Pool) -> None:
        self._c, self._pool, self.name = counter, pool, counter.name

    async def get(self) -> int:
        return await self._pool.run(self._c.get)

    async def add(self, delta: int = 1) -> int:
        return await self._pool.run(self._c.add, delta)

    async def take(self, n: int = 1) -> int:
        return await self._pool.run(self._c.take, n)

    def close(self) -> None:
        self._c.close()


class Elector:
    """baton.Elector for asyncio: campaign() is cancellable like acquire;
    on_elected and on_new_leader are called on the event loop (handed over
    with call_soon_threadsafe), on_lost through the elector's lost fd."""

    def __init__(self, client: "Client", group: str, **options: Any) -> None:
        self._client, self._group, self._options = client, group, options
        self._e: Optional[_SyncElector] = None
        self._fd = -1
        self.lost_event = asyncio.Event()

    async def _get(self) -> _SyncElector:
        if self._e is not None:
            return self._e
        sync = await self._client._open()
        loop = asyncio.get_running_loop()
        opts = dict(self._options)
        for key in ("on_elected", "on_new_leader"):
            fn = opts.get(key)
            if fn is not None:
                opts[key] = lambda arg, fn=fn: loop.call_soon_threadsafe(fn, arg)
        on_lost = opts.pop("on_lost", None)
        self._fd = new_eventfd()
        e = _SyncElector(sync, self._group, lost_fd=self._fd, **opts)

        def readable() -> None:
            try:
                eventfd_read(self._fd)
            except BlockingIOError:
                return
            self.lost_event.set()
            if on_lost is not None:
                on_lost(self)

        loop.add_reader(self._fd, readable)
        self._loop, self._e = loop, e
        return e

    async def campaign(self, wait: Optional[Duration] = None) -> Lease:
        e = await self._get()
        self.lost_event.clear()
        return await self._client._pool.blocking(
            lambda cancel: e.campaign(wait, cancel), lambda _lease: e.resign()
        )

    async def resign(self) -> None:
        e = await self._get()
        await self._client._pool.run(e.resign)

    async def observe(self) -> Optional[Leader]:
        e = await self._get()
        return await self._client._pool.run(e.observe)

    @property
    def is_leader(self) -> bool:
        return self._e is not None and self._e.is_leader

    @property
    def lost(self) -> bool:
        return self._e is None or self._e.lost

    async def close(self) -> None:
        if self._e is not None:
            self._loop.remove_reader(self._fd)
            await self._client._pool.run(self._e.close)
            os.close(self._fd)
            self._e = None

    async def __aenter__(self) -> "Elector":
        await self._get()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class Client:
    """baton.Client for asyncio: the same methods, as coroutines. The store
    is opened on a worker thread at the first call (or by `await client`,
    `await client.open()`, `async with client`)."""

    def __init__(self, url: str, max_threads: int, call_threads: int, options: Any) -> None:
        self._url, self._options = url, options
        self._pool = _Pool(max_threads, call_threads)
        self._sync: Optional[_client.Client] = None
        self._opening: Optional["asyncio.Future[int]"] = None

    async def _open(self) -> _client.Client:
        if self._sync is not None:
            return self._sync
        if self._opening is None:
            self._opening = asyncio.ensure_future(
                self._pool.run(_client.open_client, self._url, *self._options)
            )
        fut = self._opening
        try:
            ptr = await asyncio.shield(fut)
        except BaseException:
            if fut.done() and (fut.cancelled() or fut.exception() is not None):
                self._opening = None  # a later call tries again
            raise
        if self._sync is None:
            self._sync = _client.Client(ptr, owner=self)
        return self._sync

    async def open(self) -> "Client":
        await self._open()
        return self

    def __await__(self) -> Generator[Any, None, "Client"]:
        return self.open().__await__()

    async def __aenter__(self) -> "Client":
        return await self.open()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        if self._sync is not None:
            await self._pool.run(self._sync.close)
        self._pool.shutdown()

    async def _run(self, method: str, *args: Any, **kw: Any) -> Any:
        c = await self._open()
        fn = getattr(c, method)
        return await self._pool.run(lambda: fn(*args, **kw))

    async def _wait(self, method: str, undo: Callable[[Any], Any], *args: Any, **kw: Any) -> Any:
        c = await self._open()
        fn = getattr(c, method)
        return await self._pool.blocking(lambda cancel: fn(*args, cancel=cancel, **kw), undo)

    def _undo(self, lease: Lease) -> None:
        assert self._sync is not None
        self._sync.release(lease)

    def _undo_all(self, leases: Any) -> None:
        for lease in leases.leases if isinstance(leases, Grant) else leases:
            self._undo(lease)

    async def try_acquire(
        self, name: str, *, ttl: Duration = "30s", capacity: int = 1,
        label: Optional[str] = None, reentrancy_key: Optional[str] = None,
        token: Optional[str] = None,
    ) -> Lease:
        lease: Lease = await self._run(
            "try_acquire", name, ttl=ttl, capacity=capacity, label=label,
            reentrancy_key=reentrancy_key, token=token,
        )
        return lease

    async def acquire(
        self, name: str, *, wait: Optional[Duration] = None, ttl: Duration = "30s",
        capacity: int = 1, label: Optional[str] = None,
        reentrancy_key: Optional[str] = None, token: Optional[str] = None,
    ) -> Lease:
        """Waits in FIFO order up to `wait`; cancelling the task withdraws it."""
        lease: Lease = await self._wait(
            "acquire", self._undo, name, wait=wait, ttl=ttl, capacity=capacity,
            label=label, reentrancy_key=reentrancy_key, token=token,
        )
        return lease

    async def acquire_shared(
        self, name: str, *, wait: Optional[Duration] = None, ttl: Duration = "30s",
        label: Optional[str] = None, token: Optional[str] = None,
    ) -> Lease:
        lease: Lease = await self._wait(
            "acquire_shared", self._undo, name, wait=wait, ttl=ttl, label=label, token=token
        )
        return lease

    async def acquire_some(
        self, names: Sequence[str], *, wait: Optional[Duration] = None,
        reservation: Optional[str] = None, ttl: Duration = "30s", capacity: int = 1,
        label: Optional[str] = None,
    ) -> Grant:
        grant: Grant = await self._wait(
            "acquire_some", self._undo_all, names, wait=wait, reservation=reservation,
            ttl=ttl, capacity=capacity, label=label,
        )
        return grant

    async def acquire_all(
        self, names: Sequence[str], *, wait: Optional[Duration] = None,
        ttl: Duration = "30s", capacity: int = 1, label: Optional[str] = None,
    ) -> List[Lease]:
        leases: List[Lease] = await self._wait(
            "acquire_all", self._undo_all, names, wait=wait, ttl=ttl, capacity=capacity,
            label=label,
        )
        return leases

    async def extend(self, lease: Lease, ttl: Optional[Duration] = None) -> Lease:
        renewed: Lease = await self._run("extend", lease, ttl)
        return renewed

    async def release(self, lease: Lease) -> bool:
        return bool(await self._run("release", lease))

    async def describe(self, name: str) -> LockInfo:
        info: LockInfo = await self._run("describe", name)
        return info

    async def list(self, prefix: str = "", limit: int = 1000) -> "List[LockInfo]":
        infos: List[LockInfo] = await self._run("list", prefix, limit)
        return infos

    def lock(
        self, name: str, *, ttl: Duration = "30s", wait: Optional[Duration] = None,
        shared: bool = False, capacity: int = 1, label: Optional[str] = None,
        reentrancy_key: Optional[str] = None, renew_interval: Optional[Duration] = None,
    ) -> _LockRequest:
        """`async with client.lock(name, ttl="30s", wait="10s") as lease:`"""
        return _LockRequest(
            self,
            lambda c, cancel, fd: c.keep_new(
                name, wait, shared, ttl, capacity, label, reentrancy_key,
                renew_interval, cancel, fd,
            ),
        )

    async def counter(self, name: str) -> Counter:
        c = await self._open()
        return Counter(c.counter(name), self._pool)

    def elector(self, group: str, **options: Any) -> Elector:
        """A candidate for leadership of `group` (options as baton.Elector)."""
        return Elector(self, group, **options)


def connect(
    url: str, *, label: Optional[str] = None, request_timeout: Optional[Duration] = None,
    retry_interval: Optional[Duration] = None, max_retries: Optional[int] = None,
    drift: Optional[Any] = None, max_threads: int = 1024, call_threads: int = 32,
) -> Client:
    """An asyncio client for `url`; nothing is sent until the first call.
    `max_threads`: waiting calls that may wait at once (one thread each;
    later ones queue in the process, unsent); `call_threads`: the other
    calls at once."""
    return Client(
        url, max_threads, call_threads, (label, request_timeout, retry_interval, max_retries, drift)
    )
