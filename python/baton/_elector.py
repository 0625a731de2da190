"""Leader election: baton.Elector (client.elector(group, ...))."""

from __future__ import annotations

import contextlib
import os
from ctypes import byref, c_void_p
from datetime import timedelta
from typing import Any, Callable, Iterator, Optional

from . import _errors
from ._errors import NotAcquired
from ._handle import Closing, Handle, new_eventfd, notifier
from ._held import Cancel
from ._lib import ELECTED_FN, LEADER_FN, lib
from ._values import (
    Duration,
    Lease,
    Leader,
    encode_name,
    lost_error,
    set_ms,
    text,
    wait_ms,
)


class Elector(Closing):
    """A candidate for leadership of the lock named `group` (capacity 1).

    campaign() blocks until this candidate leads (returning the term's
    lease, whose fencing token is the term) or the wait ends (Timeout);
    resign() gives leadership up. Callbacks: on_elected(lease) and
    on_new_leader(label) run on the elector's own thread (they may take
    the GIL there: only this elector waits for them); on_lost(elector)
    runs on baton's notifier thread when a term is lost, never on the
    library's notice thread. Closing the elector (or leaving `with
    client.elector(...) as e:`) resigns.

        with client.elector("scheduler", ttl="15s") as e:
            with e.leadership(wait=None) as term:   # campaign .. resign
                run_scheduler(term.fencing_token)   # stop when e.lost
    """

    def __init__(
        self, client: Any, group: str, *, ttl: Duration = "15s",
        retry_interval: Optional[Duration] = None, label: Optional[str] = None,
        on_elected: Optional[Callable[[Lease], None]] = None,
        on_new_leader: Optional[Callable[[str], None]] = None,
        on_lost: Optional[Callable[["Elector"], None]] = None,
        lost_fd: Optional[int] = None,
    ) -> None:
        self._owner = client._owner
        g = encode_name(group, "group")
        o = lib.baton_elector_options_new()
        if not o:
            raise MemoryError("baton_elector_options_new")
        # The C callbacks must outlive the elector: they are kept on it.
        self._elected_cb = None
        self._leader_cb = None
        self._fd = -1
        try:
            set_ms(lib.baton_elector_options_set_ttl, o, ttl, "ttl")
            set_ms(lib.baton_elector_options_set_retry_interval, o, retry_interval, "retry_interval")
            if label is not None:
                _errors.check(lib.baton_elector_options_set_label(o, encode_name(label, "label")))
            if on_elected is not None:
                self._elected_cb = ELECTED_FN(self._elected_trampoline(on_elected))
                _errors.check(lib.baton_elector_options_set_on_elected(o, self._elected_cb, None))
            if on_new_leader is not None:
                leader_fn = on_new_leader
                self._leader_cb = LEADER_FN(lambda label, _u: leader_fn(text(label)))
                _errors.check(lib.baton_elector_options_set_on_new_leader(o, self._leader_cb, None))
            if on_lost is not None and lost_fd is None:
                self._fd = new_eventfd()
                lost_fd = self._fd
            if lost_fd is not None:
                _errors.check(lib.baton_elector_options_set_lost_fd(o, lost_fd))
            out = c_void_p()
            client._call(lib.baton_elector_new, g, o, byref(out))
        except BaseException:
            if self._fd >= 0:
                os.close(self._fd)
            raise
        finally:
            lib.baton_elector_options_destroy(o)
        fd = self._fd
        callbacks = [self._elected_cb, self._leader_cb]

        def destroy(ptr: int) -> None:
            # The C callbacks stay alive (referenced here) until the elector
            # is gone: no callback runs after baton_elector_destroy returns.
            lib.baton_elector_destroy(ptr)  # resigns
            if fd >= 0:
                os.close(fd)
            callbacks.clear()  # the references end here

        self._h = Handle(out.value or 0, destroy, "elector")
        self.group = group
        self._on_lost = on_lost
        if on_lost is not None:
            notifier().add(fd, self._notify, repeat=True)

    def _elected_trampoline(self, fn: Callable[[Lease], None]) -> Callable[[int, Any], None]:
        owner = self._owner

        def call(lease: int, _user: Any) -> None:
            fn(Lease(lib.baton_lease_copy(lease), owner))

        return call

    def _notify(self) -> None:
        if self._on_lost is not None:
            self._on_lost(self)

    def _call(self, fn: Callable[..., Optional[int]], *args: Any) -> None:
        self._h.call(fn, *args)

    def _flag(self, fn: Callable[[int], Any], closed: Any) -> Any:
        return self._h.read(fn, closed)

    def campaign(self, wait: Optional[Duration] = None, cancel: Optional[Cancel] = None) -> Lease:
        """Blocks until leader (returns the term's lease) or `wait` passes
        (Timeout); a Cancel, or resign() from another thread, ends it
        (Cancelled), withdrawn. At once if already leader."""
        w = wait_ms(wait)
        if cancel is not None and not isinstance(cancel, Cancel):
            raise _errors.InvalidArgument(f"cancel must be a baton.Cancel, not {cancel!r}")
        self._call(lib.baton_elector_campaign, w, None if cancel is None else cancel._ptr)
        return self.lease()

    def resign(self) -> None:
        """Gives up leadership, or ends a waiting campaign. Idempotent."""
        self._call(lib.baton_elector_resign)

    @property
    def is_leader(self) -> bool:
        return bool(self._flag(lib.baton_elector_is_leader, 0))

    @property
    def lost(self) -> bool:
        """True once the term was lost or resigned (cleared by a campaign)."""
        return bool(self._flag(lib.baton_elector_cancelled, 1))

    @property
    def safe_deadline(self) -> float:
        """The term's local safe deadline (time.monotonic()); 0.0 if not leader."""
        return float(self._flag(lib.baton_elector_safe_deadline_ns, 0)) / 1e9

    def lease(self) -> Lease:
        """The current term's lease; NotAcquired if not leader."""
        out = c_void_p()
        self._call(lib.baton_elector_lease, byref(out))
        return Lease(out.value or 0)

    def observe(self) -> Optional[Leader]:
        """The current leader (any candidate), or None."""
        out = c_void_p()
        try:
            self._call(lib.baton_elector_observe, byref(out))
        except NotAcquired:
            return None
        try:
            p = out.value
            return Leader(
                text(lib.baton_leader_label(p)),
                int(lib.baton_leader_fencing_token(p)),
                timedelta(milliseconds=lib.baton_leader_time_left_ms(p)),
            )
        finally:
            lib.baton_leader_destroy(out)

    @contextlib.contextmanager
    def leadership(self, wait: Optional[Duration] = None, cancel: Optional[Cancel] = None) -> Iterator[Lease]:
        """Campaigns on entry, resigns at the end of the block; raises
        LockLost at the end if the term was lost meanwhile (check
        `elector.lost` inside the block to stop early)."""
        term = self.campaign(wait, cancel)
        try:
            yield term
        except BaseException:
            self._end_term(term)  # LockLost, chained to the body's error
            raise
        self._end_term(term)

    def _end_term(self, term: Lease) -> None:
        was_lost = self.lost
        self.resign()
        if was_lost:
            raise lost_error(self.group, term.fencing_token, "the leadership term")

    def close(self) -> None:
        """Resigns and frees the elector (once no call on it runs)."""
        if self._on_lost is not None and self._fd >= 0:
            notifier().remove(self._fd)
            self._on_lost = None
        self._h.close()

    def __repr__(self) -> str:
        return f"<baton.Elector {self.group!r} leader={self.is_leader}>"
