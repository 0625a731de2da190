"""The blocking client: baton.connect(url) and what it makes.

Every call releases the GIL while the library works (ctypes does so for
each call), so any number of threads may use one client at once; a
waiting acquire blocks only its own thread.
"""

from __future__ import annotations

import ctypes
from ctypes import byref, c_int, c_void_p
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Optional,
    Sequence,
    Tuple,
)

from . import _errors
from ._errors import InvalidArgument, from_handle
from ._handle import Closing, Handle
from ._held import Cancel, Counter, HeldLease, LockRequest
from ._lib import lib
from ._values import (
    Duration,
    Grant,
    Lease,
    LockInfo,
    encode_name,
    leases_of_list,
    lock_info_of,
    set_ms,
    text,
    to_ms,
    wait_ms,
)

if TYPE_CHECKING:
    from ._elector import Elector

_UINT32_MAX = 2**32 - 1
_OPTIONS_CACHED = 64  # distinct acquire option sets a client keeps made


def _cancel_ptr(cancel: Optional[Cancel]) -> Optional[int]:
    if cancel is None:
        return None
    if not isinstance(cancel, Cancel):
        raise InvalidArgument(f"cancel must be a baton.Cancel, not {type(cancel).__name__}")
    return int(cancel._ptr)


def _int_in(value: Any, what: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{what} must be an int, not {value!r}")
    if not lo <= value <= hi:
        raise InvalidArgument(f"{what} {value} is out of range [{lo}, {hi}]")
    return value


def _opt_text(value: Optional[str], what: str) -> Optional[bytes]:
    return None if value is None else encode_name(value, what)


class _Options:
    """A baton_acquire_options_t made from Python arguments."""

    def __init__(self, ttl: Any, capacity: Any, label: Any, key: Any, token: Any) -> None:
        self.ptr = lib.baton_acquire_options_new()
        if not self.ptr:
            raise MemoryError("baton_acquire_options_new")
        try:
            o = self.ptr
            _errors.check(lib.baton_acquire_options_set_ttl(o, to_ms(ttl, "ttl")))
            cap = _int_in(capacity, "capacity", 0, _UINT32_MAX)
            _errors.check(lib.baton_acquire_options_set_capacity(o, cap))
            _errors.check(lib.baton_acquire_options_set_label(o, _opt_text(label, "label")))
            _errors.check(
                lib.baton_acquire_options_set_reentrancy_key(
                    o, _opt_text(key, "reentrancy key")
                )
            )
            _errors.check(lib.baton_acquire_options_set_token(o, _opt_text(token, "owner token")))
        except BaseException:
            lib.baton_acquire_options_destroy(self.ptr)
            raise


class Client(Closing):
    """A connection to one store. Made by baton.connect(url); thread-safe.

    Closing it (close(), or the end of a `with` block) drops the handle:
    leases it granted are not released (they expire by their TTL), and
    keepers, electors and counters made from it go on working.
    """

    def __init__(self, ptr: int, owner: Any = None) -> None:
        self._opts: Dict[Tuple[Any, ...], int] = {}
        opts = self._opts

        def destroy(p: int) -> None:
            lib.baton_client_destroy(p)
            for o in opts.values():
                lib.baton_acquire_options_destroy(o)
            opts.clear()

        self._h = Handle(ptr, destroy, "client")
        self._owner = self if owner is None else owner  # leases' release()

    # -- plumbing --------------------------------------------------------

    def _call(self, fn: Callable[..., Optional[int]], *args: Any) -> None:
        self._h.call(fn, *args)

    def _options(self, ttl: Any, capacity: Any, label: Any, key: Any, token: Any) -> Tuple[int, bool]:
        """(options, owned): owned ones are freed by the caller after the call;
        the others are kept by the client (calls may share them)."""
        cache_key = (ttl, capacity, label, key)
        # (type(capacity) is int: True == 1 must not find 1's options.)
        cacheable = token is None and type(capacity) is int
        if cacheable:
            try:
                found = self._opts.get(cache_key)
            except TypeError:  # unhashable: let _Options name the problem
                found = None
                cacheable = False
            if found:
                return found, False
        made = _Options(ttl, capacity, label, key, token).ptr
        if cacheable and len(self._opts) < _OPTIONS_CACHED:
            kept = self._opts.setdefault(cache_key, made)
            if kept != made:
                lib.baton_acquire_options_destroy(made)
            return kept, False
        return made, True

    def _lease_call(
        self, fn: Callable[..., Optional[int]], name: Any, wait: Optional[int],
        ttl: Any, capacity: Any, label: Any, key: Any, token: Any, cancel: Optional[Cancel],
    ) -> Lease:
        # The hot path of every acquire: kept to the few steps it needs.
        if type(name) is not str or "\0" in name:
            encode_name(name)  # raises the error naming the problem
        c = None if cancel is None else _cancel_ptr(cancel)
        opts, owned = self._options(ttl, capacity, label, key, token)
        out = c_void_p()
        h = self._h
        ptr = h.enter()
        try:
            if wait is None:
                err = fn(ptr, name.encode(), opts, byref(out))
            else:
                err = fn(ptr, name.encode(), wait, opts, c, byref(out))
        finally:
            h.leave()
            if owned:
                lib.baton_acquire_options_destroy(opts)
        if err:
            raise from_handle(err)
        return Lease(out.value or 0, self._owner)

    # -- properties -------------------------------------------------------

    @property
    def url(self) -> str:
        """The store URL with secrets masked."""
        return self._h.read(lambda p: text(lib.baton_client_url(p)), "")

    @property
    def label(self) -> str:
        """The default owner label ("host:pid:program" unless set)."""
        return self._h.read(lambda p: text(lib.baton_client_label(p)), "")

    # -- locks --------------------------------------------------------------

    def try_acquire(
        self, name: str, *, ttl: Duration = "30s", capacity: int = 1,
        label: Optional[str] = None, reentrancy_key: Optional[str] = None,
        token: Optional[str] = None,
    ) -> Lease:
        """Granted at once, or NotAcquired (with .holders); never waits."""
        return self._lease_call(
            lib.baton_client_try_acquire, name, None, ttl, capacity, label,
            reentrancy_key, token, None,
        )

    def acquire(
        self, name: str, *, wait: Optional[Duration] = None, ttl: Duration = "30s",
        capacity: int = 1, label: Optional[str] = None,
        reentrancy_key: Optional[str] = None, token: Optional[str] = None,
        cancel: Optional[Cancel] = None,
    ) -> Lease:
        """Waits in FIFO order up to `wait` (None: no end; "0": try once).
        Timeout when the wait ends, Cancelled when `cancel` is requested;
        either way the request was withdrawn."""
        return self._lease_call(
            lib.baton_client_acquire, name, wait_ms(wait), ttl, capacity, label,
            reentrancy_key, token, cancel,
        )

    def acquire_shared(
        self, name: str, *, wait: Optional[Duration] = None, ttl: Duration = "30s",
        label: Optional[str] = None, token: Optional[str] = None,
        cancel: Optional[Cancel] = None,
    ) -> Lease:
        """A shared (read) lease: many at once, or one exclusive holder; one
        FIFO queue for both kinds, so writers are not starved."""
        return self._lease_call(
            lib.baton_client_acquire_shared, name, wait_ms(wait), ttl, 1, label,
            None, token, cancel,
        )

    def extend(self, lease: Lease, ttl: Optional[Duration] = None) -> Lease:
        """Extend-to: the lease lasts `ttl` from the store's receipt (None:
        this lease object's TTL). Returns the renewed lease; LockLost if it
        is no longer held (then nothing changes)."""
        _check_lease(lease)
        # None: the TTL of this lease object, as C++'s extend(lease) does (the
        # C ABI's 0 leaves the choice to the store, which may take the TTL of
        # the latest extend).
        ms = int(lib.baton_lease_ttl_ms(lease._ptr)) if ttl is None else to_ms(ttl, "ttl")
        if ms == 0:
            raise InvalidArgument("ttl: 0 is not a lease time (None extends by the lease's own TTL)")
        out = c_void_p()
        self._call(lib.baton_client_extend, lease._ptr, ms, byref(out))
        return Lease(out.value or 0, self._owner)

    def release(self, lease: Lease) -> bool:
        """Gives back one hold: True if it was held, False if it no longer
        was. Another owner's lease is never freed."""
        if type(lease) is not Lease or not lease._ptr:
            _check_lease(lease)
        released = c_int()
        h = self._h
        ptr = h.enter()
        try:
            err = lib.baton_client_release(ptr, lease._ptr, byref(released))
        finally:
            h.leave()
        if err:
            raise from_handle(err)
        return bool(released.value)

    def describe(self, name: str) -> LockInfo:
        """Holders, waiters (queue order) and the last fencing token."""
        out = c_void_p()
        self._call(lib.baton_client_describe, encode_name(name), byref(out))
        try:
            return lock_info_of(out.value or 0)
        finally:
            lib.baton_lock_info_destroy(out)

    def list(self, prefix: str = "", limit: int = 1000) -> List[LockInfo]:
        """Held or waited-on locks whose names start with `prefix`."""
        limit = _int_in(limit, "limit", 0, 2**63 - 1)
        out = c_void_p()
        self._call(lib.baton_client_list, encode_name(prefix, "prefix"), limit, byref(out))
        try:
            return [
                lock_info_of(lib.baton_lock_list_get(out, i))
                for i in range(lib.baton_lock_list_count(out))
            ]
        finally:
            lib.baton_lock_list_destroy(out)

    def _names(self, names: Iterable[str]) -> Tuple[List[str], Any]:
        if isinstance(names, (str, bytes)):
            raise InvalidArgument("names must be a list of lock names, not one string")
        try:
            listed = list(names)
        except TypeError:
            raise InvalidArgument(f"names must be a list of lock names, not {names!r}") from None
        arr = (ctypes.c_char_p * max(1, len(listed)))(*[encode_name(n) for n in listed])
        return listed, arr

    def acquire_some(
        self, names: Sequence[str], *, wait: Optional[Duration] = None,
        reservation: Optional[str] = None, ttl: Duration = "30s", capacity: int = 1,
        label: Optional[str] = None, cancel: Optional[Cancel] = None,
    ) -> Grant:
        """Partial grant: one request per name under one reservation; waits
        up to `wait` for at least one grant. Names not granted stay queued
        until the TTL after this call; pass grant.reservation again to ask
        for them."""
        listed, arr = self._names(names)
        res = random_token() if reservation is None else reservation
        r = encode_name(res, "reservation")
        c = _cancel_ptr(cancel)
        opts, owned = self._options(ttl, capacity, label, None, None)
        out = c_void_p()
        try:
            self._call(
                lib.baton_client_acquire_some, arr, len(listed), r, wait_ms(wait),
                opts, c, byref(out),
            )
        finally:
            if owned:
                lib.baton_acquire_options_destroy(opts)
        leases = leases_of_list(out.value or 0, self._owner)
        got = {lease.name for lease in leases}
        return Grant(leases, [n for n in listed if n not in got], res)

    def acquire_all(
        self, names: Sequence[str], *, wait: Optional[Duration] = None,
        ttl: Duration = "30s", capacity: int = 1, label: Optional[str] = None,
        cancel: Optional[Cancel] = None,
    ) -> List[Lease]:
        """All-or-nothing: every name, or none, within `wait`."""
        listed, arr = self._names(names)
        c = _cancel_ptr(cancel)
        opts, owned = self._options(ttl, capacity, label, None, None)
        out = c_void_p()
        try:
            self._call(
                lib.baton_client_acquire_all, arr, len(listed), wait_ms(wait), opts, c,
                byref(out),
            )
        finally:
            if owned:
                lib.baton_acquire_options_destroy(opts)
        return leases_of_list(out.value or 0, self._owner)

    # -- kept leases, counters, elections ----------------------------------

    def lock(
        self, name: str, *, ttl: Duration = "30s", wait: Optional[Duration] = None,
        shared: bool = False, capacity: int = 1, label: Optional[str] = None,
        reentrancy_key: Optional[str] = None, renew_interval: Optional[Duration] = None,
        cancel: Optional[Cancel] = None, on_lost: Optional[Callable[[HeldLease], None]] = None,
    ) -> LockRequest:
        """`with client.lock(name, ttl="30s", wait="10s") as lease:` acquires
        (waiting up to `wait`), renews in the background every TTL/3 (or
        `renew_interval`), and releases at the end of the block. If the lease
        is lost meanwhile, `lease.lost` becomes True no later than the local
        safe deadline, `on_lost(lease)` is called on baton's notifier thread,
        and leaving the block raises LockLost."""
        return LockRequest(
            lambda fd: self.keep_new(
                name, wait, shared, ttl, capacity, label, reentrancy_key,
                renew_interval, cancel, fd,
            ),
            on_lost,
        )

    def keep_new(
        self, name: Any, wait: Any, shared: bool, ttl: Any, capacity: Any, label: Any,
        key: Any, renew_interval: Any, cancel: Optional[Cancel], fd: int,
    ) -> int:
        """The keeper for lock(): a baton_keeper_t* whose lost notice writes fd."""
        n = encode_name(name)
        w = wait_ms(wait)
        c = _cancel_ptr(cancel)
        ko = _keeper_options(renew_interval, fd)
        opts, owned = self._options(ttl, capacity, label, key, None)
        out = c_void_p()
        try:
            fn = lib.baton_keeper_acquire_shared if shared else lib.baton_keeper_acquire
            self._call(fn, n, w, opts, ko, c, byref(out))
        finally:
            lib.baton_keeper_options_destroy(ko)
            if owned:
                lib.baton_acquire_options_destroy(opts)
        return out.value or 0

    def keep(
        self, lease: Lease, *, renew_interval: Optional[Duration] = None,
        on_lost: Optional[Callable[[HeldLease], None]] = None,
    ) -> HeldLease:
        """Renews a lease already held, in the background (see lock())."""
        _check_lease(lease)

        def make(fd: int) -> int:
            ko = _keeper_options(renew_interval, fd)
            out = c_void_p()
            try:
                self._call(lib.baton_keeper_new, lease._ptr, ko, byref(out))
            finally:
                lib.baton_keeper_options_destroy(ko)
            return out.value or 0

        return LockRequest(make, on_lost).__enter__()

    def counter(self, name: str) -> Counter:
        """An atomic int64 stored beside the locks."""
        out = c_void_p()
        self._call(lib.baton_counter_new, encode_name(name, "counter name"), byref(out))
        return Counter(out.value or 0)

    def elector(self, group: str, **options: Any) -> "Elector":
        """A candidate for leadership of `group`: see baton.Elector."""
        from ._elector import Elector

        return Elector(self, group, **options)

    # -- lifetime -------------------------------------------------------------

    def close(self) -> None:
        self._h.close()

    def __repr__(self) -> str:
        return "<baton.Client closed>" if self._h.closed else f"<baton.Client {self.url}>"


def _check_lease(lease: Any) -> None:
    if not isinstance(lease, Lease) or not lease._ptr:
        raise InvalidArgument(f"expected a baton.Lease, not {lease!r}")


def _keeper_options(renew_interval: Any, fd: int) -> int:
    ko = lib.baton_keeper_options_new()
    if not ko:
        raise MemoryError("baton_keeper_options_new")
    try:
        set_ms(lib.baton_keeper_options_set_renew_interval, ko, renew_interval, "renew_interval")
        _errors.check(lib.baton_keeper_options_set_lost_fd(ko, fd))
    except BaseException:
        lib.baton_keeper_options_destroy(ko)
        raise
    return int(ko)


def random_token() -> str:
    """32 random lowercase hex digits from the kernel: an owner token or a
    reservation to reuse when retrying a call whose outcome is unknown."""
    buf = ctypes.create_string_buffer(33)
    _errors.check(lib.baton_token_random(buf))
    return buf.value.decode()


def connect(
    url: str, *, label: Optional[str] = None, request_timeout: Optional[Duration] = None,
    retry_interval: Optional[Duration] = None, max_retries: Optional[int] = None,
    drift: Optional[Tuple[float, Duration]] = None,
) -> Client:
    """Opens the store at `url` (memory:, baton://host:port, postgres://...,
    redis://..., redlock://h1,h2,h3, zookeeper://..., mysql://..., etcd://...,
    sqlite:///path). InvalidArgument for a bad URL, Unavailable if the store
    cannot be reached."""
    return Client(open_client(url, label, request_timeout, retry_interval, max_retries, drift))


def open_client(
    url: Any, label: Any, request_timeout: Any, retry_interval: Any,
    max_retries: Any, drift: Any,
) -> int:
    u = encode_name(url, "store URL")
    o = lib.baton_client_options_new()
    if not o:
        raise MemoryError("baton_client_options_new")
    try:
        if label is not None:
            _errors.check(lib.baton_client_options_set_label(o, encode_name(label, "label")))
        set_ms(lib.baton_client_options_set_request_timeout, o, request_timeout, "request_timeout")
        set_ms(lib.baton_client_options_set_retry_interval, o, retry_interval, "retry_interval")
        if max_retries is not None:
            _errors.check(
                lib.baton_client_options_set_max_retries(
                    o, _int_in(max_retries, "max_retries", -(2**31), 2**31 - 1)
                )
            )
        if drift is not None:
            try:
                factor, floor = drift
            except (TypeError, ValueError):
                raise InvalidArgument(f"drift must be (factor, floor), not {drift!r}") from None
            if isinstance(factor, bool) or not isinstance(factor, (int, float)):
                raise InvalidArgument(f"drift factor must be a float, not {factor!r}")
            _errors.check(
                lib.baton_client_options_set_drift(o, float(factor), to_ms(floor, "drift floor"))
            )
        out = c_void_p()
        _errors.check(lib.baton_client_open(u, o, byref(out)))
        return out.value or 0
    finally:
        lib.baton_client_options_destroy(o)
