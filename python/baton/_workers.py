"""Worker threads for baton.aio: the blocking C calls run on them.

Not concurrent.futures.ThreadPoolExecutor, for three reasons: its submit()
starts a new thread on the caller's thread and waits there until the
thread runs (on the event loop: 1000 waiting acquires submitted at once
blocked a loop for 2 s on a loaded 2-core machine; here a thread is
started with _thread.start_new_thread, which does not wait); a job still
queued cannot be withdrawn without racing a worker that takes it (here
whoever claims the job first, worker or canceller, owns it); and its
workers are joined at interpreter exit, where a forever-waiting acquire
would hang the exit (here they are daemon threads, like the library's).
"""

from __future__ import annotations

import _thread
import asyncio
import queue
import threading
from typing import Any, Callable, Generic, List, Optional, TypeVar

T = TypeVar("T")


class Job(Generic[T]):
    __slots__ = ("loop", "fut", "fn", "args", "_claim")

    def __init__(self, loop: asyncio.AbstractEventLoop, fn: Callable[..., T], args: Any) -> None:
        self.loop = loop
        self.fut: "asyncio.Future[T]" = loop.create_future()
        self.fn, self.args = fn, args
        self._claim: List[int] = [1]

    def claim(self) -> bool:
        """True for the first caller only (list.pop is atomic)."""
        try:
            self._claim.pop()
        except IndexError:
            return False
        return True


def _resolve(fut: "asyncio.Future[Any]", result: Any, error: Optional[BaseException]) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


class Workers:
    """Up to `max_threads` daemon threads, started as jobs need them and
    kept (idle) afterwards; jobs beyond them wait in a queue, unstarted."""

    def __init__(self, max_threads: int) -> None:
        self._jobs: "queue.SimpleQueue[Optional[Job[Any]]]" = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._max = max_threads
        self._threads = 0  # started
        self._idle = 0  # waiting for a job
        self._queued = 0  # submitted, not yet taken

    def submit(self, fn: Callable[..., T], *args: Any) -> Job[T]:
        job: Job[T] = Job(asyncio.get_running_loop(), fn, args)
        with self._lock:
            self._queued += 1
            spawn = self._queued > self._idle and self._threads < self._max
            if spawn:
                self._threads += 1
        self._jobs.put(job)
        if spawn:
            _thread.start_new_thread(self._work, ())
        return job

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            job = self._jobs.get()
            with self._lock:
                self._idle -= 1
                self._queued -= 1
            if job is None:
                return
            if not job.claim():
                continue  # withdrawn while queued
            result, error = None, None
            try:
                result = job.fn(*job.args)
            except BaseException as e:  # delivered to the awaiting task
                error = e
            try:
                job.loop.call_soon_threadsafe(_resolve, job.fut, result, error)
            except RuntimeError:
                pass  # the loop is closed: nobody awaits the result any more

    def shutdown(self) -> None:
        """Idle threads end; busy ones end after their job."""
        with self._lock:
            n, self._threads = self._threads, 0
        for _ in range(n):
            self._jobs.put(None)
