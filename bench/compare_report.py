#!/usr/bin/python3
"""bench/compare_report.py RESULTS.jsonl META.json OUT.md OUT.png

Turns bench/compare's raw JSON lines into docs/benchmarks.md (tables of
medians with [min-max] over the repetitions, ratios computed within each
repetition) and a PNG chart (matplotlib, Agg). Run by bench/compare; with
`--only zookeeper` (meta "scope") the page is docs/bench/zookeeper.md.
"""
import collections
import json
import os
import statistics
import sys

CASES = collections.OrderedDict([
    ("u1", "Uncontended, 1 client (own lock, try-acquire + release)"),
    ("u50", "Uncontended, 50 clients (each its own lock)"),
    ("c50", "Contended, 50 clients on 1 lock (blocking acquire, release at once)"),
])
# The raw engine each implementation is compared with (per case family).
RAW = {
    "batond": {"u": "raw batond (hiredis)"},
    "redis": {"u": "raw Redis SET NX + EVALSHA"},
    "postgres": {"u": "pgbench advisory lock", "c": "pgbench advisory lock"},
    "mysql": {"u": "MariaDB GET_LOCK", "c": "MariaDB GET_LOCK"},
    "zookeeper": {"u": "raw ZooKeeper (C client)", "c": "raw ZooKeeper (C client)"},
}
RAW_ZK = RAW["zookeeper"]["u"]
RAW_IMPLS = {"raw batond (hiredis)", "raw Redis SET NX + EVALSHA",
             "redis-benchmark EVAL pair", "pgbench advisory lock",
             "MariaDB GET_LOCK", RAW_ZK, RAW_ZK + " + getChildren",
             "raw ZooKeeper (C client, async + wait)"}
DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs")
BATON_REF = "baton batond"
ENGINE_ORDER = ["batond", "memory", "redis", "postgres", "mysql",
                "zookeeper", "etcd"]


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows


def si(v):
    if v is None:
        return "—"
    a = abs(v)
    if float(v).is_integer() and a < 1e4:
        return str(int(v))
    if a >= 1e6:
        return f"{v / 1e6:.2f}M"
    if a >= 1e4:
        return f"{v / 1e3:.1f}k"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def spread(values, fmt=si, suffix=""):
    values = [v for v in values if v is not None]
    if not values:
        return "—"
    med = statistics.median(values)
    if len(values) == 1:
        return f"{fmt(med)}{suffix}"
    return f"{fmt(med)}{suffix} [{fmt(min(values))}–{fmt(max(values))}]"


def verdict(values, goal, at_least=True):  # the median of values against goal
    m = statistics.median(values) if values else None
    return "" if m is None else " — met" if (m >= goal if at_least else m <= goal) else " — **not met**"


def ratio_fmt(v):
    if v < 0.01:
        return f"{v:.4f}×"
    return f"{v:.2f}×" if v < 10 else f"{v:.1f}×" if v < 100 else f"{v:.0f}×"


def ok(r):
    return r.get("completed", True) and r.get("pairs_per_sec", 0) > 0


def get(r, *path):
    for p in path:
        if not isinstance(r, dict) or p not in r:
            return None
        r = r[p]
    return r


class Data:
    def __init__(self, rows):
        self.rows = rows
        self.by = collections.defaultdict(list)  # (case, impl) -> rows
        self.engine = {}
        for r in rows:
            self.by[(r["case"], r["impl"])].append(r)
            self.engine[r["impl"]] = r.get("engine", "?")

    def impls(self, case):
        names = sorted({i for (c, i) in self.by if c == case},
                       key=lambda i: (i not in RAW_IMPLS and not i.startswith("baton"),
                                      not i.startswith("baton"),
                                      ENGINE_ORDER.index(self.engine[i])
                                      if self.engine[i] in ENGINE_ORDER else 99, i))
        return names

    def per_rep(self, case, impl, key=("pairs_per_sec",)):
        out = {}
        for r in self.by.get((case, impl), []):
            if ok(r):
                out[r["rep"]] = get(r, *key)
        return out

    def ratios(self, case, num, den):
        a, b = self.per_rep(case, num), self.per_rep(case, den)
        return [a[k] / b[k] for k in a if k in b and a[k] and b[k]]


