#!/usr/bin/python3
"""bench/server_cost.py — what bounds the pairs/s goals on this machine.

Two measurements behind docs/bench/goals.md, both in one run:

1. Server CPU per acquire+release pair, split into user and kernel time
   (/proc/PID/stat utime and stime of the server process over the run), for
   batond (through baton::Client and through hiredis) and for Redis (raw
   SET NX PX + EVALSHA compare-and-delete, the fencing floor: the least a
   script-granted lease with a fencing token needs, and baton's redis://
   store), at
   N clients (default 50), uncontended (each client its own lock).
2. One-client acquire latency p50 with the machine idle and with every CPU
   kept busy by niced spinners (so no vCPU halts between requests): the
   difference is the cost of waking an idle vCPU, paid per request by any
   server that blocks in epoll.

Starts a private batond (no persistence) and redis-server (persistence
off) on free loopback ports in a temp dir and stops them by pid; every run
is bounded by --duration. Prints a Markdown report.

  bench/server_cost.py --build build/bench [--duration 5s] [--clients 50]
                       [--repeats 2]
"""
import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu(pid):
    """(user, system) seconds used so far by pid (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def wait_port(port, proc, what):
    for _ in range(100):
        if proc.poll() is not None:
            sys.exit(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"{what} did not listen on {port}")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_json(cmd, what):
    """Runs a load generator; its JSON line plus its own CPU seconds."""
    c0 = children_cpu()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                         check=False)
    if out.returncode != 0 or not out.stdout.strip():
        sys.exit(f"{what} failed: {out.stderr.strip()}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["client_cpu_s"] = children_cpu() - c0
    return r


def lockbench(build, store, clients, duration):
    return run_json([f"{build}/bin/baton_lockbench", "--store", store,
                     "--clients", str(clients), "--duration", duration,
                     "--json"], f"lockbench {store}")


def spinners(n):
    code = "import time\nend = time.time() + 600\nwhile time.time() < end: pass\n"
    return [subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", code])
            for _ in range(n)]


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build/bench")
    ap.add_argument("--duration", default="5s")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    for b in ("batond", "baton_lockbench"):
        if not os.access(f"{a.build}/bin/{b}", os.X_OK):
            sys.exit(f"missing {a.build}/bin/{b} (cmake --build {a.build} "
                     "--target batond baton_lockbench)")
    if not shutil.which("redis-server"):
        sys.exit("redis-server missing (apt-get install redis-server)")
    work = tempfile.mkdtemp(prefix="baton-cost.")
    procs = []
    try:
        bport, rport = free_port(), free_port()
        batond = subprocess.Popen(
            [f"{a.build}/bin/batond", "--listen", f"127.0.0.1:{bport}",
             "--data-dir", "", "--log-level", "warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(batond)
        redis = subprocess.Popen(
            ["redis-server", "--port", str(rport), "--bind", "127.0.0.1",
             "--dir", work, "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(redis)
        wait_port(bport, batond, "batond")
        wait_port(rport, redis, "redis-server")
        cases = [
            ("batond, baton::Client", f"baton://127.0.0.1:{bport}", batond),
            ("batond via hiredis", f"raw-baton://127.0.0.1:{bport}", batond),
            ("Redis, raw SET NX PX + EVALSHA",
             f"raw-redis://127.0.0.1:{rport}?script=evalsha", redis),
            ("Redis, fencing floor (2 scripts: TIME GET INCR SET, TIME GET DEL)",
             f"raw-redis://127.0.0.1:{rport}?script=fenced", redis),
            ("Redis, baton redis:// store", f"redis://127.0.0.1:{rport}", redis),
        ]
        rows = {c[0]: [] for c in cases}
        for _ in range(a.repeats):
            for name, url, proc in cases:
                u0, s0 = cpu(proc.pid)
                r = lockbench(a.build, url, a.clients, a.duration)
                u1, s1 = cpu(proc.pid)
                pairs = max(r["pairs"], 1)
                rows[name].append((r["pairs_per_sec"], (u1 - u0) * 1e6 / pairs,
                                   (s1 - s0) * 1e6 / pairs))
        # One client: redis-py's Lock against baton's redis:// store. The
        # client's own CPU per pair shows how much of redis-py's time is
        # Python rather than round trips.
        peer = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "peers", "redis_py.py")
        one = {}
        try:
            import redis  # noqa: F401  (python3-redis)
            have_py = True
        except ImportError:
            have_py = False
        for _ in range(a.repeats):
            if have_py:
                one.setdefault("redis-py Lock", []).append(run_json(
                    [sys.executable, peer, "--url", f"127.0.0.1:{rport}",
                     "--clients", "1", "--duration", a.duration], "redis-py"))
            one.setdefault("baton::Client, redis://", []).append(
                lockbench(a.build, f"redis://127.0.0.1:{rport}", 1, a.duration))
            one.setdefault("raw SET NX PX + EVALSHA (hiredis)", []).append(
                lockbench(a.build, f"raw-redis://127.0.0.1:{rport}?script=evalsha",
                          1, a.duration))
        lat = {}
        for busy in (False, True):
            sp = spinners(os.cpu_count() or 2) if busy else []
            time.sleep(0.3 if busy else 0)
            try:
                for name, url in (("batond", f"raw-baton://127.0.0.1:{bport}"),
                                  ("Redis", f"raw-redis://127.0.0.1:{rport}?script=evalsha")):
                    r = lockbench(a.build, url, 1, "2s")
                    lat[(name, busy)] = (r["acquire"]["p50_us"], r["pairs_per_sec"])
            finally:
                for p in sp:
                    p.kill()
                    p.wait()
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)

    load = open("/proc/loadavg").read().split()[:3]
    print(f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"{os.cpu_count()} CPUs; load average before the report: {' '.join(load)}")
    print(f"- command: bench/server_cost.py --build {a.build} --duration "
          f"{a.duration} --clients {a.clients} --repeats {a.repeats}\n")
    print(f"Uncontended, {a.clients} clients; medians of {a.repeats} runs. "
          "Server CPU per pair from /proc/PID/stat (user + kernel).\n")
    print("| server and client | pairs/s | server CPU µs/pair | of which user | of which kernel |")
    print("| --- | --- | --- | --- | --- |")
    for name, _, _ in cases:
        xs = rows[name]
        pps = median([x[0] for x in xs])
        us = median([x[1] for x in xs])
        sy = median([x[2] for x in xs])
        print(f"| {name} | {pps:,.0f} | {us + sy:.1f} | {us:.1f} | {sy:.1f} |")
    # The redis:// store's CPU goal, as ratios of server CPU per pair within
    # each repeat (the runs of one repeat are back to back).
    per = {name: [x[1] + x[2] for x in rows[name]] for name, _, _ in cases}
    store, raw = per["Redis, baton redis:// store"], per["Redis, raw SET NX PX + EVALSHA"]
    floor = per["Redis, fencing floor (2 scripts: TIME GET INCR SET, TIME GET DEL)"]
    fmt = lambda xs: ", ".join(f"{x:.2f}×" for x in xs)
    print("\nServer CPU per pair, ratios within each repeat: redis:// ÷ raw "
          f"{fmt([a / b for a, b in zip(store, raw)])}; redis:// ÷ fencing floor "
          f"{fmt([a / b for a, b in zip(store, floor)])}; fencing floor ÷ raw "
          f"{fmt([a / b for a, b in zip(floor, raw)])}.")
    print("\nOne client on Redis: pairs/s, wall time per pair and the "
          "client process's own CPU per pair (getrusage of the load "
          "generator, user + kernel):\n")
    print("| client | pairs/s | wall µs/pair | client CPU µs/pair |")
    print("| --- | --- | --- | --- |")
    if not one.get("redis-py Lock"):
        print("| redis-py Lock | not measured: python3-redis is not installed | | |")
    for name, xs in one.items():
        pps = median([x["pairs_per_sec"] for x in xs])
        cpu_pp = median([x["client_cpu_s"] * 1e6 / max(x["pairs"], 1) for x in xs])
        print(f"| {name} | {pps:,.0f} | {1e6 / max(pps, 1):.1f} | {cpu_pp:.1f} |")
    print("\nOne client, acquire p50 (µs) and pairs/s, idle machine vs every "
          "CPU kept busy by niced spinners:\n")
    print("| server | idle: p50 | idle: pairs/s | CPUs busy: p50 | CPUs busy: pairs/s |")
    print("| --- | --- | --- | --- | --- |")
    for name in ("batond", "Redis"):
        i, b = lat[(name, False)], lat[(name, True)]
        print(f"| {name} | {i[0]:.1f} | {i[1]:,.0f} | {b[0]:.1f} | {b[1]:,.0f} |")


if __name__ == "__main__":
    main()
