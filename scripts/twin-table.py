#!/usr/bin/env python3
"""The table of scripts/twin-check.sh: per deployment and scenario, the deployment speedup a
reference client got from the live servers (median over runs), what the twin predicted, what
the closest stock preset predicted, each one's error against live, the three verdicts (each
cell's, as its summary gives it), and whether the twin's agrees with the live one: `yes` when
they are the same; `noise` when the live rounds' noise left the live verdict unknown between two
bands (its share of an ideal server's saving has an 80 % interval across a band's line) and
the twin's share lies inside that interval; `no` otherwise.

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
            by.setdefault(r["scenario"], []).append(d["speedup"])
    summary = {c["scenario"]: c.get("deployment") or {} for c in doc["summary"]}
    return {s: (statistics.median(v), summary.get(s, {})) for s, v in by.items()}


def agree(live, twin):
    if live.get("verdict") == twin.get("verdict"):
        return "yes"
    lo_hi, share = live.get("share_interval"), twin.get("share")
    if live.get("verdict") == "unknown" and lo_hi and share is not None and lo_hi[0] <= share <= lo_hi[1]:
        return "noise"
    return "no"


print("| deployment | scenario | live | twin | error | stock preset | error | verdicts live / twin / stock | twin agrees |")
print("|---|---|---|---|---|---|---|---|---|")
errs = {"twin": [], "stock": []}
agreed = []
for n in names:
    live, twin, stock = (cells(os.path.join(out, f"{n}.{k}")) for k in ("live", "twin", "stock"))
    for s, (l, ld) in sorted(live.items()):
        t, td = twin.get(s, (float("nan"), {}))
        p, pd = stock.get(s, (float("nan"), {}))
        et, ep = abs(t - l) / l, abs(p - l) / l
        errs["twin"].append(et)
        errs["stock"].append(ep)
        a = agree(ld, td)
        agreed.append(a)
        lv = ld.get("verdict", "-")
        if ld.get("share_interval"):
            lo, hi = ld["share_interval"]
            lv += f" ({ld.get('share', 0):.0%}, {lo:.0%}-{hi:.0%})"
        tv = td.get("verdict", "-") + (f" ({td['share']:.0%})" if td.get("share") is not None else "")
        print(f"| {n} | {s} | {l:.2f}x | {t:.2f}x | {et:.0%} | {p:.2f}x | {ep:.0%} | {lv} / {tv} / {pd.get('verdict', '-')} | {a} |")
for k, v in errs.items():
    if v:
        print(f"{k}: median error {statistics.median(v):.0%}, max {max(v):.0%} over {len(v)} cells")
print(f"twin verdict agrees in {agreed.count('yes')} of {len(agreed)} cells, within the live rounds' noise in {agreed.count('noise')}, disagrees in {agreed.count('no')}")