def workload_table(d, case, out):
    out.append("| implementation | engine | pairs/s | × raw engine | "
               "batond ÷ this | acquire p50 µs | acquire p99 µs | "
               "handoff p50 µs | Jain | worst wait ms | errors |")
    out.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    family = case[0]
    for impl in d.impls(case):
        rows = d.by[(case, impl)]
        good = [r for r in rows if ok(r)]
        eng = d.engine[impl]
        if not good:
            err = next((r.get("first_error") for r in rows if r.get("first_error")), "no output")
            out.append(f"| {impl} | {eng} | failed: {err[:80]} | | | | | | | | |")
            continue
        raw = RAW.get(eng, {}).get(family)
        if raw and raw != impl and d.per_rep(case, raw):
            xr = spread(d.ratios(case, impl, raw), ratio_fmt)
        elif raw == impl:
            xr = "(raw)"
        else:
            xr = "—"
        xb = "—" if impl == BATON_REF else spread(d.ratios(case, BATON_REF, impl), ratio_fmt)
        lat = lambda k: spread([get(r, *k) for r in good if get(r, *k)]) if any(get(r, *k) for r in good) else "—"  # noqa: E731
        jain = spread([r.get("jain") for r in good if "jain" in r], lambda v: f"{v:.2f}")
        worst = spread([r.get("worst_wait_ms") for r in good if "worst_wait_ms" in r])
        errs = sum(r.get("errors", 0) for r in rows)
        out.append(f"| {impl} | {eng} | {spread([r['pairs_per_sec'] for r in good])} | {xr} | {xb} | "
                   f"{lat(('acquire', 'p50_us'))} | {lat(('acquire', 'p99_us'))} | "
                   f"{lat(('handoff', 'p50_us'))} | {jain} | {worst} | {errs} |")


