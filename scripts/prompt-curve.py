#!/usr/bin/env python3
"""A model's prompt time against prompt length, and its decode speed after prompts of several
lengths, as a server reports them: the figures docs/harness.md compares a twin with its real
server by ("A prompt's time that grows faster than its length", issue 37).

    python3 scripts/prompt-curve.py URL MODEL [--chars 60,600,1500,3000,4500] [--reps 3]
                                    [--decode-after 80,1500,4500] [--decode-reps 2]

Each prompt is `harness calibrate`'s filler text (the simulator counts its tokens as the twin
was fitted in) after a word of its own, so no prompt cache helps. For each length: the median
`prompt_eval_duration` and `total_duration` of `reps` one-token calls; then for each length of
--decode-after, the median `eval_count / eval_duration` of 200-token calls after it. Run it
against the real server and against `sim-ollama --config TWIN --time-scale 1` side by side."""
import argparse
import json
import random
import statistics
import urllib.request

# harness/src/calibrate/measure.rs's FILLER.
FILLER = (
    "The agents read the report, compare the figures with last week, and write a short note on "
    "what changed and why it matters to the team. "
)

ap = argparse.ArgumentParser()
ap.add_argument("url")
ap.add_argument("model")
ap.add_argument("--chars", default="60,600,1500,3000,4500")
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--decode-after", default="")
ap.add_argument("--decode-reps", type=int, default=2)
a = ap.parse_args()


def prompt(chars):
    head = "w%d " % random.randint(0, 10**9)
    return (head + FILLER * (chars // len(FILLER) + 2))[:chars]


def generate(chars, tokens):
    body = {"model": a.model, "prompt": prompt(chars), "stream": False, "options": {"num_predict": tokens}}
    req = urllib.request.Request(
        a.url.rstrip("/") + "/api/generate", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


for chars in [int(x) for x in a.chars.split(",") if x]:
    rs = [generate(chars, 1) for _ in range(a.reps)]
    print(
        f"{chars} characters ({rs[0]['prompt_eval_count']} tokens as the server counts them): "
        f"prompt_eval {statistics.median(r['prompt_eval_duration'] for r in rs) / 1e6:.1f} ms, "
        f"total {statistics.median(r['total_duration'] for r in rs) / 1e6:.1f} ms (medians of {a.reps})",
        flush=True,
    )
for chars in [int(x) for x in a.decode_after.split(",") if x]:
    rates = []
    for _ in range(a.decode_reps):
        r = generate(chars, 200)
        rates.append(r["eval_count"] / (r["eval_duration"] / 1e9))
    print(f"decode after {chars} characters: {statistics.median(rates):.1f} tokens/s (median of {a.decode_reps})", flush=True)
