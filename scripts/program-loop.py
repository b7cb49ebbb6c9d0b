#!/usr/bin/env python3
"""Runs one program again and again against one simulator and judges each run on its own (no
probe run, no rerun: the first reading, as a flaky verdict shows itself), keeping every trace
and report: how the thread-pool fixture's `parallel` under load was found (2 of 20 runs beside
three busy loops at 2b4719a, 0 of 20 after 870a558). Run it with the sample project's venv
(the suite makes it: target/pyproject):

    target/pyproject/bin/python scripts/program-loop.py N OUT_DIR [--agents K] -- COMMAND...

e.g. `... 20 out -- target/pyclients/bin/python fixtures/clients/python_executor.py 8
--labelled`. Prints a line per run (verdict, cause) and a tally, and writes
OUT_DIR/runN.json (the judgement) and OUT_DIR/traceN.json (the simulator's trace of that run).
A machine kept busy beside it: `sh -c 'while :; do :; done' &`, once per loop."""
import collections
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from sim_ollama import Simulator

args = sys.argv[1:]
if "--" not in args or len(args) < 3:
    sys.exit(__doc__)
split = args.index("--")
n, out, command = int(args[0]), Path(args[1]), args[split + 1:]
agents = int(args[args.index("--agents") + 1]) if "--agents" in args[:split] else None
out.mkdir(parents=True, exist_ok=True)
tally = collections.Counter()
with Simulator(preset="ideal", models=["gemma3"], time_scale=0.1) as sim:
    env = dict(os.environ, **sim.environment)
    for i in range(n):
        since = sim.mark()
        run = subprocess.run(command, env=env, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"run {i}: the command failed ({run.returncode}): {run.stderr[-2000:]}")
        j = sim.judge(agents=agents)
        trace = json.loads(urllib.request.urlopen(sim.url + "/sim/trace").read())
        trace["requests"] = [r for r in trace["requests"] if r["id"] >= since]
        (out / f"trace{i}.json").write_text(json.dumps(trace))
        (out / f"run{i}.json").write_text(json.dumps({"verdict": j.report.verdict, "cause": j.report.cause, "explain": j.explain()}))
        tally[(j.report.verdict, j.report.cause)] += 1
        print(i, j.report.verdict, j.report.cause, flush=True)
print(", ".join(f"{v} ({c}): {k}" for (v, c), k in tally.most_common()))
