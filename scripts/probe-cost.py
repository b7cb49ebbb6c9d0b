#!/usr/bin/env python3
"""What a probe run costs (issue 36): runs programs under `harness exec` several times, side by
side, and prints the medians of the whole exec's wall time, the program's first run, its
probe run and its confirmation run, with the verdict. Programs with no local work worth the
name run once, as before; those whose gaps between calls decide the verdict run twice; those
whose probed verdict rests on waits (a bug, or a pause of the whole process) three times.

    python3 scripts/probe-cost.py [--runs N] [--harness PATH]

Needs the clients of scripts/setup-clients.sh (target/pyclients) and Node. Prints a Markdown
table (docs/figures.md, "Probe runs").
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = os.path.join(ROOT, "target/pyclients/bin/python")
FIX = os.path.join(ROOT, "fixtures/clients")

PROGRAMS = [
    ("ollama-python, no local work (python_ollama.py correct)", [PY, f"{FIX}/python_ollama.py", "correct", "--labelled"]),
    ("ollama-python, awaited 0.3 s tools (python_gaps.py sleep)", [PY, f"{FIX}/python_gaps.py", "sleep", "--labelled"]),
    ("ollama-python, tools of 0.1/0.3/0.6 s (python_gaps.py uneven)", [PY, f"{FIX}/python_gaps.py", "uneven", "--labelled"]),
    ("ollama-python, time.sleep(0.3) in async def (python_gaps.py blocking)", [PY, f"{FIX}/python_gaps.py", "blocking", "--labelled"]),
    ("Node fetch, execSync('sleep 0.3') (node_gaps.mjs execsync)", ["node", f"{FIX}/node_gaps.mjs", "execsync", "--labelled"]),
]
# Agents nothing tells apart (no labels, each call a prompt of its own), told their number:
# probed one answer at a time.
UNLABELLED = [
    ("unlabelled, awaited 0.3 s tools (python_gaps.py sleep --no-history, --agents 3)", [PY, f"{FIX}/python_gaps.py", "sleep", "--no-history"]),
    ("unlabelled, 1/2/3 tool rounds (python_gaps.py turns --no-history, --agents 3)", [PY, f"{FIX}/python_gaps.py", "turns", "--no-history"]),
    ("unlabelled, time.sleep(0.3) in async def (python_gaps.py blocking --no-history, --agents 3)", [PY, f"{FIX}/python_gaps.py", "blocking", "--no-history"]),
]


# Correct agents whose whole process is stopped 0.8 s (SIGSTOP) in one run: the confirmation
# run repeats that run (docs/judge.md, "A confirmation run").
PAUSED = [
    ("awaited 0.3 s tools, the process paused 0.8 s in its first run (python_gaps.py sleep --pause-in 1)", [PY, f"{FIX}/python_gaps.py", "sleep", "--labelled", "--pause-in", "1"]),
    ("awaited 0.3 s tools, the process paused 0.8 s in its probe run (python_gaps.py sleep --pause-in 2)", [PY, f"{FIX}/python_gaps.py", "sleep", "--labelled", "--pause-in", "2"]),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--harness", default=os.path.join(ROOT, "target/debug/harness"))
    a = ap.parse_args()
    print("| program | verdict | exec wall (median) | first run | probe run | confirmation run | runs |")
    print("|---|---|---|---|---|---|---|")
    runs = [(n, c, []) for n, c in PROGRAMS] + [(n, c, ["--agents", "3"]) for n, c in UNLABELLED]
    runs += [(n, c, []) for n, c in PAUSED]
    for name, cmd, extra in runs:
        walls, firsts, probes, confirmations, verdicts = [], [], [], [], set()
        for _ in range(a.runs):
            with tempfile.NamedTemporaryFile(suffix=".json") as f, tempfile.TemporaryDirectory() as d:
                # A paused program counts its runs in a fresh file each time.
                argv = [*cmd, "--runs", os.path.join(d, "runs")] if "--pause-in" in cmd else cmd
                t = time.monotonic()
                subprocess.run([a.harness, "exec", *extra, "--preload", "gemma3", "--json", f.name, "--", *argv],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
                walls.append(time.monotonic() - t)
                doc = json.load(open(f.name))
            firsts.append(doc["process_wall_s"])
            if doc.get("probe"):
                probes.append(doc["probe"]["wall_s"])
            if doc.get("confirmation"):
                confirmations.append(doc["confirmation"]["wall_s"])
            verdicts.add(doc["report"]["verdict"])
        def med(xs):
            return f"{statistics.median(xs):.2f} s ({len(xs)} of {a.runs})" if xs else "none"
        print(f"| {name} | {', '.join(sorted(verdicts))} | {statistics.median(walls):.2f} s | "
              f"{statistics.median(firsts):.2f} s | {med(probes)} | {med(confirmations)} | {a.runs} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
