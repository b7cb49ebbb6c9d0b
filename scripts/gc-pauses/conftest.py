"""Whole-process pauses as a heavy Python process has them (docs/figures.md, "Garbage
collection pauses"): a heap of 450,000 long-lived objects, about what importing LiteLLM
beside LangGraph leaves, and a full collection of it (about 270 ms holding the GIL) at random
moments, 0.3-1.5 s apart, from a thread of its own. Not part of the suite: a measurement.

    cd scripts/gc-pauses && ../../target/pyproject/bin/python -m pytest -q -s -p no:xdist \\
        -p no:cacheprovider | grep -E "^(AWAITED|BLOCKING)"
"""
import gc
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../examples/python-project"))
BALLAST = [{"k": [i, str(i)]} for i in range(450_000)]


def _collector():
    rng = random.Random(7)
    while True:
        time.sleep(rng.uniform(0.3, 1.5))
        gc.collect()


threading.Thread(target=_collector, daemon=True).start()
