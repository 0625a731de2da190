"""bench/peers/peercommon.py — the harness shared by the Python peers.

Runs the same closed-loop workloads as `baton bench` (src/bench/loop.cc)
through a peer lock library and prints the same JSON shape:

  uncontended  each client thread try-acquires and releases its own lock;
  contended    client i blocks on lock i % K, releases at once; a handoff
               sample is release-sent -> next grant when the grant's request
               was sent before that release (same rule as baton bench).

One thread per client, each with its own connection (the peer's factory
opens one per call). Bounded: every wait is cut to the run's deadline.
Run with Debian's /usr/bin/python3 (the packages live there).
"""
import argparse
import json
import math
import re
import sys
import threading
import time


def parse_duration(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", text)
    if not m:
        raise SystemExit(f"bad duration {text!r}: use e.g. 500ms, 5s, 1m")
    v = float(m.group(1))
    return v / 1000 if m.group(2) == "ms" else v * 60 if m.group(2) == "m" else v


def arg_parser(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--url", required=True, help="server address for the peer")
    p.add_argument("--workload", choices=["uncontended", "contended"],
                   default="uncontended")
    p.add_argument("--clients", type=int, default=1)
    p.add_argument("--locks", type=int, default=1)
    p.add_argument("--duration", default="5s")
    p.add_argument("--prefix", default=None)
    return p


def summarize(samples_ns):
    if not samples_ns:
        return {"count": 0, "mean_us": 0, "p50_us": 0, "p90_us": 0,
                "p99_us": 0, "max_us": 0}
    s = sorted(samples_ns)
    n = len(s)

    def pct(p):
        return s[min(n - 1, max(0, math.ceil(p * n) - 1))] / 1000.0
    return {"count": n, "mean_us": round(sum(s) / n / 1000.0, 1),
            "p50_us": round(pct(0.5), 1), "p90_us": round(pct(0.9), 1),
            "p99_us": round(pct(0.99), 1), "max_us": round(s[-1] / 1000.0, 1)}


def jain(counts):
    sq = sum(c * c for c in counts)
    return (sum(counts) ** 2) / (len(counts) * sq) if counts and sq else 0.0


class Busy(Exception):
    """try_acquire found the lock held (not an error)."""


def run(args, peer, store, new_session):
    """new_session(i) -> object with try_acquire(name) -> bool,
    acquire(name, timeout_s) -> bool, release(); close() optional."""
    if args.clients < 1 or args.locks < 1:
        raise SystemExit("--clients and --locks must be at least 1")
    duration = parse_duration(args.duration)
    prefix = args.prefix or f"bench-{int(time.time() * 1000) % 10**9}"
    sessions = [new_session(i) for i in range(args.clients)]
    k = args.locks if args.workload == "contended" else 1
    last_release = [0] * k
    stats = [{"acq": [], "hand": [], "pairs": 0, "errors": 0, "first": "",
              "worst": 0} for _ in sessions]
    barrier = threading.Barrier(len(sessions) + 1)
    state = {}

    def worker(i):
        s, st = sessions[i], stats[i]
        if args.workload == "uncontended":
            name, lock = f"{prefix}/u/{i}", 0
        else:
            lock = i % k
            name = f"{prefix}/c/{lock}"
        barrier.wait()
        deadline = state["deadline"]
        while time.monotonic() < deadline:
            t0 = time.monotonic_ns()
            try:
                if args.workload == "uncontended":
                    got = s.try_acquire(name)
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    got = s.acquire(name, left)
            except Exception as e:  # noqa: BLE001 - counted, reported
                # Some libraries raise (RetryError, LockTimeout) where others
                # return False when a wait cut to the deadline runs out.
                if args.workload == "contended" and \
                        time.monotonic() + 0.05 >= deadline:
                    break
                st["errors"] += 1
                st["first"] = st["first"] or f"{type(e).__name__}: {e}"
                continue
            t1 = time.monotonic_ns()
            st["worst"] = max(st["worst"], t1 - t0)
            if not got:
                if args.workload == "contended" and \
                        time.monotonic() + 0.05 >= deadline:
                    break
                if args.workload == "uncontended":
                    st["errors"] += 1
                    st["first"] = st["first"] or "own lock busy"
                continue
            st["acq"].append(t1 - t0)
            if args.workload == "contended":
                rel = last_release[lock]
                if t0 < rel <= t1:
                    st["hand"].append(t1 - rel)
                last_release[lock] = time.monotonic_ns()
            try:
                s.release()
            except Exception as e:  # noqa: BLE001
                st["errors"] += 1
                st["first"] = st["first"] or f"release: {type(e).__name__}: {e}"
                continue
            st["pairs"] += 1

    threads = [threading.Thread(target=worker, args=(i,), daemon=True)
               for i in range(len(sessions))]
    for t in threads:
        t.start()
    start = time.monotonic()
    state["deadline"] = start + duration
    barrier.wait()
    for t in threads:
        t.join(duration + 60)
    end = time.monotonic()
    completed = not any(t.is_alive() for t in threads)
    for s in sessions:
        close = getattr(s, "close", None)
        if close:
            try:
                close()
            except Exception:  # noqa: BLE001
                pass
    acq = [x for st in stats for x in st["acq"]]
    hand = [x for st in stats for x in st["hand"]]
    per = [st["pairs"] for st in stats]
    first = next((st["first"] for st in stats if st["first"]), "")
    pairs = sum(per)
    secs = end - start
    out = {"peer": peer, "store": store, "workload": args.workload,
           "clients": args.clients, "locks": k, "seconds": round(secs, 1),
           "pairs": pairs, "pairs_per_sec": round(pairs / secs, 1),
           "acquire": summarize(acq), "handoff": summarize(hand),
           "errors": sum(st["errors"] for st in stats), "first_error": first,
           "busy": 0, "jain": round(jain(per), 3),
           "min_client_pairs": min(per), "max_client_pairs": max(per),
           "worst_wait_ms": round(max(st["worst"] for st in stats) / 1e6, 3),
           "completed": completed}
    print(json.dumps(out))
    sys.stdout.flush()
    return 0 if completed else 1
