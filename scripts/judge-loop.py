#!/usr/bin/env python3
"""Runs one sample-project scenario again and again, judging each run (with its probe run when
the judge asks for one), and keeps every report: how the judge's fail-open on LangGraph's
blocking tool was found (2 of 161 runs read parallel on a loaded machine before 24f5a6f, 0 of
150 after). Run it with the sample project's venv (the suite makes it: target/pyproject):

    target/pyproject/bin/python scripts/judge-loop.py N OUT_DIR [FRAMEWORK] [TOOL]

FRAMEWORK (default langgraph) and TOOL (blocking, awaited or plain) as in
examples/python-project/review/frameworks.py. Prints a line per run, `FAILED OPEN` where a run
with the blocking tool read parallel, and writes OUT_DIR/runN.json (the judgement)."""
import asyncio
import json
import os
import sys
import time
from pathlib import Path

root = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(root / "examples" / "python-project"))
from review import frameworks  # noqa: E402
from sim_ollama import Simulator  # noqa: E402

n, out = int(sys.argv[1]), Path(sys.argv[2])
framework = sys.argv[3] if len(sys.argv) > 3 else "langgraph"
tool = sys.argv[4] if len(sys.argv) > 4 else "blocking"
out.mkdir(parents=True, exist_ok=True)
for i in range(n):
    with Simulator(preset="ideal", models=[frameworks.MODEL], time_scale=0.1) as s:
        os.environ.update(s.environment)
        os.environ.setdefault("OPENAI_API_KEY", "sim-ollama")
        j = s.judge_program(lambda: frameworks.review(framework, together=True, tool=tool), expect="parallel")
        r = j.report
        print(i, time.strftime("%H:%M:%S"), r.verdict, r.cause, r.reason[:120], flush=True)
        (out / f"run{i}.json").write_text(json.dumps(j.raw, indent=1))
        if j.passed and tool == "blocking":
            print("FAILED OPEN", i, flush=True)
