#!/usr/bin/python3
"""bench/compare_report_python.py RESULTS.jsonl META.json OUT.md OUT.png

The page of `bench/compare --only python`: the Python package (bench/peers/
baton_py.py) beside the C++ client (`baton bench`) on every store and
beside the Python peer libraries on their engines, with the goals of the
Python package checked against the figures. Ratios are computed within
each repetition (the two sides minutes apart at most), then summarized as
the median [min-max]. OUT.png is not drawn (the tables carry the ratios).
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_report import CASES, Data, get, load, ok, ratio_fmt, run_lines, spread  # noqa: E402

# store label (as in the impl names) -> engine
STORES = [("batond", "batond"), ("redis://", "redis"), ("redlock:// (3)", "redis"),
          ("postgres://", "postgres"), ("mysql://", "mysql"), ("zookeeper://", "zookeeper"),
          ("etcd://", "etcd"), ("sqlite://", "sqlite"), ("memory: (floor)", "memory")]
# The Python peers of each engine, and the baton store they are compared with.
PEERS = {"redis": ["redis-py Lock", "tooz (redis)"], "postgres": ["tooz (postgresql)"],
         "mysql": ["tooz (mysql)"], "zookeeper": ["kazoo Lock", "tooz (zookeeper)"],
         "etcd": ["python-etcd3 Lock"]}
# The harness with an empty C call for each of the package's three per pair
# (bench/peers/baton_py.py --url floor:): what a pair costs the binding at
# the least.
FLOOR = "Python harness + 3 empty C calls"
ENGINE_STORE = {"redis": "redis://", "postgres": "postgres://", "mysql": "mysql://",
                "zookeeper": "zookeeper://", "etcd": "etcd://"}


def py(label):
    return f"baton (Python) {label}"


def cpp(label):
    return f"baton {label}"


def pair_ratio(d, case, label):
    """Per repetition: the Python package's time per pair ÷ the C++ client's
    (= C++ pairs/s ÷ Python pairs/s); for one client this is the cost of
    the binding and of the interpreter."""
    return d.ratios(case, cpp(label), py(label))


def p50_ratio(d, case, label):
    """Per repetition: the Python package's median acquire latency ÷ the
    C++ client's — less sensitive than pairs/s to a thread descheduled for
    milliseconds on a loaded machine."""
    a = d.per_rep(case, py(label), ("acquire", "p50_us"))
    b = d.per_rep(case, cpp(label), ("acquire", "p50_us"))
    return [a[k] / b[k] for k in a if k in b and a[k] and b[k]]


def best_peer(d, case, engine):
    """Per repetition: the best Python peer's pairs/s on the engine."""
    best = {}
    for peer in PEERS.get(engine, []):
        for rep, v in d.per_rep(case, peer).items():
            if v:
                best[rep] = max(best.get(rep, 0), v)
    return best


def vs_best_peer(d, case, label, engine):
    mine, best = d.per_rep(case, py(label)), best_peer(d, case, engine)
    return [mine[r] / best[r] for r in mine if r in best and best[r] and mine[r]]


def floor_ratio(d, case, label):
    """Per repetition: the least Python ÷ C++ time per pair a ctypes binding
    can reach on the store: (C++ time + the harness floor's time) ÷ C++
    time = 1 + C++ pairs/s ÷ floor pairs/s."""
    a, f = d.per_rep(case, cpp(label)), d.per_rep(case, FLOOR)
    return [1 + a[r] / f[r] for r in a if r in f and a[r] and f[r]]


def round_robin_jain(pairs, clients):
    """The Jain index of a perfect round robin of `pairs` grants over
    `clients` clients (counts differ by at most one): the most any FIFO
    can score when the run ends mid-round."""
    if not pairs or not clients:
        return None
    q, r = divmod(int(pairs), int(clients))
    return pairs * pairs / (clients * ((clients - r) * q * q + r * (q + 1) ** 2))


