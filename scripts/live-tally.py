#!/usr/bin/env python3
"""The table docs/harness.md quotes for a matrix: per scenario, the correct variants' and the
controls' client verdicts (controls whose bug cannot act on the scenario apart), how many cells were given runs beyond --runs (live mode adds them
while a cell is in doubt), and the deployment verdicts with the speedups they measured. Lists
every correct cell short of parallel and every control read parallel, with its reason.

    python3 scripts/live-tally.py real-long/results.json
"""
import json
import sys
from collections import Counter, defaultdict

doc = json.load(open(sys.argv[1]))
verdicts = defaultdict(Counter)
added = Counter()
deployments = defaultdict(list)
runs_of = Counter((r["runtime"], r["scenario"]) for r in doc["runs"])
fewest = min(runs_of.values(), default=0)
for c in doc["summary"]:
    # A control whose bug cannot act on the scenario (one connection per server, one agent per
    # server) is a correct client there: counted apart, not as a control missed.
    kind = ("idle controls" if c.get("control_idle") else "controls") if c.get("control") else "correct"
    verdicts[(c["scenario"], kind)][c["verdict"]] += 1
    if runs_of[(c["runtime"], c["scenario"])] > fewest:
        added[(c["scenario"], kind)] += 1
    d = c.get("deployment")
    if d:
        deployments[c["scenario"]].append((d["verdict"], d.get("speedup")))
    if kind == "correct" and c["verdict"] != "parallel":
        print(f"  {c['runtime']} x {c['scenario']}: {c['verdict']}: {c['reason'][:160]}")
    if kind == "controls" and c["verdict"] == "parallel":
        print(f"  control read parallel: {c['runtime']} x {c['scenario']}")
for (scenario, kind), v in sorted(verdicts.items()):
    print(f"{scenario} {kind}: {dict(v)}; cells with added runs: {added[(scenario, kind)]}")
for scenario, ds in deployments.items():
    speedups = [s for _, s in ds if s is not None]
    span = f" {min(speedups):.2f}-{max(speedups):.2f}x" if speedups else ""
    print(f"{scenario} deployment: {dict(Counter(v for v, _ in ds))}{span}")