def chart(d, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cases = [c for c in CASES if any(k[0] == c for k in d.by)]
    if not cases:
        return
    fig, axes = plt.subplots(1, len(cases), figsize=(6.2 * len(cases), 7.5), squeeze=False)
    for ax, case in zip(axes[0], cases):
        impls = [i for i in d.impls(case) if d.per_rep(case, i)]
        meds, lo, hi, colors = [], [], [], []
        for i in impls:
            v = list(d.per_rep(case, i).values())
            m = statistics.median(v)
            meds.append(m)
            lo.append(m - min(v))
            hi.append(max(v) - m)
            colors.append("#1f5fbf" if i.startswith("baton") else
                          "#8c8c8c" if i in RAW_IMPLS else "#e08a1e")
        y = list(range(len(impls)))[::-1]
        ax.barh(y, meds, xerr=[lo, hi], color=colors, capsize=2)
        ax.set_yticks(y)
        ax.set_yticklabels(impls, fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("acquire+release pairs/s (log scale; median, bars min–max)")
        ax.set_title(CASES[case], fontsize=9)
        ax.grid(axis="x", which="both", alpha=0.3)
        tops = [m + h for m, h in zip(meds, hi)]
        ax.set_xlim(right=max(tops) * 12)
        for yy, m, i, top in zip(y, meds, impls, tops):
            label = " " + si(m)
            if case.startswith("c"):
                jains = [r.get("jain") for r in d.by[(case, i)] if ok(r) and r.get("jain")]
                if jains:
                    label += f"  Jain {statistics.median(jains):.2f}"
            ax.text(top * 1.1, yy, label, va="center", fontsize=7)
    fig.suptitle("baton vs peers (blue: baton, grey: raw engine, orange: peer library) — "
                 "one shared 2-vCPU machine, loopback", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(path, dpi=110)


def main():
    res_path, meta_path, md_path, png_path = sys.argv[1:5]
    d = Data(load(res_path))
    meta = json.load(open(meta_path))
    chart(d, png_path)
    md_dir = os.path.dirname(os.path.abspath(md_path))
    png_rel = os.path.relpath(png_path, md_dir)
    res_rel = os.path.relpath(res_path, md_dir)

    def doc(rel):  # a page under docs/, linked from this page
        return os.path.relpath(os.path.join(DOCS, rel), md_dir)
    scope = meta.get("scope", "")
    o = []
    if scope == "zookeeper":
        o.append("# Benchmarks: ZooKeeper — zookeeper://, its raw floor, kazoo and tooz")
        o.append("")
        o.append("Generated by `bench/compare --only zookeeper` (bench/compare_report.py) — "
                 "rerun it rather than editing this page. Only the ZooKeeper rows of "
                 f"[the full comparison]({doc('benchmarks.md')}), measured on their own "
                 "(only ZooKeeper running). "
                 f"Raw JSON lines of this run: [{os.path.basename(res_path)}]({res_rel}).")
    elif scope == "mysql":
        o.append("# Benchmarks: MariaDB — mysql://, its durable floor, GET_LOCK and tooz")
        o.append("")
        o.append("Generated by `bench/compare --only mysql` (bench/compare_report.py) — "
                 "rerun it rather than editing this page. Only the MariaDB rows of "
                 f"[the full comparison]({doc('benchmarks.md')}), measured on their own "
                 "(only MariaDB running); the store against its floor, variant by variant: "
                 "`bench/run_mysql.sh` ([mysql.md]"
                 f"({doc('stores/mysql.md')}), \"Fast paths\"). "
                 f"Raw JSON lines of this run: [{os.path.basename(res_path)}]({res_rel}).")
    else:
        zk_page = (f" and [ZooKeeper]({doc('bench/zookeeper.md')}) (`bench/compare --only zookeeper`)"
                   if os.path.exists(os.path.join(DOCS, "bench", "zookeeper.md")) else "")
        o.append("# Benchmarks: baton side by side with its peers")
        o.append("")
        o.append("Generated by `bench/compare` (bench/compare_report.py) — rerun it "
                 "rather than editing this page. Store-specific figures live beside it: "
                 f"[batond]({doc('bench/batond.md')}) (memory per lock, fsync policies, waiters)"
                 f"{',' if zk_page else ' and'} "
                 f"[PostgreSQL]({doc('bench/postgres.md')}) (global vs per-name advisory lock)"
                 + (f", [etcd]({doc('bench/etcd.md')}) (`bench/compare --only etcd`)" if zk_page and
                    os.path.exists(os.path.join(DOCS, "bench", "etcd.md")) else "")
                 + (f", [SQLite]({doc('bench/sqlite.md')}) (`bench/compare --only sqlite`: "
                    "against `flock(2)` and batond on one host)" if zk_page and
                    os.path.exists(os.path.join(DOCS, "bench", "sqlite.md")) else "")
                 + (f", [MariaDB]({doc('bench/mysql.md')}) (`bench/compare --only mysql`)"
                    if zk_page and os.path.exists(os.path.join(DOCS, "bench", "mysql.md")) else "")
                 + f"{zk_page}. "
                 + (f"The Python package beside the C++ client and the Python peers: "
                    f"[bench/python.md]({doc('bench/python.md')}) (`bench/compare --only python`). "
                    if os.path.exists(os.path.join(DOCS, "bench", "python.md")) else "")
                 + "The goals not met and what limits them, measured on a quiet machine: "
                 f"[bench/goals.md]({doc('bench/goals.md')}). "
                 f"Raw JSON lines of this run: [{res_rel}]({res_rel}).")
    o.append("")
    o.append("**Read the figures as rough.** Every server, every client and other "
             "people's builds share 2 vCPUs; figures order things, they do not certify them. "
             f"Each figure is the median of {meta['repeats']} repetitions with the range "
             "[min–max]; ratios are computed within each repetition (the two sides measured "
             "minutes apart at most, in the same run) and then summarized the same way.")
    o.append("")
    o.append("## Run")
    o.append("")
    o.extend(run_lines(meta))
    o.append("- servers: private, on free loopback ports, in a temp dir, stopped by pid: " + (
             "ZooKeeper standalone only (default forceSync: every write fsynced), warmed up "
             "by 6 s of raw-zk:// load first" if scope == "zookeeper" else "batond "
             "`--data-dir ''` (no persistence), 3 × redis-server `--save '' --appendonly no`, "
             "PostgreSQL with its default settings (fsync on), MariaDB (`--skip-log-bin`), "
             "ZooKeeper standalone (default forceSync: every write fsynced), etcd single node"))
    o.append("")
    o.append("## How to run")
    o.append("")
    o.append("```sh")
    o.append("bench/compare                       # 3 repeats x 5 s per run, ~30 min; rewrites this page")
    o.append("bench/compare --quick --no-docs     # 1 repeat x 2 s, report in the temp dir only")
    o.append("bench/compare --only baton,raw --repeats 5 --duration 10s")
    o.append("bench/compare --only zookeeper --repeats 2   # ZooKeeper only, 3-5 min: docs/bench/zookeeper.md")
    o.append("baton bench --store baton://127.0.0.1:7420 --workload fair --clients 10   # one workload (docs/cli.md)")
    o.append("```")
    o.append("It installs what is missing (`BATON_BENCH_PACKAGES` in scripts/lib/deps.sh, `npm ci` "
             "in bench/peers/node), builds Release in `build-bench`, and needs root for the servers "
             "(PostgreSQL runs as `postgres` via `setpriv`). `bench/run_batond.sh` remains the "
             "batond-only suite (memory, fsync, waiters).")
    o.append("")
    o.append("## What is measured")
    o.append("")
    o.append("- **Workloads** (the same for every implementation): *uncontended* — each client "
             "loops try-acquire + release on its own lock; *contended* — 50 clients block on one "
             "lock and release as soon as granted. Closed loops, one connection per client, "
             "lease TTL 30 s. *Acquire latency* is request → grant; a *handoff* sample is "
             "release sent → next holder's grant, taken when that holder's request was sent "
             "before the release (all clients in one process, one steady clock). *Jain* is "
             "(Σx)²/(n·Σx²) over per-client pairs (1 = every client got the same share); "
             "*worst wait* is the longest single acquire, including one still waiting at the end.")
    o.append("- **baton**: `baton bench` (src/bench) through `baton::Client` on each store; "
             "`memory:` is in-process, a floor, not a peer: all its clients are threads of the "
             "benchmark process, so with 50 of them on 2 vCPUs its Jain and worst wait show CPU "
             "scheduling (a thread can loop alone for milliseconds before the others run), "
             "not the store.")
    o.append("- **Raw engines**: *raw batond* and *raw Redis* are `baton bench` with "
             "`raw-baton://`/`raw-redis://` — hiredis, one connection per client, "
             "`LOCK.ACQUIRE`/`LOCK.RELEASE`, resp. `SET key tok NX PX 30000` + the "
             "compare-and-delete Lua script by EVALSHA (the loadgen baseline, not "
             "redis-benchmark, because it is a closed loop of real pairs like everything else); "
             "*redis-benchmark EVAL pair* (the whole pair as one server-side script, random keys) "
             "is shown for reference. *pgbench*: `-M prepared -j 2 -T`, script "
             "`pg_try_advisory_lock(:client_id+1000)` + `pg_advisory_unlock` (contended: "
             "`pg_advisory_lock(1)`, which blocks in the server). *MariaDB*: `mariadb-slap` with "
             "`GET_LOCK(name, 0)` + `RELEASE_LOCK` (contended: `GET_LOCK('bench_c', 10)`), "
             "a fixed number of pairs per client, pairs/s = pairs / wall time. " +
             ("*raw ZooKeeper (C client)* is `baton bench` with `raw-zk://` (src/bench/raw_zk.cc): "
              "libzookeeper-mt, one session per client, per pair one EPHEMERAL_SEQUENTIAL node "
              "created under the lock's parent and deleted — two quorum writes, the least a "
              "ZooKeeper lock that ends with its owner's session can do; contended, the lock "
              "recipe (getChildren, a watch on the node just ahead, getChildren again when it "
              "goes); *+ getChildren* adds the read a try-acquire needs to learn it is first; "
              "*async + wait* makes create and delete async calls (one thread hop more). "
              "etcd has no raw baseline here." if any(i == RAW_ZK for (_, i) in d.by) else
              "ZooKeeper and etcd have no raw baseline in this run."))
    o.append("- **Peers** (bench/peers/, Debian and npm packages only; Python under "
             "`/usr/bin/python3`, one thread per client; Node: one async loop per client in one "
             "process): redis-py `Lock` (blocking acquire polls every 0.1 s, its default), tooz "
             "(redis, postgresql, mysql, zookeeper drivers; one coordinator per client), npm "
             "`redlock` v4 on one Redis (blocking = its retries, 200 ms + jitter), npm "
             "`redis-semaphore` `Mutex` (polls every 10 ms), kazoo `Lock` (ZooKeeper sequential "
             "nodes, FIFO), python-etcd3 `Lock` and npm `etcd3` `Lock` (contended: this harness "
             "retries a non-blocking acquire every 10 ms — npm etcd3 has no blocking acquire, "
             "python-etcd3's fails with a TypeError against Debian 12's tenacity).")
    o.append("- **Reading contended rows**: a polling lock lets the releasing client re-acquire "
             "at once (it is awake, the others sleep), so its pairs/s can be high while most "
             "clients starve — look at Jain and worst wait, not pairs/s alone. baton grants in "
             "FIFO order, so every client gets its turn.")
    o.append("")
    findings(d, o)
    o.append(f"![pairs/s per implementation]({png_rel})")
    o.append("")
    for case, title in CASES.items():
        if not any(k[0] == case for k in d.by):
            continue
        o.append(f"## {title}")
        o.append("")
        workload_table(d, case, o)
        o.append("")
    if not scope:
        python_section(d, o, md_dir)
    # The redis:// store's goals.
    if any(k[1] == "baton redis://" for k in d.by):
        o.append("## The redis:// store against its goals")
        o.append("")
        o.append("| goal | measured (median [range]) |")
        o.append("| --- | --- |")
        for case, n in (("u1", "1 client"), ("u50", "50 clients")):
            r = d.ratios(case, "baton redis://", "raw Redis SET NX + EVALSHA")
            o.append(f"| redis:// pairs/s ≥ 0.9× raw Redis, {n} | {spread(r, ratio_fmt)}{verdict(r, 0.9)} |")
        for peer in ("redis-py Lock", "npm redlock", "npm redis-semaphore"):
            r = d.ratios("u1", "baton redis://", peer)
            goal = " (goal ≥ 3×)" if peer == "redis-py Lock" else ""
            v = verdict(r, 3.0) if peer == "redis-py Lock" else ""
            o.append(f"| redis:// ÷ {peer}, 1 client{goal} | {spread(r, ratio_fmt)}{v} |")
        for case, n in (("u1", "1 client"), ("u50", "50 clients")):
            r = d.ratios(case, "baton redlock:// (3)", "baton redis://")
            o.append(f"| redlock:// over 3 ÷ redis://, {n} | {spread(r, ratio_fmt)} |")
        h = d.by.get(("handoff", "baton redis"), [])
        hp50 = spread([get(r, "handoff", "p50_us") for r in h if ok(r)], suffix=" µs")
        hp99 = spread([get(r, "handoff", "p99_us") for r in h if ok(r)], suffix=" µs")
        o.append(f"| redis:// handoff (ping-pong, 2 clients) p50 / p99 | {hp50} / {hp99} |")
        o.append("")
    zookeeper_goals(d, o)
    extra = [("fair", "fair: 10 clients on one lock"),
             ("mixed", "mixed: 20 clients, 5 shared locks (60% own try, 25% shared wait+extend, 15% shared try)"),
             ("handoff", "handoff: 2 clients ping-pong, release only once the other is parked")]
    if any(k[0] in ("fair", "mixed", "handoff") for k in d.by):
        o.append("## baton-only workloads per store")
        o.append("")
        o.append("| workload | store | pairs/s | acquire p50 µs | acquire p99 µs | handoff p50 µs | "
                 "handoff p99 µs | Jain | worst wait ms | busy | errors |")
        o.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for case, title in extra:
            for impl in sorted({i for (c, i) in d.by if c == case}):
                rows = d.by[(case, impl)]
                good = [r for r in rows if ok(r)]
                if not good:
                    err = next((r.get("first_error") for r in rows if r.get("first_error")), "no output")
                    o.append(f"| {case} | {impl} | failed: {err[:80]} | | | | | | | | |")
                    continue
                f = lambda *k: spread([get(r, *k) for r in good if get(r, *k) is not None])  # noqa: E731
                o.append(f"| {case} | {impl} | {f('pairs_per_sec')} | {f('acquire', 'p50_us')} | "
                         f"{f('acquire', 'p99_us')} | {f('handoff', 'p50_us')} | {f('handoff', 'p99_us')} | "
                         f"{spread([r.get('jain') for r in good], lambda v: f'{v:.2f}')} | {f('worst_wait_ms')} | "
                         f"{f('busy')} | {sum(r.get('errors', 0) for r in rows)} |")
        o.append("")
        o.append("Workloads: " + "; ".join(t for _, t in extra) + ".")
        o.append("")
    scenarios(d, o)
    failed = []
    for (case, impl), rows in sorted(d.by.items()):
        if not any(ok(r) or r.get("scenario") for r in rows):
            err = next((r.get("first_error") for r in rows if r.get("first_error")), "no output")
            failed.append(f"- {impl}, {case}: {err}")
    o.append("## Not measured, and why")
    o.append("")
    o.extend(failed or ["- Every implementation listed above produced figures in every repetition "
                        "(failures would be listed here with their first error)."])
    zk_raw = any(i == RAW_ZK for (_, i) in d.by)
    o.append(("- Raw etcd baseline: no Debian command-line load tool speaks its lock recipe; "
              "python-etcd3 is the closest.") if zk_raw else (
             "- Raw ZooKeeper and etcd baselines: no Debian command-line load tool speaks "
             "their lock recipes; kazoo and python-etcd3 are the closest."))
    o.append("- Contended runs of `raw batond`, `raw Redis` and `redis-benchmark`: they have no "
             "blocking acquire (a closed loop of try-acquire on one key is not a lock)." +
             (" `raw ZooKeeper` has one (the recipe), so it is measured contended too." if zk_raw else ""))
    o.append("- Redlock over several instances for the npm `redlock` peer: it runs on one Redis, "
             "the way most users deploy it; baton's `redlock://` row uses 3 instances.")
    o.append("")
    o.append("## Every command")
    o.append("")
    o.append("`$BATOND_PORT`, `$REDIS_PORT` etc. stand for the private servers' ports; the peers run from `bench/peers/`.")
    o.append("")
    o.append("```sh")
    o.extend(meta["commands"].splitlines())
    o.append("```")
    o.append("")
    with open(md_path, "w") as f:
        f.write("\n".join(o))


def zookeeper_goals(d, o):
    """The zookeeper:// goals (≥ 2× kazoo, ≤ 1.3× the floor, handoff ≤ 1 ms)."""
    zk, kz = "baton zookeeper://", "kazoo Lock"
    if not any(i in (zk, RAW_ZK) for (_, i) in d.by):
        return
    good = lambda case, impl: [r for r in d.by.get((case, impl), []) if ok(r)]  # noqa: E731
    vals = lambda case, impl, *k: [get(r, *k) for r in good(case, impl)]  # noqa: E731
    o.extend(["## The zookeeper:// store against its goals", "",
              "| goal | measured (median [range]) |", "| --- | --- |"])
    mine = [r for (c, i), rows in d.by.items() if i.startswith("baton zookeeper") for r in rows]
    if mine and not any(ok(r) for r in mine):
        why = next((r.get("first_error") for r in mine if r.get("first_error")), "no output")
        o.append(f"| zookeeper:// itself | not measured: {why[:160]} |")
    r = d.ratios("u1", zk, kz)
    o.append(f"| zookeeper:// ÷ kazoo Lock, uncontended, 1 client (goal ≥ 2×) | "
             f"{spread(r, ratio_fmt)}{verdict(r, 2.0)} |")
    r = d.ratios("u1", zk, "tooz (zookeeper)")
    o.append(f"| zookeeper:// ÷ tooz (zookeeper), uncontended, 1 client | {spread(r, ratio_fmt)} |")
    r = d.ratios("u1", RAW_ZK, kz)
    o.append(f"| raw floor ÷ kazoo Lock, uncontended, 1 client (the most any client could gain) | "
             f"{spread(r, ratio_fmt)} |")
    for case, n in (("u1", "uncontended, 1 client"), ("u50", "uncontended, 50 clients"),
                    ("c50", "contended, 50 clients on 1 lock")):
        r = d.ratios(case, RAW_ZK, zk)
        o.append(f"| raw floor ÷ zookeeper:// pairs/s, {n} (goal ≤ 1.3×) | "
                 f"{spread(r, ratio_fmt)}{verdict(r, 1.3, at_least=False)} |")
    for impl in (zk, RAW_ZK, kz):
        v = vals("c50", impl, "handoff", "p50_us")
        goal, mark = (" (goal ≤ 1 ms)", verdict(v, 1000, at_least=False)) if impl == zk else ("", "")
        o.append(f"| {impl}: contended handoff p50, 50 clients on 1 lock{goal} | "
                 f"{spread(v, suffix=' µs')}{mark} |")
    for impl in ("baton zookeeper", RAW_ZK):
        p50, p99 = vals("handoff", impl, "handoff", "p50_us"), vals("handoff", impl, "handoff", "p99_us")
        o.append(f"| {impl}: handoff ping-pong (2 clients) p50 / p99 | "
                 f"{spread(p50, suffix=' µs')} / {spread(p99, suffix=' µs')} |")
    for case, impls, n in (("c50", (zk, RAW_ZK, kz, "tooz (zookeeper)"), "contended, 50 clients"),
                           ("fair", ("baton zookeeper", RAW_ZK), "fair, 10 clients")):
        for impl in impls:
            if good(case, impl):
                o.append(f"| {impl}: Jain / worst wait, {n} | "
                         f"{spread(vals(case, impl, 'jain'), lambda v: f'{v:.2f}')} / "
                         f"{spread(vals(case, impl, 'worst_wait_ms'), suffix=' ms')} |")
    o.extend(["", "Ratios are per repetition (both sides in the same run). The raw floor (`raw-zk://`) does "
              "only the ZooKeeper operations the lock needs, with the same C client; zookeeper:// also keeps "
              "the whole contract (TTL leases by ZooKeeper's clock, fencing, labels, capacity).", ""])


def med(d, case, impl, *key):
    v = [get(r, *key) for r in d.by.get((case, impl), []) if ok(r) and get(r, *key) is not None]
    return statistics.median(v) if v else None


def findings(d, o):
    """A few sentences computed from the tables (no hand-written figures)."""
    f = []
    peers = [i for (c, i) in d.by if c == "u1" and not i.startswith("baton") and i not in RAW_IMPLS]
    b1 = med(d, "u1", BATON_REF, "pairs_per_sec")
    if b1 and peers:
        best = max(peers, key=lambda i: med(d, "u1", i, "pairs_per_sec") or 0)
        r = d.ratios("u1", BATON_REF, best)
        if r:
            f.append(f"Uncontended, 1 client: baton on batond does {si(b1)} pairs/s, "
                     f"{ratio_fmt(statistics.median(r))} the fastest peer library ({best}).")
    bj = med(d, "c50", BATON_REF, "jain")
    bw = med(d, "c50", BATON_REF, "worst_wait_ms")
    pj = {i: med(d, "c50", i, "jain") for (c, i) in d.by
          if c == "c50" and not i.startswith("baton") and i not in RAW_IMPLS}
    pj = {i: v for i, v in pj.items() if v is not None}
    if bj is not None and pj:
        lo, hi = min(pj, key=pj.get), max(pj, key=pj.get)
        f.append(f"Contended, 50 clients on one lock: baton on batond has Jain {bj:.2f} "
                 f"(worst wait {si(bw)} ms); the peers range from {pj[lo]:.2f} ({lo}) to "
                 f"{pj[hi]:.2f} ({hi}). A polling lock lets the client that just released "
                 "take it again while the others sleep; a queue (baton, ZooKeeper's "
                 "sequential nodes) serves them in turn.")
    s0 = [r for r in d.rows if r["case"] == "microbatch" and ok(r) and "scenario" in r]
    if s0:
        fw = statistics.median(get(r, "scenario", "fifo", "late", "worst_wait_ms") for r in s0)
        pw = statistics.median(get(r, "scenario", "polling", "late", "worst_wait_ms") for r in s0)
        ft = statistics.median(get(r, "scenario", "fifo", "namespaces_per_sec") for r in s0)
        pt = statistics.median(get(r, "scenario", "polling", "namespaces_per_sec") for r in s0)
        fr = statistics.median(get(r, "scenario", "fifo", "lock_requests") for r in s0)
        pr = statistics.median(get(r, "scenario", "polling", "lock_requests") for r in s0)
        f.append(f"Micro-batch scheduler: the late process's worst wait is {si(fw)} ms with baton's FIFO "
                 f"`acquire_some` and {si(pw)} ms with naive polling ({ratio_fmt(pw / fw) if fw else '—'}); "
                 f"throughput {si(ft)} vs {si(pt)} namespaces/s, with {si(fr)} vs {si(pr)} lock requests.")
    s3 = [r for r in d.rows if r["case"] == "segments" and r.get("scenario")]
    if s3:
        parts = []
        for impl in sorted({r["impl"] for r in s3}):
            rows = [r for r in s3 if r["impl"] == impl]
            c = statistics.median(get(r, "scenario", "center", "seconds") for r in rows)
            g = statistics.median(get(r, "scenario", "segments", "seconds") for r in rows)
            inc = any(get(r, "scenario", p, "complete") is False for r in rows for p in ("center", "segments"))
            parts.append(f"{impl.replace('baton ', '')} {si(c)} s / {si(g)} s"
                         + (" (cut at the bound before 5000 modifications)" if inc else ""))
        f.append("Center lock / 100 segments (the MySQL lock table's production report: 8 s / 5 s): "
                 + ", ".join(parts) + ".")
    if f:
        o.append("## Findings (computed from the tables below)")
        o.append("")
        o.extend(f"- {x}" for x in f)
        o.append("")


def run_lines(meta):
    """The "## Run" list of a page: machine, date, load, commit, versions, command."""
    loads = [ln.split() for ln in meta["loads"].splitlines() if ln.strip()]
    one_min = [float(x[1]) for x in loads if len(x) >= 2]
    out = [f"- machine: {meta['machine']}", f"- date: {meta['start_utc']} → {meta['end_utc']}"]
    if one_min:
        out.append(f"- load average (1 min) sampled after each workload: {min(one_min):.1f}–"
                   f"{max(one_min):.1f} (median {statistics.median(one_min):.1f}); the machine "
                   "was shared with other builds")
    out += [f"- baton: {meta['baton']}", f"- versions: {meta['versions']}",
            f"- command: `{meta['invocation']}` ({meta['duration']} per run)"]
    return out


def python_section(d, o, md_dir):
    """The Python package's rows: in the tables above when this run measured
    them (group python), else those of the last `bench/compare --only
    python` run (docs/bench/python-results.jsonl), said to be of that run."""
    page = os.path.relpath(os.path.join(DOCS, "bench", "python.md"), md_dir)
    o.append("## The Python package")
    o.append("")
    if any(i.startswith("baton (Python)") for (_, i) in d.by):
        o.append("The rows *baton (Python) …* above are the Python package (python/, over "
                 "libbaton.so) on the peers' harness, one thread and one client per client; "
                 f"[bench/python.md]({page}) checks its goals (`bench/compare --only python`).")
        o.append("")
        return
    res = os.path.join(DOCS, "bench", "python-results.jsonl")
    meta_path = os.path.join(DOCS, "bench", "python-meta.json")
    if not (os.path.exists(res) and os.path.exists(meta_path)):
        o.append(f"Not measured in this run: `bench/compare --only python` ([bench/python.md]({page})).")
        o.append("")
        return
    import compare_report_python as cp
    meta = json.load(open(meta_path))
    pd = Data(load(res))
    o.append(f"Not measured in this run: these rows are from the run of [bench/python.md]({page}) "
             f"(`{meta['invocation']}`, {meta['start_utc']} → {meta['end_utc']}, {meta['baton']}), "
             "with the C++ client measured in that same run beside them; that page checks the "
             "package's goals.")
    for case, title in CASES.items():
        if any(c == case for (c, _) in pd.by):
            o.append("")
            o.append(f"### {title}")
            o.append("")
            cp.table(pd, case, o)
    o.append("")


def scenarios(d, o):
    s0 = [r for r in d.rows if r["case"] == "microbatch" and ok(r) and "scenario" in r]
    s3 = collections.defaultdict(list)
    for r in d.rows:
        if r["case"] == "segments" and "scenario" in r:
            s3[r["impl"]].append(r)
    if not s0 and not s3:
        return
    o.append("## Scenarios")
    o.append("")
    if s0:
        o.append("### microbatch: FIFO multi-lock scheduling vs naive polling (micro-batch pipelines)")
        o.append("")
        o.append("100 namespaces, one lock each; time scaled so one scenario second is 100 ms. "
                 "A *recent* run starts every (scaled) second with 2 shards, shard j needing the "
                 "50 namespaces i with i mod 2 = j and processing each for 1.8 ms (90% of the "
                 "period); a *late* run starts every 10 (scaled) seconds with 1 shard needing all "
                 "100 (0.5 ms each). Every shard avoids hold-and-wait: take whatever is "
                 "granted, process those namespaces, release them, ask again for the rest. First "
                 "half of the run: baton's `acquire_some` (one reservation per shard, FIFO queue per "
                 "lock); second half, same store, fresh names: naive SETNX-style polling "
                 "(`try_acquire` each missing lock, sleep 10 ms = 0.1 scenario s, retry). A shard's "
                 "*wait* is its start → all its namespaces processed (or the end of the phase, for "
                 "a shard still unfinished). Store: batond.")
        o.append("")
        o.append("| | FIFO (`acquire_some`) | polling (`try_acquire` + sleep) |")
        o.append("| --- | --- | --- |")

        def row(label, *path, fmt=si):
            vals = [spread([get(r, "scenario", mode, *path) for r in s0], fmt)
                    for mode in ("fifo", "polling")]
            o.append(f"| {label} | {vals[0]} | {vals[1]} |")
        row("late: worst wait, ms", "late", "worst_wait_ms")
        row("late: median wait, ms", "late", "wait_p50_ms")
        row("late: shards finished", "late", "shards_done")
        row("late: shards unfinished at the end", "late", "shards_unfinished")
        row("recent: worst wait, ms", "recent", "worst_wait_ms")
        row("recent: median wait, ms", "recent", "wait_p50_ms")
        row("recent: shards finished", "recent", "shards_done")
        row("recent: runs skipped (20 shards already in flight)", "recent", "runs_skipped")
        row("throughput: namespaces processed/s", "namespaces_per_sec")
        row("lock requests sent", "lock_requests")
        row("errors", "errors")
        o.append("")
    if s3:
        o.append("### segments: 50 threads × 100 guarded modifications")
        o.append("")
        o.append("Each modification: acquire the guard lock (blocking), read a counter row, yield, "
                 "write it + 1, release. The rows (1000 of them, 5 modifications each) live in the "
                 "benchmark's memory, so a broken lock shows as lost updates. *center*: one lock "
                 "for everything (a MySQL lock table's `center_lock` design: ~8 s in production); *segments*: 100 locks, "
                 "`center_lock_NN` with NN = crc32(row name) mod 100 (its successor: ~5 s). "
                 "One `baton::Client` per thread.")
        o.append("")
        o.append("| store | center lock: seconds | 100 segments: seconds | center acquire p50 µs | "
                 "segments acquire p50 µs | lost updates | errors |")
        o.append("| --- | --- | --- | --- | --- | --- | --- |")
        for impl, rows in sorted(s3.items()):
            good = [r for r in rows if r.get("scenario")]
            def g(*k):
                phase = k[0]
                cut = [r for r in good if get(r, "scenario", phase, "complete") is False]
                text = spread([get(r, "scenario", *k) for r in good])
                if cut and k[-1] == "seconds":
                    done = statistics.median(get(r, "scenario", phase, "modifications") for r in cut)
                    text = (f"cut at {text} in {len(cut)} of {len(good)} runs "
                            f"({si(done)} of 5000 done)")
                return text
            lost = sum((get(r, "scenario", "center", "lost_updates") or 0) +
                       (get(r, "scenario", "segments", "lost_updates") or 0) for r in good)
            incomplete = sum(1 for r in good for p in ("center", "segments")
                             if get(r, "scenario", p, "complete") is False)
            errs = sum(r.get("errors", 0) for r in rows)
            note = ""
            o.append(f"| {impl.replace('baton ', '')} | {g('center', 'seconds')} | {g('segments', 'seconds')} | "
                     f"{g('center', 'acquire_p50_us')} | {g('segments', 'acquire_p50_us')} | {lost} | {errs}{note} |")
        o.append("")


if __name__ == "__main__":
    main()