def metric(d, case, impl, key):
    return [get(r, *key) if isinstance(key, tuple) else r.get(key)
            for r in d.by.get((case, impl), []) if ok(r)]


def table(d, case, o):
    o.append("| engine | implementation | pairs/s | Python ÷ C++ time per pair | "
             "Python ÷ C++ acquire p50 | ÷ best Python peer | acquire p50 µs | acquire p99 µs | "
             "Jain | worst wait ms | errors |")
    o.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, engine in STORES:
        impls = [cpp(label), py(label)]
        if ENGINE_STORE.get(engine) == label:
            impls += PEERS[engine]
        if engine == "memory":
            impls.append(FLOOR)
        for impl in impls:
            rows = d.by.get((case, impl), [])
            if not rows:
                continue
            good = [r for r in rows if ok(r)]
            if not good:
                err = next((r.get("first_error") for r in rows if r.get("first_error")), "no output")
                o.append(f"| {engine} | {impl} | failed: {str(err)[:80]} | | | | | | | | |")
                continue
            pr = spread(pair_ratio(d, case, label), ratio_fmt) if impl == py(label) else "—"
            lr = spread(p50_ratio(d, case, label), ratio_fmt) if impl == py(label) else "—"
            bp = (spread(vs_best_peer(d, case, label, engine), ratio_fmt)
                  if impl == py(label) and engine in PEERS and ENGINE_STORE[engine] == label else "—")
            p50 = spread([v for v in metric(d, case, impl, ("acquire", "p50_us")) if v])
            p99 = spread([v for v in metric(d, case, impl, ("acquire", "p99_us")) if v])
            jain = spread([v for v in metric(d, case, impl, "jain") if v is not None],
                          lambda v: f"{v:.2f}")
            worst = spread([v for v in metric(d, case, impl, "worst_wait_ms") if v is not None])
            errs = sum(r.get("errors", 0) for r in rows)
            name = f"**{impl}**" if impl.startswith("baton (Python)") else impl
            o.append(f"| {engine} | {name} | {spread([r['pairs_per_sec'] for r in good])} | {pr} | "
                     f"{lr} | {bp} | {p50} | {p99} | {jain} | {worst} | {errs} |")


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def goal_line(what, values, goal, at_least, fmt=ratio_fmt):
    m = med(values)
    if m is None:
        return f"- {what}: no figures"
    met = m >= goal if at_least else m <= goal
    return f"- {what}: {spread(values, fmt)} — {'met' if met else '**not met**'}"


def goals(d, o):
    o.append("Each line gives the median [min–max] over the repetitions of a ratio "
             "computed within one repetition.")
    o.append("")
    o.append("**Uncontended, 50 clients: ≥ 2× the best Python peer on the same engine**")
    o.append("")
    for engine, label in ENGINE_STORE.items():
        o.append(goal_line(f"{engine} ({py(label)} ÷ best of {', '.join(PEERS[engine])})",
                           vs_best_peer(d, "u50", label, engine), 2.0, True))
    o.append("")
    o.append("**Uncontended, 1 client: not slower than any Python peer on the same engine, "
             "and per pair ≤ 1.25× the C++ client's time on the same store**")
    o.append("")
    for engine, label in ENGINE_STORE.items():
        o.append(goal_line(f"{engine}: {py(label)} ÷ best Python peer (pairs/s)",
                           vs_best_peer(d, "u1", label, engine), 1.0, True))
    for label, _ in STORES:
        o.append(goal_line(f"{label}: Python ÷ C++ time per pair", pair_ratio(d, "u1", label),
                           1.25, False))
        o.append(goal_line(f"{label}: Python ÷ C++ acquire p50 (the same, robust to stalls)",
                           p50_ratio(d, "u1", label), 1.25, False))
        fl = floor_ratio(d, "u1", label) if label.startswith("memory") else []
        if fl:
            o.append(f"- {label}: the least that ratio can be through ctypes, "
                     f"(C++ time + the time of \"{FLOOR}\") ÷ C++ time: {spread(fl, ratio_fmt)}"
                     f" — {'the 1.25× goal is out of reach here' if med(fl) > 1.25 else 'within the goal'}")
    o.append("")
    o.append("**Contended, 50 clients on one lock: Jain ≥ 0.99 and worst wait ≤ 2× the C++ client's**")
    o.append("")
    for label, _ in STORES:
        jain = metric(d, "c50", py(label), "jain")
        o.append(goal_line(f"{label}: Jain of the Python package", jain, 0.99, True,
                           lambda v: f"{v:.3f}"))
        rr = [round_robin_jain(r.get("pairs"), r.get("clients"))
              for r in d.by.get(("c50", py(label)), []) if ok(r)]
        rr = [v for v in rr if v is not None]
        if rr and med(rr) < 0.99:
            o.append(f"- {label}: a perfect round robin of the same grants would score "
                     f"{spread(rr, lambda v: f'{v:.3f}')}: the run ends mid-round with few grants "
                     "per client, so 0.99 needs a longer run here")
        a = d.per_rep("c50", py(label), ("worst_wait_ms",))
        b = d.per_rep("c50", cpp(label), ("worst_wait_ms",))
        o.append(goal_line(f"{label}: worst wait, Python ÷ C++",
                           [a[k] / b[k] for k in a if k in b and a[k] and b[k]], 2.0, False))


