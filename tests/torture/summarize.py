#!/usr/bin/python3
"""Sums baton_torture --json output: runs, faults by kind, violations by
checker, worst recovery. Usage: summarize.py FILE.jsonl [...]"""
import collections
import json
import sys

for path in sys.argv[1:]:
    runs = errors = with_v = 0
    faults = collections.Counter()
    checkers = collections.Counter()
    worst = 0
    seeds = []
    examples = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            runs += 1
            seeds.append(r["seed"])
            if r["error"]:
                errors += 1
                continue
            faults.update(r["faults"])
            for k, v in r["counts"].items():
                if k.startswith("violations_"):
                    checkers[k[len("violations_"):]] += v
            if r["violations"]:
                with_v += 1
            for d in r["details"]:
                examples.setdefault(d["checker"], (r["seed"], d["what"]))
            worst = max(worst, r["worst_recovery_ms"])
    store = path.rsplit("/", 1)[-1]
    print(f"{store}: runs={runs} (seeds {min(seeds) if seeds else '-'}.."
          f"{max(seeds) if seeds else '-'}) errors={errors} "
          f"runs_with_violations={with_v} worst_recovery={worst} ms")
    print("  faults: " + ", ".join(f"{k}={v}" for k, v in sorted(faults.items())))
    print("  violations by checker: " +
          (", ".join(f"{k}={v}" for k, v in sorted(checkers.items())) or "none"))
    for k, (seed, what) in sorted(examples.items()):
        print(f"  e.g. [{k}] seed {seed}: {what}")
