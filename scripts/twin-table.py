#!/usr/bin/env python3
"""The table of scripts/twin-check.sh: per deployment and scenario, the deployment speedup a
reference client got from the live servers (median over runs), what the twin predicted, what
the closest stock preset predicted, each one's error against live, the three verdicts (each
cell's, as its summary gives it, with the share of an ideal server's saving and its interval),
and whether the twin's agrees with the live one:
- `yes`: the same verdict; for two `unknown`s, between the same two bands. Live, `unknown` is
  a share whose 80 % interval over the rounds crosses a band's line; on the twin, a share whose
  ends at what `harness calibrate --check` calls the same servers (its batching and sharing
  figures moved 15 %) do;
- `noise`: live `unknown`, the twin's share inside the live interval;
- `tolerance`: the twin `unknown`, the live share inside the twin's interval;
- `no` otherwise.

    python3 scripts/twin-table.py OUT_DIR [EARLIER_OUT_DIR]

With an earlier run's directory, it also prints how far the same live cells moved between the
two runs (the live servers' own reproducibility, against which the twin's error is read).
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


# The bands' lines (sim-ollama's judge/decision.rs): at most 15 % of an ideal server's saving is
# no speedup, at least 80 % the whole of it.
def band(share):
    return "no_speedup" if share <= 0.15 else "full" if share >= 0.8 else "partial"


def bands(d):
    lo_hi = d.get("share_interval")
    return (band(lo_hi[0]), band(lo_hi[1])) if lo_hi else None


def inside(d, share):
    lo_hi = d.get("share_interval")
    return bool(lo_hi) and share is not None and lo_hi[0] <= share <= lo_hi[1]


def agree(live, twin):
    lv, tv = live.get("verdict"), twin.get("verdict")
    if lv == tv and (lv != "unknown" or bands(live) == bands(twin)):
        return "yes"
    if lv == "unknown" and tv != "unknown" and inside(live, twin.get("share")):
        return "noise"
    if tv == "unknown" and lv != "unknown" and inside(twin, live.get("share")):
        return "tolerance"
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
        tv = td.get("verdict", "-")
        if td.get("share") is not None:
            tv += f" ({td['share']:.0%}" + (f", {td['share_interval'][0]:.0%}-{td['share_interval'][1]:.0%})" if td.get("share_interval") else ")")
        print(f"| {n} | {s} | {l:.2f}x | {t:.2f}x | {et:.0%} | {p:.2f}x | {ep:.0%} | {lv} / {tv} / {pd.get('verdict', '-')} | {a} |")
for k, v in errs.items():
    if v:
        print(f"{k}: median error {statistics.median(v):.0%}, max {max(v):.0%} over {len(v)} cells")
print(
    f"twin verdict agrees in {agreed.count('yes')} of {len(agreed)} cells, within the live rounds' noise in {agreed.count('noise')},"
    f" within the twin's tolerance in {agreed.count('tolerance')}, disagrees in {agreed.count('no')}"
)
if len(sys.argv) > 2:
    moved = []
    for n in names:
        earlier = os.path.join(sys.argv[2], f"{n}.live")
        if not os.path.isfile(os.path.join(earlier, "results.json")):
            continue
        now, before = cells(os.path.join(out, f"{n}.live")), cells(earlier)
        moved += [abs(before[s][0] - l) / l for s, (l, _) in now.items() if s in before]
    if moved:
        print(f"live against the earlier run: median {statistics.median(moved):.0%}, max {max(moved):.0%} over {len(moved)} cells")