def main():
    res_path, meta_path, md_path, _png = sys.argv[1:5]
    import json
    d = Data(load(res_path))
    meta = json.load(open(meta_path))
    md_dir = os.path.dirname(os.path.abspath(md_path))
    o = ["# Benchmarks: the Python package beside the C++ client and the Python peers", ""]
    o.append("Generated by `bench/compare --only python` (bench/compare_report_python.py) — "
             "rerun it rather than editing this page. Raw JSON lines of this run: "
             f"[{os.path.basename(res_path)}]({os.path.relpath(res_path, md_dir)}). "
             "What the package is and how it is built: [python.md](../python.md).")
    o.append("")
    o.append("**Read the figures as rough**: servers, clients and other people's builds share "
             f"2 vCPUs. Each figure is the median of {meta['repeats']} repetitions [min–max].")
    o.append("")
    o.append("## Run")
    o.append("")
    o.extend(run_lines(meta))
    o.append("")
    o.append("## What is measured")
    o.append("")
    o.append("The workloads of docs/benchmarks.md: *uncontended* — each client loops "
             "try-acquire + release on its own lock; *contended* — 50 clients block on one "
             "lock and release as soon as granted; lease TTL 30 s. **baton (Python)** is "
             "bench/peers/baton_py.py: the peers' harness (bench/peers/peercommon.py: one "
             "thread and one connection per client, timing in Python) over `baton.connect(url)`, "
             "`try_acquire`, `acquire(wait=...)` and `release`, with the libbaton.so "
             "of the build named under Run. **baton <store>** is the C++ client (`baton bench`) on the same store "
             "and workload. *Python ÷ C++ time per pair* is C++ pairs/s ÷ Python pairs/s; "
             "*Python ÷ C++ acquire p50* compares the median acquire latencies instead: on a "
             "loaded machine a client thread descheduled for milliseconds drags pairs/s down "
             "(and its mean), not the median. *÷ best Python peer* is Python pairs/s ÷ the best "
             "Python peer's on that engine in the same repetition.")
    o.append("")
    o.append("## Goals")
    o.append("")
    goals(d, o)
    for case, title in CASES.items():
        if not any(c == case for (c, _) in d.by):
            continue
        o.append("")
        o.append(f"## {title}")
        o.append("")
        table(d, case, o)
    o.append("")
    o.append("## Commands")
    o.append("")
    o.append("```sh")
    o.extend(meta["commands"].splitlines())
    o.append("```")
    with open(md_path, "w") as f:
        f.write("\n".join(o) + "\n")


if __name__ == "__main__":
    main()
