#!/usr/bin/env python3
"""How two servers slow each other at different contexts (issue 37: a device's weights and its
attention shared otherwise). For each answer length and num_ctx: three rounds of one solo call
on each server, then one call on each at once; prints the median solo speed, the median speed
beside the other and their ratio. With ../shared/tools/real-ollama on this machine's 2 cores:

    bash scripts/real-ollama.sh 11721; bash scripts/real-ollama.sh 11722
    python3 scripts/pair-sharing.py http://127.0.0.1:11721 http://127.0.0.1:11722 [MODEL]

2026-11-27 (tiny model, one thread per server): alone, 3,200 tokens decode at about 3,400
tokens/s with num_ctx 512 and 1,135 with 4096 (the 512-token slot shifts its context); a call kept 0.64 of its solo speed at 50 tokens,
0.59 at 300, 0.77 at 1,000, 0.84 at 1,500 and 0.91 at 3,000 (num_ctx 512, whose slot shifts
its context: 0.72-0.80), which one share per device cannot give; a token's work split into a
part that is the same at any context and one that grows with it, the first slowed 2.2 times
beside the other server and the second not at all, gives them all within a few percent.
"""
import json
import statistics
import sys
import threading
import urllib.request


def call(url, model, num_ctx, n):
    options = {"num_predict": n, "temperature": 1.0}
    if num_ctx:
        options["num_ctx"] = num_ctx
    body = {"model": model, "prompt": "hello there", "stream": False, "options": options}
    req = urllib.request.Request(
        f"{url}/api/generate", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=300) as r:
        d = json.load(r)
    return d["eval_count"] / d["eval_duration"] * 1e9


def pair(urls, model, num_ctx, n):
    out = [None, None]

    def run(i, url):
        out[i] = call(url, model, num_ctx, n)

    threads = [threading.Thread(target=run, args=(i, u)) for i, u in enumerate(urls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: pair-sharing.py URL_A URL_B [MODEL]")
    urls, model = sys.argv[1:3], (sys.argv[3] if len(sys.argv) > 3 else "tiny")
    # (4096, 3200) beside (512, 3200): a slot that shifts its context keeps a long answer fast.
    conditions = [(None, 50), (512, 300), (512, 1500), (512, 3200), (4096, 3200), (None, 300), (None, 1000), (None, 1500), (None, 3000)]
    for num_ctx, n in conditions:
        for u in urls:  # loads the runner with these options
            call(u, model, num_ctx, 5)
        solo, both = [], []
        for _ in range(3):
            solo += [call(u, model, num_ctx, n) for u in urls]
            both += pair(urls, model, num_ctx, n)
        s, b = statistics.median(solo), statistics.median(both)
        ctx = num_ctx or "default"
        print(f"num_ctx {ctx}, {n} tokens: solo {s:.0f} tokens/s, beside the other {b:.0f} ({b / s:.2f} of solo)", flush=True)


if __name__ == "__main__":
    main()
