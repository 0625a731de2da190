"""Values: durations, leases, lock descriptions, the current leader.

A Lease owns its baton_lease_t (freed when the object is collected); the
other values are copied into Python at once. None of them does I/O.
"""

from __future__ import annotations

import ctypes
import inspect
import time
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, Callable, List, NamedTuple, Optional, Union

from . import _errors
from ._errors import Holder, InvalidArgument, LockLost, holders_of
from ._lib import FOREVER, lib

#: A duration: a string as the CLI writes it ("500ms", "30s", "1m30s") or
#: a datetime.timedelta (whole milliseconds).
Duration = Union[str, timedelta]


@lru_cache(maxsize=256)
def _parse(text: str) -> int:
    ms = ctypes.c_int64()
    _errors.check(lib.baton_parse_duration(text.encode(), ctypes.byref(ms)))
    return ms.value


def to_ms(value: Any, what: str) -> int:
    """Milliseconds of a duration argument; `what` names it in errors.
    Ranges (a TTL of 1 ms .. 7 days, no negative wait) are the library's
    to check, so its messages are the ones raised."""
    if isinstance(value, str):
        if "\0" in value:
            raise InvalidArgument(f"{what}: {value!r} contains a NUL character")
        try:
            return _parse(value)
        except InvalidArgument as e:
            raise InvalidArgument(f"{what}: {e.message}") from None
    if isinstance(value, timedelta):
        us = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
        if us % 1000:
            raise InvalidArgument(
                f"{what}: {value!r} is not a whole number of milliseconds"
            )
        return us // 1000
    raise InvalidArgument(
        f"{what} must be a duration such as \"30s\" or a datetime.timedelta, "
        f"not {value!r} ({type(value).__name__})"
    )


def set_ms(setter: Callable[[Any, int], Any], obj: Any, value: Any, what: str) -> None:
    """setter(obj, ms) with a duration argument, unless it is None."""
    if value is not None:
        _errors.check(setter(obj, to_ms(value, what)))


def wait_ms(value: Any) -> int:
    """A wait: None = no end (BATON_FOREVER), else a duration."""
    return FOREVER if value is None else to_ms(value, "wait")


def encode_name(name: Any, what: str = "lock name") -> bytes:
    """A name for the C ABI. The library checks length and characters; a
    NUL would cut the C string short, so it is refused here."""
    if not isinstance(name, str):
        raise InvalidArgument(f"{what} must be a str, not {type(name).__name__}")
    if "\0" in name:
        raise InvalidArgument(f"{what} {name!r} contains a NUL character")
    return name.encode()


def text(raw: Optional[bytes]) -> str:
    return raw.decode("utf-8", "replace") if raw else ""


