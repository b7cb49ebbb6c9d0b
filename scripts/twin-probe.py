#!/usr/bin/env python3
"""A twin against the server it was calibrated from, on what a calibration does not run (issue
37): how each counts a prompt and decodes after it, how many tokens an answer reads back as, and
three six-turn conversations at once, read whole and streamed. Run it against the real server
and against `sim-ollama --config TWIN --port P` in turn:

    OLLAMA_NUM_PARALLEL=4 bash scripts/real-ollama.sh 11701
    harness calibrate --endpoints http://127.0.0.1:11701 --model tiny --tokens 1000 --out twin.toml
    target/debug/sim-ollama --config twin.toml --port 11702 &
    python3 scripts/twin-probe.py http://127.0.0.1:11701 http://127.0.0.1:11702

2026-11-28 03:22, the real tiny model on this machine's 2 cores (four slots) against its twin
(and against the same twin with its `letters_per_token` and `template_tokens` deleted, the
simulator's default tokenizer, as every twin had before): the first 1,500 characters of the README
counted 1,147 tokens, 1,068 on the twin (398 with the default tokenizer), and 1,000 tokens after
them decoded at 1,150, 1,188 (1,913) tokens/s; after 3,000 characters 688, 756 (1,395); 750
generated tokens read back as 771, 746 (947); three conversations took 17.98 s read whole and
19.36 s streamed on the real server, 16.31 s on the twin either way (an hour earlier, with ad-hoc
copies of these probes: 16.21 s whole, 17.37 s streamed, the twin 16.16 s: the real server moves
by hours on this machine, the twin does not).
"""
import json
import sys
import threading
import time
import urllib.request

MODEL = "tiny"
README = open(__file__.rsplit("/", 2)[0] + "/README.md").read()
SYSTEM = (
    "You are a release analyst. You read the deployment log the user pastes, answer in short paragraphs, and keep"
    " track of every service, version and incident mentioned so far in the conversation."
)
TURNS = [
    "Here is the first part of the deployment log. Which services changed version?",
    "Which of those services had an incident in the last week?",
    "Order them by risk and say why.",
    "Draft the rollback plan for the riskiest one.",
    "What should the on-call engineer watch during the rollback?",
    "Summarise the whole conversation in five bullet points.",
]


def post(url, path, body, stream=False):
    """The final object of a call (its content gathered when streamed)."""
    req = urllib.request.Request(url + path, json.dumps(dict(body, stream=stream)).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        if not stream:
            return json.loads(r.read())
        last, text = None, ""
        for line in r:
            last = json.loads(line)
            text += (last.get("message") or {}).get("content", "") + last.get("response", "")
        last.setdefault("message", {})["content"] = text
        last["response"] = text
        return last


def options(n):
    # sim_tokens: the simulator's answer runs to num_predict, as the real tiny model's always does.
    return {"num_predict": n, "sim_tokens": n, "temperature": 0}


def after_prompts(url):
    for chars, n in [(20, 1000), (1500, 1000), (3000, 1000)]:
        o = post(url, "/api/generate", {"model": MODEL, "prompt": README[:chars], "options": options(n)})
        print(f"  {chars:5d} characters: {o['prompt_eval_count']:5d} tokens, then {o['eval_count']} at"
              f" {o['eval_count'] / (o['eval_duration'] / 1e9):6.0f} tokens/s")


def read_back(url):
    a = post(url, "/api/generate", {"model": MODEL, "prompt": "Say something.", "options": options(750)})
    b = post(url, "/api/generate", {"model": MODEL, "prompt": a["response"], "raw": True, "options": options(1)})
    print(f"  {a['eval_count']} tokens generated ({len(a['response'])} characters) read back as {b['prompt_eval_count']}")


def conversations(url, stream, k=3):
    def agent():
        messages = [{"role": "system", "content": SYSTEM}]
        for turn in TURNS:
            messages.append({"role": "user", "content": turn})
            o = post(url, "/api/chat", {"model": MODEL, "messages": messages, "options": options(750)}, stream)
            messages.append({"role": "assistant", "content": o["message"]["content"]})

    t0 = time.perf_counter()
    threads = [threading.Thread(target=agent) for _ in range(k)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    print(f"  {k} conversations of {len(TURNS)} turns at once, {'streamed' if stream else 'read whole'}:"
          f" {time.perf_counter() - t0:.2f} s")


for url in sys.argv[1:] or ["http://127.0.0.1:11434"]:
    print(url)
    after_prompts(url)
    read_back(url)
    conversations(url, stream=False)
    conversations(url, stream=True)
