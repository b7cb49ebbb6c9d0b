#!/usr/bin/env python3
"""Ollama's concurrency pitfalls (docs/pitfalls.md), seen on a real Ollama 0.33 server.

Starts real servers from ../shared/tools/real-ollama (scripts/real-ollama.sh, each on a free
port with a fresh models directory and its own OLLAMA_* settings), sends each pitfall's
requests with plain threads, and prints what the server did. Only what the tool's tiny CPU
model can show: the default of one slot, the queue's 503 (and none for a loaded model), reloads
for other options, models evicting each other, one copy per model. Standard library only.

    python3 scripts/real-pitfalls.py
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    """A real Ollama with `env` settings, stopped on exit."""

    def __init__(self, **env):
        self.tmp = tempfile.mkdtemp()
        port = free_port()
        e = dict(os.environ, TMPDIR=self.tmp, **{k: str(v) for k, v in env.items()})
        out = subprocess.run(
            ["bash", os.path.join(ROOT, "scripts/real-ollama.sh"), str(port)],
            env=e, capture_output=True, text=True, check=True,
        ).stdout.strip().splitlines()[-1]
        self.pid, self.url = out.split()
        self.settings = " ".join(f"{k}={v}" for k, v in env.items()) or "defaults"

    def __enter__(self):
        return self

    def __exit__(self, *_):
        subprocess.run(["kill", self.pid], check=False)
        time.sleep(0.5)


def post(url, body, timeout=120):
    """(status, parsed final object or error, seconds to first byte, seconds to the end)."""
    t0 = time.monotonic()
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            first = None
            last = None
            for line in r:
                if first is None:
                    first = time.monotonic() - t0
                if line.strip():
                    last = json.loads(line)
            return r.status, last, first, time.monotonic() - t0
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}"), None, time.monotonic() - t0


def together(calls):
    """Runs (url, body) calls at once; their results in order, times from the common start."""
    out = [None] * len(calls)
    start = time.monotonic()

    def one(i, url, body):
        s = time.monotonic() - start
        status, obj, first, end = post(url, body)
        out[i] = {"status": status, "obj": obj, "start": s, "first": None if first is None else s + first, "end": s + end}

    ts = [threading.Thread(target=one, args=(i, u, b)) for i, (u, b) in enumerate(calls)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def gen(s, model="tiny", tokens=300, **options):
    return (f"{s.url}/api/generate", {"model": model, "prompt": "Tell me a story.", "stream": True,
                                      "options": {"num_predict": tokens, "seed": 1, **options}})


def load(s, model="tiny", **options):
    post(f"{s.url}/api/generate", {"model": model, "prompt": "hi", "stream": False, "options": {"num_predict": 1, **options}})


def copy(s):
    """`ollama cp tiny tiny-copy`: the same weights under another name."""
    return post(f"{s.url}/api/copy", {"source": "tiny", "destination": "tiny-copy"})[0] == 200


def second_model(s):
    """A model of other weights: tiny.gguf with its last byte changed, created on `s`."""
    tool = os.path.join(ROOT, "target/real-ollama")
    path = os.path.join(s.tmp, "tiny-b.gguf")
    with open(os.path.join(tool, "tiny.gguf"), "rb") as f:
        data = bytearray(f.read())
    data[-1] ^= 0x01
    with open(path, "wb") as f:
        f.write(data)
    modelfile = os.path.join(s.tmp, "Modelfile-b")
    with open(modelfile, "w") as f:
        f.write(f"FROM {path}\nPARAMETER num_thread 1\n")
    subprocess.run([os.path.join(tool, "bin/ollama"), "create", "tiny-b", "-f", modelfile],
                   env=dict(os.environ, OLLAMA_HOST=s.url.removeprefix("http://")), check=True, capture_output=True)
    return "tiny-b"


def ms(x):
    return "-" if x is None else f"{x * 1000:.0f} ms"


def loads(rs):
    """Requests whose load_duration shows a model load (over 100 ms)."""
    return sum(1 for r in rs if r["obj"] and r["obj"].get("load_duration", 0) > 100_000_000)


def main():
    if not os.path.isdir(os.path.join(ROOT, "../shared/tools/real-ollama")) and not os.environ.get("REAL_OLLAMA"):
        print("no real Ollama here (../shared/tools/real-ollama, or REAL_OLLAMA)", file=sys.stderr)
        return 2
    seen = []

    # 1. The default of one slot: two agents, one after the other.
    with Server() as s:
        load(s)
        a, b = together([gen(s), gen(s)])
        later = max(a, b, key=lambda r: r["first"])
        sooner = min(a, b, key=lambda r: r["first"])
        seen.append(("default one slot (#11942)", s.settings,
                     f"second answer's first token {ms(later['first'])} after the start, the first answer ended at "
                     f"{ms(sooner['end'])}: {'one by one' if later['first'] >= sooner['end'] - 0.005 else 'overlapped'}"))
    with Server(OLLAMA_NUM_PARALLEL=2) as s:
        load(s)
        a, b = together([gen(s), gen(s)])
        later = max(a, b, key=lambda r: r["first"])
        sooner = min(a, b, key=lambda r: r["first"])
        ps = json.load(urllib.request.urlopen(f"{s.url}/api/ps"))["models"]
        seen.append(("one copy per model (#9054)", s.settings,
                     f"first tokens at {ms(sooner['first'])} and {ms(later['first'])} (overlapped: "
                     f"{later['first'] < sooner['end']}); /api/ps lists {len(ps)} runner(s) of tiny"))

    # 2. The queue: three requests that need a reload, one place in the queue; none refused for a
    # loaded model.
    with Server(OLLAMA_MAX_QUEUE=1) as s:
        load(s, num_ctx=2048)
        rs = together([gen(s, tokens=50, num_ctx=4096) for _ in range(3)])
        refused = [r for r in rs if r["status"] == 503]
        load(s, num_ctx=2048)
        warm = together([gen(s, tokens=50, num_ctx=2048) for _ in range(4)])
        seen.append(("OLLAMA_MAX_QUEUE 503 (#4124, #7758)", s.settings,
                     f"3 requests needing a reload: {len(refused)} refused with 503 "
                     f"({(refused[0]['obj'] or {}).get('error', '') if refused else ''!r}); "
                     f"4 requests for the loaded model: {sum(r['status'] == 503 for r in warm)} refused"))

    # 3. Options that force reloads, with four slots.
    with Server(OLLAMA_NUM_PARALLEL=4) as s:
        load(s, num_ctx=2048)
        rs = together([gen(s, tokens=100, num_ctx=2048), gen(s, tokens=100, num_ctx=4096),
                       gen(s, tokens=100, num_ctx=2048), gen(s, tokens=100, num_ctx=4096)])
        seen.append(("options force reloads (#4170)", s.settings,
                     f"4 agents, num_ctx 2048 and 4096 alternating: {loads(rs)} of 4 answers paid a load "
                     f"(load_duration over 100 ms)"))

    # 4. Two models, one loaded at a time: each switch evicts and reloads. A copy (`ollama cp`)
    # would not do: the scheduler keys runners by the weights' file (`schedulerModelKey`,
    # server/sched.go 110-127), so a copy shares the original's runner. The second model is
    # tiny.gguf with its last weight changed: another file.
    with Server(OLLAMA_MAX_LOADED_MODELS=1, OLLAMA_NUM_PARALLEL=2) as s:
        other = second_model(s)
        shared = together([gen(s, "tiny", tokens=50), gen(s, "tiny-copy", tokens=50)]) if copy(s) else []
        runners = len(json.load(urllib.request.urlopen(f"{s.url}/api/ps"))["models"])
        rs = []
        for _ in range(3):
            rs += together([gen(s, "tiny", tokens=100), gen(s, other, tokens=100)])
        seen.append(("models evict each other (#5724, #14578)", s.settings,
                     f"2 agents on tiny and {other} (another file), 3 rounds: {loads(rs)} of 6 answers paid a load "
                     f"(load_duration over 100 ms); tiny and a copy of it (ollama cp) answered together "
                     f"({sum(r['status'] == 200 for r in shared)} of 2) from {runners} runner(s)"))

    width = max(len(p) for p, _, _ in seen)
    for pitfall, settings, what in seen:
        print(f"{pitfall:<{width}}  [{settings}]  {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
