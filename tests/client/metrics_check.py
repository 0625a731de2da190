#!/usr/bin/env python3
"""Checks a Prometheus text exposition with the reference parser.

    metrics_check.py EXPOSITION EXPECTED.json

Parses EXPOSITION with prometheus_client's text_string_to_metric_families
(a parse error fails), then checks:
  - no series appears twice;
  - every histogram series has buckets whose `le` bounds increase, whose
    counts are cumulative (never decrease), with a last bucket le="+Inf"
    equal to its _count, and a _sum;
  - every sample in EXPECTED.json ({"samples": [[name, {labels}, value],
    ...], "types": {family: type}}) is present with that value.
Prints what it found wrong and exits 1, or prints "ok" and exits 0.
"""
import json
import math
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        text = f.read()
    with open(sys.argv[2], encoding="utf-8") as f:
        expected = json.load(f)
    problems = []
    samples = {}
    types = {}
    histograms = {}  # (family, labels without le) -> {"buckets", "sum", "count"}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            if key in samples:
                problems.append("series twice: %s %s" % key)
            samples[key] = s.value
            if family.type != "histogram":
                continue
            labels = {k: v for k, v in s.labels.items() if k != "le"}
            h = histograms.setdefault(
                (family.name, tuple(sorted(labels.items()))),
                {"buckets": [], "sum": None, "count": None})
            if s.name == family.name + "_bucket":
                h["buckets"].append((s.labels["le"], s.value))
            elif s.name == family.name + "_sum":
                h["sum"] = s.value
            elif s.name == family.name + "_count":
                h["count"] = s.value
    for (name, labels), h in histograms.items():
        where = "%s%s" % (name, dict(labels))
        if not h["buckets"]:
            problems.append(where + ": no buckets")
            continue
        bounds = [float(le) for le, _ in h["buckets"]]
        counts = [v for _, v in h["buckets"]]
        if any(b >= b_next for b, b_next in zip(bounds, bounds[1:])):
            problems.append(where + ": le bounds not increasing: %s" % bounds)
        if any(c > c_next for c, c_next in zip(counts, counts[1:])):
            problems.append(where + ": buckets not cumulative: %s" % counts)
        if not math.isinf(bounds[-1]):
            problems.append(where + ": last bucket is not +Inf")
        if h["count"] is None or h["sum"] is None:
            problems.append(where + ": no _count or _sum")
        elif counts[-1] != h["count"]:
            problems.append(where + ": +Inf bucket %s != _count %s" %
                            (counts[-1], h["count"]))
    for family, want in expected.get("types", {}).items():
        if types.get(family) != want:
            problems.append("family %s: type %s, want %s" %
                            (family, types.get(family), want))
    for name, labels, value in expected.get("samples", []):
        key = (name, tuple(sorted(labels.items())))
        if key not in samples:
            problems.append("missing: %s %s" % (name, labels))
        elif not math.isclose(samples[key], value, rel_tol=1e-9,
                              abs_tol=1e-9):
            problems.append("%s %s = %s, want %s" %
                            (name, labels, samples[key], value))
    for p in problems:
        print(p)
    if problems:
        return 1
    print("ok: %d families, %d samples, %d histograms" %
          (len(types), len(samples), len(histograms)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
