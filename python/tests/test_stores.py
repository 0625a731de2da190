"""The contract through the Python package, on every store."""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.pool
import os
import threading
import time
from typing import Iterator, List

import pytest

import baton
from conftest import Store, wait_until
import workers


PROCS = 3


@pytest.fixture(scope="session")
def process_pool() -> Iterator["multiprocessing.pool.Pool"]:
    """Worker processes for every store's exclusion test, started once: by
    a fork server (a clean process that imported baton), not by forking
    this process and its threads."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["baton", "workers"])
    with ctx.Pool(PROCS) as pool:
        yield pool


def test_exclusion_between_processes_with_fencing(
    store: Store, tmp_path: object, process_pool: "multiprocessing.pool.Pool"
) -> None:
    if store.kind == "memory":
        pytest.skip("memory: is a store per process; no two processes share it")
    name = store.name("excl")
    resource = os.path.join(str(tmp_path), "resource.json")
    with open(resource, "w") as f:
        json.dump({"last": 0, "writes": 0, "stale": 0, "inside": 0, "overlaps": 0}, f)
    procs, rounds = PROCS, 4
    # One task per worker process (chunksize 1; each is busy in its task
    # until the lock lets it through, so they run in distinct processes).
    done = process_pool.starmap(
        workers.exclusion_worker, [(store.url, name, resource, rounds)] * procs, chunksize=1
    )
    with open(resource) as f:
        state = json.load(f)
    assert done == [rounds] * procs
    assert state["overlaps"] == 0, state
    assert state["stale"] == 0, state
    assert state["writes"] == procs * rounds
    # The store's fencing tokens for the name are at least the last written.
    with store.connect() as c:
        assert c.describe(name).last_fencing_token >= state["last"]


def test_fifo_of_20_waiters(store: Store) -> None:
    name = store.name("fifo")
    n = 20
    with store.connect() as c:
        holder = c.acquire(name, wait="5s", ttl="30s")
        order: List[int] = []
        tokens: List[int] = []
        errors: List[BaseException] = []

        def waiter(i: int) -> None:
            try:
                lease = c.acquire(name, wait="30s", ttl="30s", label=f"waiter-{i}")
                order.append(i)
                tokens.append(lease.fencing_token)
                c.release(lease)
            except BaseException as e:  # reported below
                errors.append(e)

        threads = []
        for i in range(n):
            t = threading.Thread(target=waiter, args=(i,))
            t.start()
            threads.append(t)
            # The next waiter starts once this one is queued.
            wait_until(lambda: len(c.describe(name).waiters) == i + 1, what=f"waiter {i} queued")
        info = c.describe(name)
        assert [w.label for w in info.waiters] == [f"waiter-{i}" for i in range(n)]
        assert c.release(holder)
        for t in threads:
            t.join(60)
        assert not errors, errors
        assert order == list(range(n))
        assert tokens == sorted(tokens) and len(set(tokens)) == n
        assert tokens[0] > holder.fencing_token
        assert c.describe(name).is_free


def test_extend_to(store: Store) -> None:
    name = store.name("extend")
    with store.connect() as c:
        lease = c.acquire(name, wait="5s", ttl="20s")
        shorter = c.extend(lease, "2s")  # extend-TO: now + 2 s, not 20 s + 2 s
        assert shorter.fencing_token == lease.fencing_token
        assert shorter.time_left <= baton.Lease.from_token(name, lease.token, "2s").ttl
        assert 0 < shorter.time_left.total_seconds() <= 2.0
        holder = c.describe(name).holders[0]
        assert holder.time_left.total_seconds() <= 2.0
        longer = c.extend(lease)  # None: that lease's own TTL (20 s)
        assert longer.time_left.total_seconds() <= 20.0
        # The store's view (on zookeeper:// the local window is also bounded
        # by the session timeout, 2 s on the test servers).
        assert 2.0 < c.describe(name).holders[0].time_left.total_seconds() <= 20.0
        assert c.release(longer)
        with pytest.raises(baton.LockLost):
            c.extend(longer, "5s")  # no longer held: nothing changes
        assert c.describe(name).is_free


def test_release_never_frees_anothers_lease(store: Store) -> None:
    name = store.name("release")
    with store.connect() as a, store.connect() as b:
        old = a.acquire(name, wait="5s", ttl="300ms")
        wait_until(lambda: c_is_free(b, name), timeout=10, what="the short lease expired")
        new = b.acquire(name, wait="5s", ttl="30s")
        assert new.fencing_token > old.fencing_token
        assert a.release(old) is False  # expired: the new holder keeps the lock
        forged = baton.Lease.from_token(name, baton.random_token())
        assert a.release(forged) is False
        info = b.describe(name)
        assert [h.fencing_token for h in info.holders] == [new.fencing_token]
        assert b.release(new) is True
        assert b.release(new) is False  # idempotent


def c_is_free(c: baton.Client, name: str) -> bool:
    return c.describe(name).is_free


def test_semaphore(store: Store) -> None:
    name = store.name("sem")
    with store.connect() as c:
        leases = [c.try_acquire(name, capacity=3, label=f"h{i}") for i in range(3)]
        with pytest.raises(baton.NotAcquired) as e:
            c.try_acquire(name, capacity=3)
        assert sorted(h.label for h in e.value.holders) == ["h0", "h1", "h2"]
        assert c.describe(name).capacity == 3
        assert c.release(leases[1])
        again = c.try_acquire(name, capacity=3)
        for lease in [leases[0], leases[2], again]:
            assert c.release(lease)


def test_shared_and_exclusive(store: Store) -> None:
    name = store.name("rw")
    with store.connect() as c:
        r1 = c.acquire_shared(name, wait="5s", label="reader-1")
        r2 = c.acquire_shared(name, wait="5s", label="reader-2")
        assert r1.shared and r2.shared
        with pytest.raises(baton.NotAcquired) as e:
            c.acquire(name, wait="0")
        assert sorted(h.label for h in e.value.holders) == ["reader-1", "reader-2"]
        assert all(h.shared for h in e.value.holders)
        assert c.release(r1) and c.release(r2)
        w = c.acquire(name, wait="5s", label="writer")
        with pytest.raises(baton.NotAcquired):
            c.acquire_shared(name, wait="0")
        assert c.release(w)


def test_acquire_some_partial_grants(store: Store) -> None:
    a, b, cc = (store.name(x) for x in "abc")
    with store.connect() as c:
        held = c.acquire(b, wait="5s")
        grant = c.acquire_some([a, b, cc], wait="5s", ttl="10s")
        assert sorted(lease.name for lease in grant.leases) == sorted([a, cc])
        assert grant.pending == [b]
        assert c.describe(b).waiters, "the request for b stays queued"
        assert c.release(held)
        rest = c.acquire_some([a, b, cc], wait="5s", ttl="10s", reservation=grant.reservation)
        assert b in {lease.name for lease in rest.leases}
        assert rest.pending == []
        for lease in grant.leases + rest.leases:
            c.release(lease)
        with pytest.raises(baton.Timeout):
            held = c.acquire(a, wait="5s")
            try:
                c.acquire_all([a, b], wait="100ms")  # all or nothing: b is free, a is not
            finally:
                c.release(held)
        assert c.describe(b).is_free, "acquire_all that failed holds nothing"


def test_counter_never_below_zero(store: Store) -> None:
    with store.connect() as c:
        k = c.counter(store.name("counter"))
        if store.kind == "redlock":
            with pytest.raises(baton.InvalidArgument, match="counters are not offered"):
                k.get()
            pytest.skip("redlock:// offers no counters (no atomic read-modify-write "
                        "across independent masters); the library says so, checked above")
        assert k.get() == 0
        assert k.add(10) == 10
        taken: List[int] = []
        refused: List[int] = []

        def take() -> None:
            try:
                taken.append(k.take(1))
            except baton.NotAcquired:
                refused.append(1)

        threads = [threading.Thread(target=take) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(taken) == 10 and len(refused) == 10
        assert sorted(taken) == list(range(10))
        assert k.get() == 0
        with pytest.raises(baton.NotAcquired):
            k.take(1)
        assert k.get() == 0


def test_elector_single_leader_and_hand_over(store: Store) -> None:
    group = store.name("elect")
    elected: List[str] = []
    seen: List[str] = []
    with store.connect() as c1, store.connect() as c2:
        with c1.elector(group, ttl="10s", label="first") as e1, c2.elector(
            group, ttl="10s", label="second",
            on_elected=lambda lease: elected.append(f"second:{lease.fencing_token}"),
            on_new_leader=seen.append,
        ) as e2:
            term1 = e1.campaign(wait="5s")
            assert e1.is_leader and not e2.is_leader
            with pytest.raises(baton.Timeout):
                e2.campaign(wait="100ms")
            leader = e2.observe()
            assert leader is not None and leader.label == "first"
            assert leader.fencing_token == term1.fencing_token
            result: List[baton.Lease] = []
            t = threading.Thread(target=lambda: result.append(e2.campaign(wait="20s")))
            t.start()
            time.sleep(0.05)
            assert e1.is_leader and not e2.is_leader
            e1.resign()
            t.join(30)
            assert result, "the second candidate took over"
            assert e2.is_leader and not e1.is_leader
            assert result[0].fencing_token > term1.fencing_token
            assert elected == [f"second:{result[0].fencing_token}"]
            observed = e1.observe()
            assert observed is not None and observed.label == "second"
            with e2.leadership() as term:  # already leader: at once
                assert term.fencing_token == result[0].fencing_token
            assert not e2.is_leader
