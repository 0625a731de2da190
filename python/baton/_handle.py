"""Handle lifetimes and the Python side of fork().

A Handle guards one C handle (client, keeper, elector, counter): the C ABI
says `_destroy` must not race another call on the same handle, so each
call enters the guard, and close() destroys the handle only once the last
call in flight has left it (closing never waits for a blocked call; the
call's thread destroys the handle when it returns). Nothing is held while
the C call runs. Collection by the garbage collector needs no guard: an
object is collected only when no call on it is running.

After fork() the child forgets the calls that were in flight in the
parent's other threads (they do not exist in the child) and gets a new
notifier thread on demand; calls on the parent's handles are then refused
by the library with invalid_argument, naming both pids.
"""

from __future__ import annotations

import logging
import os
import selectors
import threading
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar

from ._errors import InvalidArgument, from_handle

_log = logging.getLogger("baton")
_C = TypeVar("_C", bound="Closing")
_T = TypeVar("_T")

# os.eventfd and friends (Python 3.10+, Linux), looked up by name: the
# type stubs of Debian 12's mypy predate them.
_eventfd: Callable[[int, int], int] = getattr(os, "eventfd")
_EFD_FLAGS: int = getattr(os, "EFD_NONBLOCK") | getattr(os, "EFD_CLOEXEC")
eventfd_read: Callable[[int], int] = getattr(os, "eventfd_read")
eventfd_write: Callable[[int, int], None] = getattr(os, "eventfd_write")


def new_eventfd() -> int:
    """A non-blocking, close-on-exec eventfd: what a lost notice writes
    (the library writes the 8-byte value 1 and never blocks on it)."""
    return _eventfd(0, _EFD_FLAGS)
_handles: "weakref.WeakSet[Handle]" = weakref.WeakSet()


class Handle:
    """The guard of one C handle. Lock-free on the GIL: list.append and
    list.pop are atomic, and every step below is one of them or a read.

    enter(): append to `inflight`, then check `closing` (if a close came
    first, leave and refuse). close(): set `closing`, then destroy if
    nothing is in flight. Whoever sees `closing` and an empty `inflight`
    last (close() or the last leave()) pops the pointer from its one-item
    box and destroys it: the pop succeeds exactly once.
    """

    __slots__ = ("_box", "_destroy", "_kind", "_inflight", "_closing", "__weakref__")

    def __init__(self, ptr: int, destroy: Callable[[int], None], kind: str) -> None:
        self._box = [ptr]
        self._destroy = destroy
        self._kind = kind
        self._inflight: List[int] = []
        self._closing = False
        _handles.add(self)

    def enter(self) -> int:
        self._inflight.append(1)
        if self._closing:
            self.leave()
            raise InvalidArgument(f"this baton {self._kind} is closed")
        return self._box[0]

    def leave(self) -> None:
        self._inflight.pop()
        if self._closing and not self._inflight:
            self._destroy_once()

    def _destroy_once(self) -> None:
        try:
            ptr = self._box.pop()
        except IndexError:
            return
        self._destroy(ptr)

    @property
    def closed(self) -> bool:
        return self._closing

    def call(self, fn: Callable[..., Optional[int]], *args: Any) -> None:
        """fn(handle, *args) for a function returning a baton_error_t*:
        raises the error it returns."""
        ptr = self.enter()
        try:
            err = fn(ptr, *args)
        finally:
            self.leave()
        if err:
            raise from_handle(err)

    def read(self, fn: Callable[[int], _T], closed: _T) -> _T:
        """fn(handle) for an accessor; `closed` once the handle is closed."""
        if self._closing:
            return closed
        ptr = self.enter()
        try:
            return fn(ptr)
        finally:
            self.leave()

    def close(self) -> None:
        """Destroys the handle now, or when the last call in flight returns."""
        self._closing = True
        if not self._inflight:
            self._destroy_once()

    def __del__(self) -> None:
        try:
            self._destroy_once()
        except Exception:  # interpreter shutdown: the library may be gone
            pass


class Closing:
    """`with x:` closes x at the end of the block."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Notifier:
    """One Python thread per process that turns lost-notice fds into
    Python callbacks, so that no Python code (and no GIL) runs on the
    library's notice thread, where it would delay every other lease's
    notice. Registrations are queued and applied by the thread itself."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: List[Tuple[int, Optional[Tuple[Callable[[], None], bool]]]] = []
        self._wake = new_eventfd()
        self._thread: Optional[threading.Thread] = None

    def add(self, fd: int, fn: Callable[[], None], repeat: bool) -> None:
        """Calls fn() on the notifier thread when fd becomes readable: once
        (the fd is then dropped, not read), or every time (repeat: read)."""
        self._post(fd, (fn, repeat))

    def remove(self, fd: int) -> None:
        self._post(fd, None)

    def call(self, fn: Callable[[], None]) -> None:
        """Calls fn() on the notifier thread soon."""
        self._post(-1, (fn, False))

    def _post(self, fd: int, what: Optional[Tuple[Callable[[], None], bool]]) -> None:
        with self._lock:
            self._queue.append((fd, what))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="baton-notify", daemon=True
                )
                self._thread.start()
        eventfd_write(self._wake, 1)

    def _apply(self, sel: selectors.BaseSelector, live: Dict[int, object]) -> None:
        with self._lock:
            queue, self._queue = self._queue, []
        for fd, what in queue:
            if fd < 0 and what is not None:
                _call(what[0])
                continue
            if fd in live:
                sel.unregister(fd)
                del live[fd]
            if what is not None:
                sel.register(fd, selectors.EVENT_READ, what)
                live[fd] = what

    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._wake, selectors.EVENT_READ, None)
        live: Dict[int, object] = {}
        while True:
            for key, _ in sel.select():
                if key.data is None:
                    try:
                        eventfd_read(self._wake)
                    except BlockingIOError:
                        pass
                    self._apply(sel, live)
                    continue
                if key.fd not in live:
                    continue
                fn, repeat = key.data
                if repeat:
                    try:
                        eventfd_read(key.fd)
                    except BlockingIOError:
                        continue
                else:
                    sel.unregister(key.fd)
                    del live[key.fd]
                _call(fn)


def _call(fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception:  # a callback's error must not stop the thread
        _log.exception("baton: an on_lost callback raised")


_notifier: Optional[Notifier] = None
_notifier_lock = threading.Lock()


def notifier() -> Notifier:
    global _notifier
    with _notifier_lock:
        if _notifier is None:
            _notifier = Notifier()
        return _notifier


# Bumped in every child after fork(): code that keeps Python-side threads
# (the asyncio worker pools) compares it to refuse use across a fork.
fork_generation = 0


def _after_fork_in_child() -> None:
    global _notifier, _notifier_lock, fork_generation
    fork_generation += 1
    _notifier = None  # its thread stayed in the parent; its fds are the parent's
    _notifier_lock = threading.Lock()
    for h in list(_handles):
        h._inflight.clear()  # calls in flight at the fork run in the parent


os.register_at_fork(after_in_child=_after_fork_in_child)
