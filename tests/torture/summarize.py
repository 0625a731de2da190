#!/usr/bin/python3
"""Sums baton_torture --json output: runs, faults by kind, violations by
checker, worst recovery, checker 10's store overlaps by fault kind
(a finding, not a violation) with one example per kind, and the calls
answered `internal` (a bug in baton; a finding) with the first message.

  summarize.py FILE.jsonl [...]             text, with one example each
  summarize.py --markdown FILE.jsonl [...]  one table row per file
  --exclude S1,S2 (first argument) leaves those seeds out
"""
import collections
import json
import sys

CHECKERS = ["1-fencing", "2-exactly-once", "3-expired-grant", "4-non-owner",
            "5-recovery", "6-fifo", "7-deadline", "8a-holder-deadline",
            "8b-notice-order", "8c-notice-late"]


EXCLUDE = set()


def load(path):
    s = {"runs": 0, "errors": 0, "with_v": 0, "faults": collections.Counter(),
         "checkers": collections.Counter(), "worst": 0, "seeds": [],
         "examples": {}, "counts": collections.Counter(),
         "overlap_runs": 0, "overlap_examples": {},
         "internal_runs": 0, "internal_example": None}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if r["seed"] in EXCLUDE:
                continue
            s["runs"] += 1
            s["seeds"].append(r["seed"])
            if r["error"]:
                s["errors"] += 1
                continue
            s["faults"].update(r["faults"])
            s["counts"].update(r["counts"])
            for k, v in r["counts"].items():
                if k.startswith("violations_"):
                    s["checkers"][k[len("violations_"):]] += v
            if r["violations"]:
                s["with_v"] += 1
            for d in r["details"]:
                s["examples"].setdefault(d["checker"], (r["seed"], d["what"]))
            if r["counts"].get("store_overlaps", 0) > 0:
                s["overlap_runs"] += 1
            for d in r.get("findings", []):
                if d["checker"] == "internal-error":
                    s["internal_runs"] += 1
                    if s["internal_example"] is None:
                        s["internal_example"] = (r["seed"], d["what"])
                if d["checker"] != "10-store-overlap":
                    continue
                kinds = d["what"].rsplit("faults: ", 1)[-1].split(";")[0]
                s["overlap_examples"].setdefault(kinds,
                                                 (r["seed"], d["what"]))
            s["worst"] = max(s["worst"], r["worst_recovery_ms"])
    return s


def faults_text(s):
    injected = {k: v for k, v in s["faults"].items()
                if not k.startswith("skip:") and k != "restart_failed"}
    return ", ".join(f"{k} {v}" for k, v in sorted(injected.items()))


args = sys.argv[1:]
if args and args[0] == "--exclude":
    EXCLUDE = {int(x) for x in args[1].split(",")}
    args = args[2:]
markdown = bool(args) and args[0] == "--markdown"
if markdown:
    args = args[1:]
    print("| file | runs (seeds) | faults injected | " +
          " | ".join(CHECKERS) + " | runs with a violation | worst recovery |")
    print("|---|---|---|" + "---|" * len(CHECKERS) + "---|---|")
for path in args:
    s = load(path)
    name = path.rsplit("/", 1)[-1]
    seeds = f"{min(s['seeds'])}..{max(s['seeds'])}" if s["seeds"] else "-"
    if markdown:
        print(f"| {name} | {s['runs']} ({seeds}) | {faults_text(s)} | " +
              " | ".join(str(s["checkers"].get(c, 0)) for c in CHECKERS) +
              f" | {s['with_v']} | {s['worst']} ms |")
        continue
    print(f"{name}: runs={s['runs']} (seeds {seeds}) errors={s['errors']} "
          f"runs_with_violations={s['with_v']} worst_recovery={s['worst']} ms")
    print("  faults: " + ", ".join(f"{k}={v}"
                                   for k, v in sorted(s["faults"].items())))
    print("  violations by checker: " + (", ".join(
        f"{k}={v}" for k, v in sorted(s["checkers"].items())) or "none"))
    c = s["counts"]
    print(f"  grants={c['grants']} writes_accepted={c['writes_accepted']} "
          f"foreign_attempts={c['foreign_attempts']} "
          f"counter_acked={c['counter_acked']} "
          f"late_acquires_fault_free={c['late_acquires_fault_free']}")
    for k, (seed, what) in sorted(s["examples"].items()):
        print(f"  e.g. [{k}] seed {seed}: {what}")
    under = {k[len("store_overlaps_under_"):]: v for k, v in c.items()
             if k.startswith("store_overlaps_under_")}
    print(f"  store overlaps (checker 10): {c['store_overlaps']} in "
          f"{s['overlap_runs']} runs (before notice "
          f"{c['store_overlaps_before_notice']}, after notice "
          f"{c['store_overlaps_after_notice']})" + ("; under " + ", ".join(
              f"{k}={v}" for k, v in sorted(under.items())) if under else ""))
    for k, (seed, what) in sorted(s["overlap_examples"].items()):
        print(f"  e.g. overlap under {k}: seed {seed}: {what}")
    print(f"  calls answered internal: {c['internal_results']} in "
          f"{s['internal_runs']} runs")
    if s["internal_example"]:
        seed, what = s["internal_example"]
        print(f"  e.g. seed {seed}: {what}")
