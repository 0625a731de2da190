"""Code that runs in the worker processes of the tests (multiprocessing
imports it by name in each child)."""

from __future__ import annotations

import fcntl
import json
import os
import time

import baton


def fenced_write(resource: str, token: int) -> None:
    """The protected resource: a JSON file guarded by flock(2) that accepts
    a write only with a fencing token above the last one it saw, and
    counts writers that overlap (two inside at once)."""
    with open(resource, "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        state = json.load(f)
        if token <= state["last"]:
            state["stale"] += 1
        else:
            state["last"] = token
            state["writes"] += 1
        if state["inside"]:
            state["overlaps"] += 1
        state["inside"] += 1
        f.seek(0)
        f.truncate()
        json.dump(state, f)
    time.sleep(0.005)  # the work done under the lock
    with open(resource, "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        state = json.load(f)
        state["inside"] -= 1
        f.seek(0)
        f.truncate()
        json.dump(state, f)


def exclusion_worker(url: str, name: str, resource: str, rounds: int) -> int:
    """Takes the lock `rounds` times, writing to the resource under it;
    returns the number of rounds done."""
    client = baton.connect(url, label=f"worker-{os.getpid()}")
    done = 0
    for _ in range(rounds):
        with client.lock(name, ttl="30s", wait="30s") as lease:
            fenced_write(resource, lease.fencing_token)
            done += 1
    client.close()
    return done
