#!/usr/bin/python3
"""bench/python_waiters.py --url URL [--waiters 10,100,1000]

What concurrent waiting acquires cost one asyncio process (baton.aio):
N tasks await client.acquire(name) on a lock another client holds; the
script reports the time until the store lists all N waiters, the process's
RSS, threads and open fds per waiter, the worst lateness of a 10 ms ticker
on the event loop meanwhile, and the time from cancelling every task to an
empty queue (describe). Each waiting acquire is one worker thread blocked
in libbaton (baton.aio's pool; max_threads bounds them). Run with
PYTHONPATH=python BATON_LIBRARY=<build>/src/capi/libbaton.so.0.
"""
import argparse
import asyncio
import os
import time
import uuid

import baton
import baton.aio


def status(key):
    """A field of /proc/self/status (VmRSS in KiB, Threads: every thread,
    the library's and the workers' included)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def fds():
    return len(os.listdir("/proc/self/fd"))


async def one(url, n):
    name = f"waiters/{uuid.uuid4().hex[:8]}"
    late = [0.0]

    async def ticker():
        while True:
            t = time.monotonic()
            await asyncio.sleep(0.01)
            late[0] = max(late[0], time.monotonic() - t - 0.01)

    async with baton.aio.connect(url, max_threads=max(n, 1)) as c:
        holder = await c.acquire(name)
        await c.describe(name)
        base = (status("VmRSS"), status("Threads"), fds())
        tick = asyncio.ensure_future(ticker())
        t0 = time.monotonic()
        tasks = [asyncio.ensure_future(c.acquire(name)) for _ in range(n)]
        while len((await c.describe(name)).waiters) < n:
            await asyncio.sleep(0.005)
            if time.monotonic() - t0 > 120:
                raise SystemExit(f"{n} waiters not queued within 120 s")
        queued = time.monotonic() - t0
        now = (status("VmRSS"), status("Threads"), fds())
        t1 = time.monotonic()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        left = len((await c.describe(name)).waiters)
        cancelled = time.monotonic() - t1
        tick.cancel()
        await c.release(holder)
    print(f"| {url.split(':')[0]} | {n} | {queued:.2f} | {(now[0] - base[0]) / n:.0f} | "
          f"{(now[1] - base[1]) / n:.2f} | {(now[2] - base[2]) / n:.2f} | {late[0] * 1000:.1f} | "
          f"{cancelled:.2f} | {left} |", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--url", required=True)
    p.add_argument("--waiters", default="10,100,1000")
    args = p.parse_args()
    print("| store | waiters | s to queue all | RSS KiB per waiter | threads per waiter | "
          "fds per waiter | worst tick lateness ms | s to cancel all | waiters left |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in [int(x) for x in args.waiters.split(",")]:
        asyncio.run(one(args.url, n))


if __name__ == "__main__":
    main()
