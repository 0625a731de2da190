#!/usr/bin/python3
"""bench/compare_report_etcd.py RESULTS.jsonl META.json OUT.md OUT.png

The page of `bench/compare --only etcd` (docs/bench/etcd.md): etcd:// on one
member and on a 3-member cluster, the raw floor (raw-etcd://), python-etcd3
and npm etcd3, with the store's goals computed from the same run. Reuses
bench/compare_report.py's tables and chart.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_report as cr  # noqa: E402

SETUPS = ("1 member", "3 members")
for _s in SETUPS:
    cr.RAW_IMPLS.add(f"raw etcd floor ({_s})")


def store(s):
    return f"baton etcd:// ({s})"


def floor(s):
    return f"raw etcd floor ({s})"


def table(d, case, o):
    """cr.workload_table with the raw floor of the same setup as the base."""
    o.append("| implementation | pairs/s | × raw floor (same setup) | acquire p50 µs | "
             "acquire p99 µs | handoff p50 µs | handoff p99 µs | Jain | worst wait ms | errors |")
    o.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for impl in d.impls(case):
        rows = d.by[(case, impl)]
        good = [r for r in rows if cr.ok(r)]
        if not good:
            err = next((r.get("first_error") for r in rows if r.get("first_error")), "no output")
            o.append(f"| {impl} | failed: {err[:80]} | | | | | | | | |")
            continue
        setup = next((s for s in SETUPS if impl.endswith(f"({s})")), None)
        raw = floor(setup) if setup else None
        if impl == raw:
            xr = "(floor)"
        elif raw and d.per_rep(case, raw):
            xr = cr.spread(d.ratios(case, impl, raw), cr.ratio_fmt)
        else:
            xr = "—"

        def f(*k):
            v = [cr.get(r, *k) for r in good if cr.get(r, *k)]
            return cr.spread(v) if v else "—"
        jain = cr.spread([r.get("jain") for r in good if "jain" in r], lambda v: f"{v:.2f}")
        worst = cr.spread([r.get("worst_wait_ms") for r in good if "worst_wait_ms" in r])
        errs = sum(r.get("errors", 0) for r in rows)
        o.append(f"| {impl} | {cr.spread([r['pairs_per_sec'] for r in good])} | {xr} | "
                 f"{f('acquire', 'p50_us')} | {f('acquire', 'p99_us')} | {f('handoff', 'p50_us')} | "
                 f"{f('handoff', 'p99_us')} | {jain} | {worst} | {errs} |")


def goals(d, o):
    good = lambda case, impl: [r for r in d.by.get((case, impl), []) if cr.ok(r)]  # noqa: E731
    vals = lambda case, impl, *k: [cr.get(r, *k) for r in good(case, impl)  # noqa: E731
                                   if cr.get(r, *k) is not None]
    o.extend(["## The etcd:// store against its goals", "",
              "| goal | measured (median [range]) |", "| --- | --- |"])
    for s in SETUPS:
        r = d.ratios("u1", store(s), f"python-etcd3 Lock ({s})")
        o.append(f"| etcd:// ÷ python-etcd3 Lock, uncontended, 1 client, {s} (goal ≥ 3×) | "
                 f"{cr.spread(r, cr.ratio_fmt)}{cr.verdict(r, 3.0)} |")
        r = d.ratios("u1", floor(s), f"python-etcd3 Lock ({s})")
        o.append(f"| raw floor ÷ python-etcd3 Lock, uncontended, 1 client, {s} (the most a client of "
                 f"this etcd could gain with two writes per pair) | {cr.spread(r, cr.ratio_fmt)} |")
        r = d.ratios("u1", store(s), f"npm etcd3 Lock ({s})")
        o.append(f"| etcd:// ÷ npm etcd3 Lock, uncontended, 1 client, {s} | {cr.spread(r, cr.ratio_fmt)} |")
    for s in SETUPS:
        for case, n in (("u1", "1 client"), ("u50", "50 clients")):
            r = d.ratios(case, floor(s), store(s))
            o.append(f"| raw floor ÷ etcd:// pairs/s, uncontended, {n}, {s} (goal ≤ 1.3×) | "
                     f"{cr.spread(r, cr.ratio_fmt)}{cr.verdict(r, 1.3, at_least=False)} |")
            r = d.ratios(case, floor(s), f"baton etcd:// lease=own ({s})")
            if r:
                o.append(f"| raw floor ÷ etcd:// lease=own (a lease per key, the design before "
                         f"shared leases), uncontended, {n}, {s} | {cr.spread(r, cr.ratio_fmt)} |")
    for s in SETUPS:
        v = vals("c50", store(s), "handoff", "p50_us")
        p99 = vals("c50", store(s), "handoff", "p99_us")
        goal = " (goal ≤ 2 ms)" if s == "3 members" else ""
        mark = cr.verdict(v, 2000, at_least=False) if s == "3 members" else ""
        o.append(f"| etcd:// contended handoff p50 / p99, 50 clients on 1 lock, {s}{goal} | "
                 f"{cr.spread(v, suffix=' µs')} / {cr.spread(p99, suffix=' µs')}{mark} |")
    for s in SETUPS:
        p50 = vals("handoff", store(s), "handoff", "p50_us")
        p99 = vals("handoff", store(s), "handoff", "p99_us")
        o.append(f"| etcd:// handoff ping-pong (2 clients) p50 / p99, {s} | "
                 f"{cr.spread(p50, suffix=' µs')} / {cr.spread(p99, suffix=' µs')} |")
    for case, n in (("c50", "contended, 50 clients"), ("fair", "fair, 10 clients")):
        for impl in sorted({i for (c, i) in d.by if c == case}):
            if good(case, impl):
                o.append(f"| {impl}: Jain / worst wait, {n} | "
                         f"{cr.spread(vals(case, impl, 'jain'), lambda v: f'{v:.2f}')} / "
                         f"{cr.spread(vals(case, impl, 'worst_wait_ms'), suffix=' ms')} |")
    o.extend(["", "Ratios are per repetition (both sides in the same run, minutes apart at most), "
              "then summarized as median [min–max].", ""])


def main():
    res_path, meta_path, md_path, png_path = sys.argv[1:5]
    d = cr.Data(cr.load(res_path))
    meta = cr.json.load(open(meta_path))
    loads = [ln.split() for ln in meta["loads"].splitlines() if ln.strip()]
    one_min = [float(x[1]) for x in loads if len(x) >= 2]
    cr.chart(d, png_path)
    md_dir = os.path.dirname(os.path.abspath(md_path))
    png_rel = os.path.relpath(png_path, md_dir)
    res_rel = os.path.relpath(res_path, md_dir)
    o = ["# Benchmarks: etcd — etcd:// (1 member, 3 members), its raw floor, python-etcd3, npm etcd3",
         "",
         "Generated by `bench/compare --only etcd` (bench/compare_etcd.sh, "
         "bench/compare_report_etcd.py) — rerun it rather than editing this page; only etcd "
         f"runs. Raw JSON lines of this run: [{os.path.basename(res_path)}]({res_rel}). "
         "The store's design and what the figures mean for it: "
         f"[docs/stores/etcd.md]({os.path.relpath(os.path.join(cr.DOCS, 'stores/etcd.md'), md_dir)}).",
         "",
         "**Read the figures as rough.** Every etcd member, every client and other people's "
         "builds share 2 vCPUs; figures order things, they do not certify them. Each figure is "
         f"the median of {meta['repeats']} repetitions with the range [min–max]; ratios are "
         "computed within each repetition and then summarized the same way.",
         "", "## Run", "",
         f"- machine: {meta['machine']}",
         f"- date: {meta['start_utc']} → {meta['end_utc']}"]
    if one_min:
        o.append(f"- load average (1 min) sampled after each workload: {min(one_min):.1f}–"
                 f"{max(one_min):.1f} (median {statistics.median(one_min):.1f}); the machine was "
                 "shared with other builds and tests")
    o += [f"- baton: {meta['baton']}",
          f"- versions: {meta['versions']}",
          f"- command: `{meta['invocation']}` ({meta['duration']} per run)",
          "- servers: private etcd members on free loopback ports, stopped by pid: one member, "
          "and a 3-member cluster, both with data on /dev/shm (etcd 3.4 fsyncs every write and "
          "has no flag to skip it: on this machine's disk the figures would be the disk's), "
          "etcd's default heartbeat (100 ms) and election timeout (1 s). Every client of the "
          "cluster is given the leader's endpoint first (a follower forwards each write to the "
          "leader: one more hop, for every implementation alike).",
          "", "## What is measured", "",
          "- **Workloads**: *uncontended* — each client loops try-acquire + release on its own "
          "lock; *contended* — 50 clients block on one lock and release as soon as granted; "
          "*fair* — 10 clients on one lock; *handoff* — 2 clients ping-pong. Lease TTL 30 s. "
          "A *handoff* sample is release sent → next holder's grant; *Jain* is "
          "(Σx)²/(n·Σx²) over per-client pairs; *worst wait* the longest single acquire.",
          "- **etcd://**: `baton bench` through `baton::Client` on the store (src/stores/etcd).",
          "- **raw etcd floor**: `baton bench --store raw-etcd://…` (src/bench/raw_etcd.cc), "
          "the same gRPC client with nothing of baton: one session lease per client (granted "
          "again when half its TTL has passed), per pair one put-if-absent Txn with that lease "
          "and one delete guarded by create revision — two raft writes. Uncontended only (it "
          "has no queue).",
          "- **Peers** (bench/peers/): python-etcd3 `Lock` (`/usr/bin/python3`, one thread "
          "per client) and npm `etcd3` `Lock` (one async loop per client); contended, this "
          "harness retries a non-blocking acquire every 10 ms (npm etcd3 has no blocking "
          "acquire; python-etcd3's fails with a TypeError against Debian 12's tenacity), so "
          "their contended rows are polling, not queues: read Jain and worst wait.",
          ""]
    goals(d, o)
    o.append(f"![pairs/s per implementation]({png_rel})")
    o.append("")
    for case, title in list(cr.CASES.items()) + [("fair", "fair: 10 clients on one lock"),
                                                  ("handoff", "handoff: 2 clients ping-pong")]:
        if not any(k[0] == case for k in d.by):
            continue
        o.append(f"## {title}")
        o.append("")
        table(d, case, o)
        o.append("")
    failed = []
    for (case, impl), rows in sorted(d.by.items()):
        if not any(cr.ok(r) for r in rows):
            err = next((r.get("first_error") for r in rows if r.get("first_error")), "no output")
            failed.append(f"- {impl}, {case}: {err}")
    o += ["## Not measured, and why", ""]
    o += failed or ["- Every implementation listed above produced figures in every repetition "
                    "(failures would be listed here with their first error)."]
    o += ["- The raw floor contended: it has no queue (a loop of try-acquire on one key is "
          "not a lock).", "",
          "## Every command", "",
          "`$ETCD_PORT` is the single member's port; the cluster's ports are the run's own; "
          "the peers run from `bench/peers/`.", "", "```sh"]
    o += meta["commands"].splitlines()
    o += ["```", ""]
    with open(md_path, "w") as f:
        f.write("\n".join(o))


if __name__ == "__main__":
    main()
