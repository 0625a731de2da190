#!/usr/bin/python3
"""bench/report.py RESULTS.jsonl — Markdown tables for bench/run_batond.sh.

Each cell is the median over the repetitions, with the range (min-max) in
brackets. Ratios are computed per repetition (both sides measured in the same
repetition, minutes apart at most) and then summarized the same way.
"""
import json
import statistics
import sys
from collections import defaultdict


def load(path):
    by_case = defaultdict(dict)  # case -> rep -> record
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            by_case[r.get("case", "?")][r.get("rep", 0)] = r
    return by_case


DATA = load(sys.argv[1])


def get(rec, path):
    v = rec
    for k in path.split("."):
        if not isinstance(v, dict) or k not in v:
            return None
        v = v[k]
    return v


def values(case, path):
    out = []
    for rep in sorted(DATA.get(case, {})):
        v = get(DATA[case][rep], path)
        if isinstance(v, (int, float)) and v > 0:
            out.append(float(v))
    return out


def fmt_num(v, unit=""):
    if v >= 1000000:
        s = f"{v / 1000000:.2f}M"
    elif v >= 100000:
        s = f"{v / 1000:.0f}k"
    elif v >= 10000:
        s = f"{v / 1000:.1f}k"
    elif v >= 100:
        s = f"{v:.0f}"
    elif v >= 10:
        s = f"{v:.1f}"
    else:
        s = f"{v:.2f}"
    return s + unit


def cell(vs, unit="", digits=None):
    if not vs:
        return "—"
    med = statistics.median(vs)
    f = (lambda x: f"{x:.{digits}f}{unit}") if digits is not None else (
        lambda x: fmt_num(x, unit))
    if len(vs) == 1:
        return f(med)
    return f"{f(med)} [{f(min(vs))}–{f(max(vs))}]"


def c(case, path, unit="", digits=None):
    return cell(values(case, path), unit, digits)


def ratio_values(num_case, num_path, den_cases, den_path):
    out = []
    for rep in sorted(DATA.get(num_case, {})):
        n = get(DATA[num_case][rep], num_path)
        dens = [get(DATA[d][rep], den_path) for d in den_cases
                if rep in DATA.get(d, {})]
        dens = [d for d in dens if isinstance(d, (int, float)) and d > 0]
        if isinstance(n, (int, float)) and n > 0 and dens:
            out.append(n / max(dens))
    return out


def errors(prefix):
    total = 0
    firsts = []
    for case, reps in DATA.items():
        if not case.startswith(prefix):
            continue
        for r in reps.values():
            e = r.get("errors", 0) or 0
            total += e
            if e and r.get("first_error"):
                firsts.append(f"{case}: {r['first_error']}")
            if r.get("completed") is False:
                firsts.append(f"{case} #{r.get('rep')}: incomplete")
    return total, firsts


def clients_in(prefix):
    cs = set()
    for case in DATA:
        if case.startswith(prefix):
            tail = case.rsplit("/", 1)[-1]
            if tail.isdigit():
                cs.add(int(tail))
    return sorted(cs)


def table(header, rows):
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(" --- " for _ in header) + "|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print()


reps = max((len(v) for v in DATA.values()), default=0)
print(f"Median of {reps} repetitions, [min–max] in brackets.\n")

CL = clients_in("u/batond/")
print("### Uncontended acquire+release pairs/s (batond without persistence "
      "vs raw Redis, same run)\n")
rows = []
for label, case in [
        ("batond (`--data-dir ''`), baton::Client try_acquire+release",
         "u/batond"),
        ("batond (`--data-dir ''`), hiredis LOCK.ACQUIRE+LOCK.RELEASE "
         "(no baton::Client)", "u/batond-raw"),
        ("raw Redis: hiredis SET NX PX + EVAL compare-and-delete",
         "u/redis-eval"),
        ("raw Redis: hiredis SET NX PX + EVALSHA compare-and-delete",
         "u/redis-evalsha")]:
    rows.append([label] + [c(f"{case}/{n}", "pairs_per_sec") for n in CL])
rows.append(["**ratio batond / best raw Redis** (goal ≥ 1.2)"] + [
    "**" + cell(ratio_values(f"u/batond/{n}", "pairs_per_sec",
                             [f"u/redis-eval/{n}", f"u/redis-evalsha/{n}"],
                             "pairs_per_sec"), "×", 2) + "**" for n in CL])
rows.append(["ratio batond via hiredis / best raw Redis"] + [
    cell(ratio_values(f"u/batond-raw/{n}", "pairs_per_sec",
                      [f"u/redis-eval/{n}", f"u/redis-evalsha/{n}"],
                      "pairs_per_sec"), "×", 2) for n in CL])
table(["pairs/s"] + [f"{n} client{'s' if n > 1 else ''}" for n in CL], rows)

