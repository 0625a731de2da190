"""One exception hierarchy for every error code of the C ABI.

Each exception carries the library's own message (it names the problem
and the value), its code name ("not_acquired", ...) and whether repeating
the same call may succeed, and when the store expects to answer if it
said so (retry_after). NotAcquired also carries the holders.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Dict, List, NamedTuple, Optional, Type

from . import _lib
from ._lib import lib



class Holder(NamedTuple):
    """One holder of a lock, as describe() and NotAcquired report it."""

    label: str
    fencing_token: int
    time_left: timedelta  # in store time
    holds: int
    shared: bool


class BatonError(Exception):
    """Base of every error the library reports."""

    code: str = "internal"
    retryable: bool = False

    def __init__(self, message: str, *, retry_after: Optional[timedelta] = None) -> None:
        super().__init__(message)
        self.message = message
        # With Unavailable: how long until the store expects to answer
        # (redlock:// while restarted masters serve their restart_guard);
        # None if it did not say.
        self.retry_after: Optional[timedelta] = retry_after


class NotAcquired(BatonError):
    """The lock is held by others (see .holders); nothing was left queued."""

    code = "not_acquired"
    retryable = True

    def __init__(
        self,
        message: str,
        holders: Optional[List[Holder]] = None,
        *,
        retry_after: Optional[timedelta] = None,
    ) -> None:
        super().__init__(message, retry_after=retry_after)
        self.holders: List[Holder] = holders or []


class Timeout(BatonError, TimeoutError):
    """The wait ended before a grant; the request was withdrawn."""

    code = "timeout"
    retryable = True


class LockLost(BatonError):
    """The lease is no longer held (expired, or taken over after expiry)."""

    code = "lock_lost"


class InvalidArgument(BatonError, ValueError):
    """Bad input; nothing was changed or sent."""

    code = "invalid_argument"


class Unavailable(BatonError, ConnectionError):
    """The store could not be reached; repeating the call is safe."""

    code = "unavailable"
    retryable = True


class PermissionDenied(BatonError, PermissionError):
    """Authentication or authorization failed."""

    code = "permission_denied"


class InternalError(BatonError):
    """A bug in baton: please report it."""

    code = "internal"


class Cancelled(BatonError):
    """A Cancel ended the wait; the request was withdrawn."""

    code = "cancelled"


class Unsupported(BatonError, NotImplementedError):
    """The store lacks the feature (shared locks on a store without them)."""

    code = "unsupported"


_BY_CODE: Dict[int, Type[BatonError]] = {
    _lib.NOT_ACQUIRED: NotAcquired,
    _lib.TIMEOUT: Timeout,
    _lib.LOCK_LOST: LockLost,
    _lib.INVALID_ARGUMENT: InvalidArgument,
    _lib.UNAVAILABLE: Unavailable,
    _lib.PERMISSION_DENIED: PermissionDenied,
    _lib.INTERNAL: InternalError,
    _lib.CANCELLED: Cancelled,
    _lib.UNSUPPORTED: Unsupported,
}


def _text(raw: Optional[bytes]) -> str:
    return raw.decode("utf-8", "replace") if raw else ""


def holders_of(h: Optional[int]) -> List[Holder]:
    """The holders list of a baton_holders_t* (borrowed)."""
    if not h:
        return []
    return [
        Holder(
            _text(lib.baton_holders_label(h, i)),
            lib.baton_holders_fencing_token(h, i),
            timedelta(milliseconds=lib.baton_holders_time_left_ms(h, i)),
            lib.baton_holders_holds(h, i),
            bool(lib.baton_holders_shared(h, i)),
        )
        for i in range(lib.baton_holders_count(h))
    ]


def from_handle(err: int) -> BatonError:
    """The exception for a baton_error_t* (which this frees)."""
    try:
        code = lib.baton_error_code(err)
        message = _text(lib.baton_error_message(err))
        cls = _BY_CODE.get(code, InternalError)
        ms = lib.baton_error_retry_after_ms(err)
        retry_after = timedelta(milliseconds=ms) if ms > 0 else None
        if cls is NotAcquired:
            return NotAcquired(
                message, holders_of(lib.baton_error_holders(err)), retry_after=retry_after
            )
        return cls(message, retry_after=retry_after)
    finally:
        lib.baton_error_destroy(err)


def check(err: Optional[int]) -> None:
    """Raises the error a call returned (None / 0 = success)."""
    if err:
        raise from_handle(err)


def invalid(message: str) -> InvalidArgument:
    """A bad argument caught in Python, before the library is called."""
    return InvalidArgument(message)
