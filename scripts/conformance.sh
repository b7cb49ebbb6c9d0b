#!/usr/bin/env bash
# The conformance check: one battery of requests (harness/conformance/battery.toml) sent to a
# real Ollama server and to a fresh simulator serving the same model; every difference in
# status, headers, key order, error text and event sequence is printed, and the exit code is 3
# when one is not on harness/conformance/accepted.toml (1: could not run). Then GENERATED
# requests built from Ollama's request types (harness/src/conformance/generated.rs; seed SEED,
# default 1), each difference shrunk to the fewest changes that show it.
#   scripts/conformance.sh http://127.0.0.1:11434     # a server of yours (MODEL=name, default tiny; GENERATED default 0)
#   scripts/conformance.sh                            # starts ../shared/tools/real-ollama if present (GENERATED default 80)
#   GENERATED=2000 SEED=7 scripts/conformance.sh      # a longer generated run, on demand
# Without a URL and without the real-Ollama tool (REAL_OLLAMA, ../shared/tools/real-ollama), it
# says so and exits 0: the check needs a real server.
set -euo pipefail
cd "$(dirname "$0")/.."
harness="${HARNESS_BIN:-target/debug/harness}"
[ -x "$harness" ] || cargo build --quiet -p harness
if [ $# -ge 1 ]; then
  exec "$harness" conformance --real "$1" --model "${MODEL:-tiny}" --generated "${GENERATED:-0}" --seed "${SEED:-1}"
fi
dir=""
# This project's machines keep the shared material beside the repository (../shared), or at
# /work/shared when the repository is cloned elsewhere (CI clones it into a fresh directory).
for d in "${REAL_OLLAMA:-}" ../shared/tools/real-ollama /work/shared/tools/real-ollama; do
  if [ -n "$d" ] && [ -x "$d/serve.sh" ]; then dir="$d"; break; fi
done
if [ -z "$dir" ]; then
  echo "conformance: skipped: no real Ollama here (set REAL_OLLAMA to a copy of ../shared/tools/real-ollama, or pass a server's URL)"
  exit 0
fi
# A fresh models directory (serve.sh keeps one per port under TMPDIR), a free port.
tmp="$(mktemp -d)"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
line="$(TMPDIR="$tmp" REAL_OLLAMA="$dir" bash scripts/real-ollama.sh "$port" | tail -1)"
pid="${line%% *}"
url="${line#* }"
trap 'kill "$pid" 2>/dev/null || true; sleep 0.5; rm -rf "$tmp"' EXIT
echo "conformance: real Ollama $(curl -s "$url/api/version") at $url"
"$harness" conformance --real "$url" --model tiny --generated "${GENERATED:-80}" --seed "${SEED:-1}"
