#!/usr/bin/env python3
"""How noisy the servers of a live matrix were: each agent's solo rounds (results.json keeps
their median, fastest and slowest), as a coefficient of variation estimated from the range
(range / (2.06 x median): the expected range of four normal samples is 2.06 sigma).
Prints the median and 90th percentile per scenario.

    python3 scripts/solo-noise.py real-long/results.json
"""
import json
import statistics
import sys
from collections import defaultdict

runs = json.load(open(sys.argv[1]))["runs"]
cv, seen = defaultdict(list), set()
for run in runs:
    for a in run["agents"]:
        key = (run["runtime"], run["scenario"], a["name"])
        if key in seen or a.get("solo_rounds", 0) < 3 or not a.get("solo_s"):
            continue
        seen.add(key)
        cv[run["scenario"]].append((a["solo_max_s"] - a["solo_min_s"]) / (2.06 * a["solo_s"]))
for scenario, v in cv.items():
    v.sort()
    print(f"{scenario}: {len(v)} agents, cv median {statistics.median(v):.3f}, p90 {v[int(len(v) * 0.9)]:.3f}")