class Lease:
    """A lease as the store granted it (a value: it does no I/O).

    `fencing_token` strictly increases per lock name: send it with every
    write to the protected resource. `lost` is True from the local safe
    deadline on. As a context manager it releases the lease at the end of
    the block and raises LockLost if it was no longer held then.
    """

    __slots__ = ("_ptr", "_owner", "__weakref__")

    def __init__(self, ptr: int, owner: Any = None) -> None:
        self._ptr = ptr
        self._owner = owner  # the client whose release() a `with` calls

    def __del__(self) -> None:
        ptr, self._ptr = self._ptr, 0
        if ptr and lib is not None:
            lib.baton_lease_destroy(ptr)

    @classmethod
    def from_token(cls, name: str, token: str, ttl: Duration = "30s") -> "Lease":
        """A lease known by name and owner token only (fencing token 0, no
        local deadline): to release or extend what another process acquired."""
        if not isinstance(token, str):
            raise InvalidArgument(f"owner token must be a str, not {type(token).__name__}")
        out = ctypes.c_void_p()
        _errors.check(
            lib.baton_lease_new(
                encode_name(name), encode_name(token, "owner token"),
                to_ms(ttl, "ttl"), ctypes.byref(out),
            )
        )
        return cls(out.value or 0)

    @property
    def name(self) -> str:
        return text(lib.baton_lease_name(self._ptr))

    @property
    def token(self) -> str:
        """The owner token (32 hex digits): a secret, whoever has it can release."""
        return text(lib.baton_lease_token(self._ptr))

    @property
    def fencing_token(self) -> int:
        return int(lib.baton_lease_fencing_token(self._ptr))

    @property
    def ttl(self) -> timedelta:
        return timedelta(milliseconds=lib.baton_lease_ttl_ms(self._ptr))

    @property
    def holds(self) -> int:
        return int(lib.baton_lease_holds(self._ptr))

    @property
    def capacity(self) -> int:
        return int(lib.baton_lease_capacity(self._ptr))

    @property
    def shared(self) -> bool:
        return bool(lib.baton_lease_shared(self._ptr))

    @property
    def local_deadline(self) -> float:
        """The local safe deadline on time.monotonic()'s clock (0.0: none)."""
        return int(lib.baton_lease_local_deadline_ns(self._ptr)) / 1e9

    @property
    def time_left(self) -> timedelta:
        """Until the local safe deadline (never negative)."""
        return timedelta(milliseconds=lib.baton_lease_time_left_ms(self._ptr))

    @property
    def lost(self) -> bool:
        """True from the local safe deadline on: treat the lease as gone."""
        deadline = lib.baton_lease_local_deadline_ns(self._ptr)
        return bool(deadline != 0 and time.monotonic_ns() >= deadline)

    @property
    def store_expires_at(self) -> datetime:
        """The store's own expiry on the store's clock (informational)."""
        ms = lib.baton_lease_store_expires_at_ms(self._ptr)
        return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)

    def __repr__(self) -> str:
        return (
            f"<baton.Lease {self.name!r} fencing_token={self.fencing_token} "
            f"holds={self.holds} shared={self.shared} time_left={self.time_left}>"
        )

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc: Any) -> None:
        release = getattr(self._owner, "release", None)
        if release is None:
            return  # a lease made by hand or a snapshot: nobody to release it
        if inspect.iscoroutinefunction(release):
            raise TypeError("a lease of a baton.aio client is released by `async with`")
        if not release(self):
            raise lost_error(self.name, self.fencing_token, "the lease")

    async def __aenter__(self) -> "Lease":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        release = getattr(self._owner, "release", None)
        if release is None:
            return
        released = release(self)
        if inspect.isawaitable(released):
            released = await released
        if not released:
            raise lost_error(self.name, self.fencing_token, "the lease")


def lost_error(name: str, fencing_token: int, what: str) -> LockLost:
    return LockLost(
        f'{what} on "{name}" (fencing token {fencing_token}) was no longer '
        "held when the block ended: it was lost at its local safe deadline "
        "or by a renewal the store refused, so another holder may have "
        "overlapped the end of the block"
    )


def leases_of_list(lst: int, owner: Any) -> List[Lease]:
    """Copies the leases of a baton_lease_list_t (which this frees)."""
    try:
        return [
            Lease(lib.baton_lease_copy(lib.baton_lease_list_get(lst, i)), owner)
            for i in range(lib.baton_lease_list_count(lst))
        ]
    finally:
        lib.baton_lease_list_destroy(lst)


class Waiter(NamedTuple):
    label: str
    waited: timedelta
    all_or_nothing: bool
    shared: bool


class LockInfo(NamedTuple):
    """describe(): holders, waiters in queue order, the last fencing token."""

    name: str
    capacity: int
    last_fencing_token: int
    is_free: bool
    holders: List[Holder]
    waiters: List[Waiter]


def lock_info_of(p: int) -> LockInfo:
    """A LockInfo from a borrowed baton_lock_info_t*."""
    return LockInfo(
        text(lib.baton_lock_info_name(p)),
        int(lib.baton_lock_info_capacity(p)),
        int(lib.baton_lock_info_last_fencing_token(p)),
        bool(lib.baton_lock_info_is_free(p)),
        holders_of(lib.baton_lock_info_holders(p)),
        [
            Waiter(
                text(lib.baton_lock_info_waiter_label(p, i)),
                timedelta(milliseconds=lib.baton_lock_info_waiter_waited_ms(p, i)),
                bool(lib.baton_lock_info_waiter_all_or_nothing(p, i)),
                bool(lib.baton_lock_info_waiter_shared(p, i)),
            )
            for i in range(lib.baton_lock_info_waiter_count(p))
        ],
    )


class Leader(NamedTuple):
    """The current leader of an election, as observed."""

    label: str
    fencing_token: int  # the term
    time_left: timedelta


class Grant(NamedTuple):
    """acquire_some(): the leases granted so far, the names still queued,
    and the reservation to pass again to ask for the rest."""

    leases: List[Lease]
    pending: List[str]
    reservation: str
