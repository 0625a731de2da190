"""Kept leases (renewed in the background), counters, cancel switches."""

from __future__ import annotations

import os
import select
import time
from ctypes import byref, c_int, c_int64, c_void_p
from datetime import timedelta
from typing import Any, Callable, Optional

from ._errors import InvalidArgument
from ._handle import Closing, Handle, new_eventfd, notifier
from ._lib import lib
from ._values import Lease, lost_error, text


class Cancel:
    """A one-shot stop switch for blocking calls (acquire, acquire_shared,
    acquire_some, acquire_all, lock, campaign). request() from any thread
    makes every call given it withdraw its request (nothing stays queued)
    and raise Cancelled within about one store round trip; it never blocks
    and does no I/O, so an event loop or a signal handler's thread may call
    it."""

    __slots__ = ("_ptr",)

    def __init__(self) -> None:
        self._ptr = lib.baton_cancel_new()
        if not self._ptr:
            raise MemoryError("baton_cancel_new")

    def request(self) -> None:
        lib.baton_cancel_request(self._ptr)

    @property
    def requested(self) -> bool:
        return bool(lib.baton_cancel_requested(self._ptr))

    def __del__(self) -> None:
        # Calls using it keep what they need, so this is safe at any time.
        ptr, self._ptr = self._ptr, 0
        if ptr and lib is not None:
            lib.baton_cancel_destroy(ptr)


class HeldLease:
    """A lease renewed in the background (extend-to every TTL/3) with a lost
    notice. `lost` reads the library's flag: True once the lease is lost or
    released, and from the local safe deadline on at the latest, whatever
    the store does. As a context manager it releases at the end of the
    block and raises LockLost if the lease was lost before."""

    def __init__(self, keeper: int, fd: int, on_lost: Optional[Callable[["HeldLease"], None]]) -> None:
        def destroy(ptr: int) -> None:
            lib.baton_keeper_destroy(ptr)  # no notice is written after this
            os.close(fd)

        self._h = Handle(keeper, destroy, "keeper")
        self._fd = fd
        self._released: Optional[bool] = None
        self.lease = self.snapshot()  # as granted (name, tokens)
        self.name = self.lease.name
        self.fencing_token = self.lease.fencing_token
        self.token = self.lease.token
        # on_lost runs once, on the notifier thread: when the fd says so,
        # or, if the lease was lost but closed before that, after the close.
        self._on_lost = [on_lost] if on_lost is not None else []
        if on_lost is not None:
            notifier().add(fd, self._notify, repeat=False)

    def _notify(self) -> None:
        try:
            fn = self._on_lost.pop()  # atomic: exactly one caller gets it
        except IndexError:
            return
        fn(self)

    @property
    def lost(self) -> bool:
        """True once lost (or released); the library sets it at the local
        safe deadline at the latest. Lock-free: read it as often as needed."""
        return self._h.read(lambda p: bool(lib.baton_keeper_lost(p)), True)

    @property
    def safe_deadline(self) -> float:
        """The current local safe deadline on time.monotonic()'s clock; it
        moves with every renewal (0.0 once closed)."""
        return self._h.read(lambda p: int(lib.baton_keeper_safe_deadline_ns(p)) / 1e9, 0.0)

    @property
    def time_left(self) -> timedelta:
        left = self.safe_deadline - time.monotonic()
        return timedelta(seconds=max(0.0, left))

    @property
    def lost_fd(self) -> int:
        """An eventfd that becomes readable at the loss (for event loops)."""
        return self._fd

    def snapshot(self) -> Lease:
        """The lease as last renewed."""
        out = c_void_p()
        self._h.call(lib.baton_keeper_lease, byref(out))
        return Lease(out.value or 0)

    def wait_lost(self, timeout: Optional[float] = None) -> bool:
        """Blocks (GIL released) until the lease is lost or `timeout`
        seconds pass; returns `lost`."""
        end = None if timeout is None else time.monotonic() + timeout
        while not self.lost:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                return False
            # The fd is written just after the flag is set; a short slice
            # also covers a release on another thread (no fd write then).
            try:
                select.select([self._fd], [], [], 0.05 if left is None else min(left, 0.05))
            except (OSError, ValueError):  # closed by another thread: lost is True
                pass
        return True

    def release(self) -> bool:
        """Stops renewal and releases: True if the lease was still held,
        False if it had been lost (the store is not asked then)."""
        if self._released is not None:
            return self._released
        released = c_int()
        self._h.call(lib.baton_keeper_release, byref(released))
        self._released = bool(released.value)
        return self._released

    def close(self) -> None:
        """Stops renewal (releasing if still held) and frees the keeper."""
        if self._on_lost:
            n = notifier()
            n.remove(self._fd)
            if self._released is False or (self._released is None and self.lost):
                n.call(self._notify)  # lost, and perhaps not yet told
            else:
                self._on_lost.clear()  # released while held: no notice
        # Destroys the keeper (releasing a lease still held) and closes the
        # fd once no call on it runs.
        self._h.close()

    def __enter__(self) -> "HeldLease":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            released = self.release()
        finally:
            self.close()
        if not released:
            raise lost_error(self.name, self.fencing_token, "the kept lease")

    def __repr__(self) -> str:
        return f"<baton.HeldLease {self.name!r} fencing_token={self.fencing_token} lost={self.lost}>"


class LockRequest:
    """What client.lock() returns: acquires on entering the `with` block."""

    def __init__(self, make: Callable[[int], int], on_lost: Optional[Callable[[HeldLease], None]]) -> None:
        self._make = make
        self._on_lost = on_lost
        self._held: Optional[HeldLease] = None

    def __enter__(self) -> HeldLease:
        if self._held is not None:
            raise InvalidArgument("this lock request was already entered")
        fd = new_eventfd()
        try:
            keeper = self._make(fd)
        except BaseException:
            os.close(fd)
            raise
        self._held = HeldLease(keeper, fd, self._on_lost)
        return self._held

    def __exit__(self, *exc: Any) -> None:
        assert self._held is not None
        self._held.__exit__(*exc)


class Counter(Closing):
    """An atomic int64 stored beside the locks. Each call is one store
    operation, never retried (a lost reply leaves its effect unknown)."""

    def __init__(self, ptr: int) -> None:
        self._h = Handle(ptr, lib.baton_counter_destroy, "counter")
        self.name = text(lib.baton_counter_name(ptr))

    def _op(self, fn: Callable[..., Optional[int]], *args: Any) -> int:
        value = c_int64()
        self._h.call(fn, *args, byref(value))
        return int(value.value)

    def get(self) -> int:
        """The value (0 if never written)."""
        return self._op(lib.baton_counter_get)

    def add(self, delta: int = 1) -> int:
        """Adds delta (may be negative); returns the new value."""
        return self._op(lib.baton_counter_add, _int64(delta, "delta"))

    def take(self, n: int = 1) -> int:
        """Takes n >= 1 only if the value stays >= 0 (else NotAcquired and
        nothing changes); returns the new value."""
        return self._op(lib.baton_counter_take, _int64(n, "n"))

    def close(self) -> None:
        self._h.close()

    def __repr__(self) -> str:
        return f"<baton.Counter {self.name!r}>"


def _int64(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{what} must be an int, not {value!r}")
    if not -(2**63) <= value < 2**63:
        raise InvalidArgument(f"{what} {value} does not fit in 64 bits")
    return value
