#!/usr/bin/env python3
"""The table of scripts/twin-check.sh: per deployment and scenario, the deployment speedup a
reference client got from the live servers (median over runs), what the twin predicted, what
the closest stock preset predicted, each one's error against live, and the three verdicts.

    python3 scripts/twin-table.py OUT_DIR
"""
import json
import os
import statistics
import sys

out = sys.argv[1]
names = sorted({f.split(".")[0] for f in os.listdir(out) if f.endswith(".twin.toml")})


def cells(path):
    doc = json.load(open(os.path.join(path, "results.json")))
    by = {}
    for r in doc["runs"]:
        d = r.get("deployment") or {}
        if d.get("speedup") is not None:
            by.setdefault(r["scenario"], []).append((d["speedup"], d["verdict"]))
    return {s: (statistics.median(x for x, _ in v), statistics.mode(v2 for _, v2 in v)) for s, v in by.items()}


print("| deployment | scenario | live | twin | error | stock preset | error | verdicts live / twin / stock |")
print("|---|---|---|---|---|---|---|---|")
errs = {"twin": [], "stock": []}
for n in names:
    live, twin, stock = (cells(os.path.join(out, f"{n}.{k}")) for k in ("live", "twin", "stock"))
    for s, (l, lv) in sorted(live.items()):
        t, tv = twin.get(s, (float("nan"), "-"))
        p, pv = stock.get(s, (float("nan"), "-"))
        et, ep = abs(t - l) / l, abs(p - l) / l
        errs["twin"].append(et)
        errs["stock"].append(ep)
        print(f"| {n} | {s} | {l:.2f}x | {t:.2f}x | {et:.0%} | {p:.2f}x | {ep:.0%} | {lv} / {tv} / {pv} |")
for k, v in errs.items():
    if v:
        print(f"{k}: median error {statistics.median(v):.0%}, max {max(v):.0%} over {len(v)} cells")
