#!/usr/bin/env python3
"""Ollama's own end-to-end suite against a fresh simulator (issue 38).

    python3 scripts/ollama-integration.py [fast|release] [--sim URL] [--json FILE]

Runs `it-fast.test` (or `it-release.test`), Ollama v0.33.0-rc2's `integration/` tests compiled
for any server (../shared/tools/ollama-integration on this project's machines: OLLAMA_INTEGRATION
names another copy), against a `sim-ollama` it starts (the debug build's, or SIM_OLLAMA_BIN; or
--sim URL, a simulator already running), reads every test's outcome (the binary's output through
`go tool test2json` when Go is here, else its -test.v lines), and sorts the failures:

- content: the test checks what a model said (words expected in an answer, an emoji, vectors
  close to reference ones, a tool argument): a simulator's generated text fails those by design.
  Each one must be on harness/conformance/integration-accepted.toml, whose every entry says why
  and names the assertion's words (`says`), so a behaviour failure in the same test is not
  taken for one;
- behaviour: everything else (status codes, fields, error texts, counts, routes).

Prints the table (passed / content only / behaviour / skipped, with why each was skipped) and
exits 3 when a failure is not accepted (1: the suite could not run). Without the compiled suite
it says it skipped and exits 0.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ACCEPTED = os.path.join(ROOT, "harness/conformance/integration-accepted.toml")


def suite_dir():
    for d in (os.environ.get("OLLAMA_INTEGRATION"), os.path.join(ROOT, "../shared/tools/ollama-integration"),
              "/work/shared/tools/ollama-integration"):
        if d and os.path.isfile(os.path.join(d, "it-fast.test")):
            return os.path.abspath(d)
    return None


def start_sim():
    binary = os.environ.get("SIM_OLLAMA_BIN") or os.path.join(ROOT, "target/debug/sim-ollama")
    if not os.access(binary, os.X_OK) and "SIM_OLLAMA_BIN" not in os.environ:
        subprocess.run(["cargo", "build", "--quiet", "-p", "sim-ollama", "--bin", "sim-ollama"], cwd=ROOT, check=False)
    if not os.access(binary, os.X_OK):
        sys.exit(f"ollama-integration: no simulator at {binary} (cargo build -p sim-ollama, or set SIM_OLLAMA_BIN)")
    proc = subprocess.Popen([binary, "--port", "0", "--preset", "ideal", "--time-scale", "0.05"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = None
    for line in proc.stdout:
        if line.startswith("sim-ollama listening on "):
            url = line.rsplit(" ", 1)[1].strip()
        if line.startswith("sim-ollama ready"):
            break
    if url is None:
        proc.kill()
        sys.exit("ollama-integration: the simulator did not start")
    return proc, url


def run_suite(directory, scope, url):
    """Runs the suite; returns {test: {"outcome": pass|fail|skip, "output": text}} for every test."""
    binary = os.path.join(directory, f"it-{scope}.test")
    env = dict(os.environ, OLLAMA_TEST_EXISTING="1", OLLAMA_HOST=url.removeprefix("http://"))
    timeout = "25m" if scope == "release" else "10m"
    go = shutil.which("go")
    args = [binary, "-test.count=1", f"-test.timeout={timeout}"]
    if go:
        args.append("-test.v=test2json")
        run = subprocess.run(args, cwd=directory, env=env, capture_output=True, text=True)
        events = subprocess.run([go, "tool", "test2json", "-t"], input=run.stdout, capture_output=True, text=True)
        return from_events(events.stdout), run.returncode
    args.append("-test.v")
    run = subprocess.run(args, cwd=directory, env=env, capture_output=True, text=True)
    return from_verbose(run.stdout), run.returncode


def from_events(text):
    tests = {}
    for line in text.splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        name = e.get("Test")
        if not name:
            continue
        t = tests.setdefault(name, {"outcome": None, "output": ""})
        if e.get("Action") == "output":
            t["output"] += e.get("Output", "")
        elif e.get("Action") in ("pass", "fail", "skip"):
            t["outcome"] = e["Action"]
    return tests


def from_verbose(text):
    """The -test.v lines: a test's output lines are indented under its name; outcomes in
    `--- PASS/FAIL/SKIP: name` lines."""
    tests, current = {}, None
    for line in text.splitlines():
        m = re.match(r"^\s*=== (RUN|CONT|PAUSE)\s+(\S+)", line)
        if m:
            current = m.group(2)
            tests.setdefault(current, {"outcome": None, "output": ""})
            continue
        m = re.match(r"^\s*--- (PASS|FAIL|SKIP): (\S+)", line)
        if m:
            tests.setdefault(m.group(2), {"outcome": None, "output": ""})["outcome"] = m.group(1).lower()
            current = m.group(2)
            continue
        if current:
            tests[current]["output"] += line + "\n"
    return tests


def leaves(tests):
    """Tests with no subtests: the ones whose outcome is their own."""
    names = set(tests)
    return {n: t for n, t in tests.items() if not any(o.startswith(n + "/") for o in names)}


def assertion_lines(output):
    """The lines a failing Go test wrote with t.Error/t.Fatal: `file_test.go:NNN: message`."""
    return [m.group(0).strip() for m in re.finditer(r"^\s*\w+_test\.go:\d+: .*$", output, re.M)]


def load_accepted():
    with open(ACCEPTED, "rb") as f:
        doc = tomllib.load(f)
    rules = doc.get("accept", [])
    for r in rules:
        for key in ("test", "says", "why"):
            if not r.get(key):
                sys.exit(f"ollama-integration: an entry of {ACCEPTED} lacks `{key}`: {r}")
    return rules


def accepted_by(rules, name, lines):
    """The rule that accepts every assertion of a failed test, if one does."""
    for r in rules:
        if re.fullmatch(r["test"], name) and lines and all(re.search(r["says"], l) for l in lines):
            return r
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scope", nargs="?", default="fast", choices=["fast", "release"])
    ap.add_argument("--sim", help="a simulator already running (default: a fresh one)")
    ap.add_argument("--json", help="also write every test's outcome and class here")
    a = ap.parse_args()
    directory = suite_dir()
    if directory is None:
        print("ollama-integration: skipped: Ollama's compiled integration suite is not here "
              "(../shared/tools/ollama-integration, or OLLAMA_INTEGRATION)")
        return 0
    rules = load_accepted()
    proc = None
    url = a.sim
    if url is None:
        proc, url = start_sim()
    started = time.monotonic()
    try:
        tests, code = run_suite(directory, a.scope, url)
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)
    took = time.monotonic() - started
    if not tests:
        print(f"ollama-integration: the suite reported no test (exit {code})")
        return 1
    rows, unaccepted = [], []
    counts = {"passed": 0, "content only": 0, "behaviour": 0, "skipped": 0}
    skipped_why = {}
    for name, t in sorted(leaves(tests).items()):
        lines = assertion_lines(t["output"])
        if t["outcome"] == "pass":
            cls = "passed"
        elif t["outcome"] == "skip":
            cls = "skipped"
            why = next((l.split(": ", 1)[1] for l in lines), "skipped")
            why = re.sub(r"^model \S+ ", "model ", why)
            skipped_why[why] = skipped_why.get(why, 0) + 1
        elif accepted_by(rules, name, lines):
            cls = "content only"
        else:
            cls = "behaviour"
            unaccepted.append((name, lines or [t["output"].strip()[-300:]]))
        counts[cls] += 1
        rows.append({"test": name, "class": cls, "assertions": lines})
    print(f"ollama-integration: it-{a.scope}.test against {url}: {len(rows)} tests in {took:.0f} s")
    print("| passed | content only | behaviour | skipped |")
    print("|---|---|---|---|")
    print(f"| {counts['passed']} | {counts['content only']} | {counts['behaviour']} | {counts['skipped']} |")
    for why, n in sorted(skipped_why.items(), key=lambda x: -x[1]):
        print(f"  skipped {n}: {why}")
    for name, lines in unaccepted:
        print(f"  behaviour: {name}")
        for l in lines[:4]:
            print(f"      {l[:300]}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"scope": a.scope, "counts": counts, "tests": rows}, f, indent=1)
    return 3 if unaccepted else 0


if __name__ == "__main__":
    sys.exit(main())
