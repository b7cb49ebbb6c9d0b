#!/usr/bin/env python3
"""k calls at once against one alone on a live Ollama server: how much running them together
gains (the README's hand timing of a real server's batching, issue 37).

    python3 scripts/pair-timing.py URL MODEL [--tokens 300,600,1000] [--k 2,4] [--reps 4]

For each answer length: the median time of `reps` single non-streamed calls, then for each k
the median makespan of `reps` rounds of k calls started together (threads), and the speedup
k x single / makespan (1.0: no gain; k: full). Every prompt starts with a word of its own, so
no prompt cache helps."""
import argparse
import json
import statistics
import threading
import time
import urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("url")
ap.add_argument("model")
ap.add_argument("--tokens", default="1,50,300")
ap.add_argument("--k", default="2")
ap.add_argument("--reps", type=int, default=6)
a = ap.parse_args()
seq = [0]


def call(tokens):
    seq[0] += 1
    body = json.dumps({"model": a.model, "prompt": f"Q{seq[0]}x{time.time()}: The agents read the report and write a note.",
                       "stream": False, "options": {"num_predict": tokens}}).encode()
    t = time.perf_counter()
    req = urllib.request.Request(a.url.rstrip("/") + "/api/generate", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        json.load(r)
    return time.perf_counter() - t


call(1)  # loaded before anything is timed
for tokens in [int(x) for x in a.tokens.split(",")]:
    single = statistics.median(call(tokens) for _ in range(a.reps))
    for k in [int(x) for x in a.k.split(",")]:
        spans = []
        for _ in range(a.reps):
            threads = [threading.Thread(target=call, args=(tokens,)) for _ in range(k)]
            t = time.perf_counter()
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            spans.append(time.perf_counter() - t)
        span = statistics.median(spans)
        print(f"tokens {tokens} k={k}: single {single * 1e3:.1f} ms, together {span * 1e3:.1f} ms, speedup {k * single / span:.2f}x")