rows = []
for label, case in [("batond", "u/batond"),
                    ("batond via hiredis", "u/batond-raw"),
                    ("raw Redis EVAL", "u/redis-eval"),
                    ("raw Redis EVALSHA", "u/redis-evalsha")]:
    for n in CL:
        k = f"{case}/{n}"
        rows.append([f"{label}, {n} client{'s' if n > 1 else ''}",
                     c(k, "acquire.p50_us"), c(k, "acquire.p90_us"),
                     c(k, "acquire.p99_us"), c(k, "acquire.max_us")])
print("Acquire latency (request sent → grant received), µs:\n")
table(["", "p50", "p90", "p99", "max"], rows)

rb = clients_in("rb/redis-setnx/")
if rb:
    print("redis-benchmark, for reference (requests/s; one command per "
          "request, not pairs):\n")
    rows = []
    for label, case in [
            ("Redis: one EVAL doing SET NX PX then compare-and-DEL (a pair)",
             "rb/redis-eval-pair"),
            ("Redis: SET key tok NX PX 30000 (acquire only)",
             "rb/redis-setnx"),
            ("batond: LOCK.ACQUIRE key tok 30000 (acquire only)",
             "rb/batond-acquire")]:
        rows.append([label] + [c(f"{case}/{n}", "rps") for n in rb])
    table(["req/s"] + [f"-c {n}" for n in rb], rows)

print("### Handoff: release → next holder's grant (batond without "
      "persistence)\n")
rows = []
for label, case in [
        ("ping-pong, 2 clients on 1 lock (`--workload handoff`)",
         "handoff/batond/2"),
        ("50 clients on 1 lock (`--workload contended`)",
         "contended/batond/50x1"),
        ("50 clients on 10 locks (`--workload contended`)",
         "contended/batond/50x10")]:
    rows.append([label, c(case, "handoff.p50_us", " µs"),
                 c(case, "handoff.p99_us", " µs"),
                 c(case, "pairs_per_sec")])
table(["", "handoff p50 (goal ≤ 100 µs)", "handoff p99", "pairs/s"], rows)

print("### Durability policies (uncontended pairs/s; handoff p50)\n")
rows = []
for policy in ["never", "batch", "always"]:
    rows.append([f"`--fsync {policy}`"] +
                [c(f"durable/{policy}/u/{n}", "pairs_per_sec") for n in CL] +
                [c(f"durable/{policy}/u/{n}", "acquire.p50_us", " µs")
                 for n in CL] +
                [c(f"durable/{policy}/handoff", "handoff.p50_us", " µs")])
table(["policy"] + [f"pairs/s, {n} cl." for n in CL] +
      [f"acquire p50, {n} cl." for n in CL] + ["handoff p50"], rows)

print("### Memory: held locks\n")
rows = []
for label, case in [
        ("batond (default config: fsync batch, data dir), LOCK.ACQUIRE "
         "with LABEL", "hold/batond"),
        ("batond, same, LOCK.ACQUIRE without LABEL", "hold/batond-nolabel"),
        ("batond without persistence (`--data-dir ''`), with LABEL",
         "hold/batond-nopersist"),
        ("Redis (reference), SET NX PX", "hold/redis")]:
    n = values(case, "pairs")
    if not n:
        continue
    rows.append([label, cell(n),
                 cell([v / 1024 for v in values(case, "rss_before_kb")],
                      " MiB"),
                 cell([v / 1024 for v in values(case, "rss_after_kb")],
                      " MiB"),
                 c(case, "bytes_per_lock", " B"),
                 c(case, "pairs_per_sec")])
table(["", "locks held", "RSS before", "RSS after (goal ≤ 256 MiB)",
       "bytes/lock", "grants/s while loading"], rows)

ws = sorted(int(k.split("/")[1]) for k in DATA if k.startswith("waiters/"))
if ws:
    print("### Waiters on one lock (batond without persistence)\n")
    rows = []
    for w in ws:
        k = f"waiters/{w}"
        per_enq = [v * 1000 / w for v in values(k, "enqueue_ms")]
        per_drain = [v * 1000 / w for v in values(k, "drain_ms")]
        rows.append([str(w), c(k, "connect_ms", " ms"),
                     c(k, "enqueue_ms", " ms"), cell(per_enq, " µs"),
                     c(k, "drain_ms", " ms"), cell(per_drain, " µs"),
                     c(k, "handoff.p50_us", " µs"),
                     c(k, "handoff.p99_us", " µs")])
    table(["waiters", "connect", "enqueue all", "enqueue per waiter",
           "drain all", "drain per waiter", "handoff p50", "handoff p99"],
          rows)

total, firsts = errors("")
print(f"Errors over all runs: {total}.")
for f in firsts[:10]:
    print(f"- {f}")
