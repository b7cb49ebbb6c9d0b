#!/usr/bin/env bash
# Live mode against noisy servers (issue 14): one sim-ollama process with two instances (two
# servers to the harness), noisy on purpose; every runtime variant on a two-server and a
# one-server scenario, once per seed; then a tally of the cells: controls caught, correct
# variants never called serialized or partly serialized.
#
# usage: scripts/noisy-live.sh [SEEDS] [NOISE]
#   SEEDS  default "1 2 3 4"
#   NOISE  default jitter=0.15,slow=0.03,slow_factor=2.5,contention=0.15 (see `sim-ollama --help`)
# Results: target/noisy-live/seed-N/ (results.json, summary.md).
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-"1 2 3 4"}
noise=${2:-"jitter=0.15,slow=0.03,slow_factor=2.5,contention=0.15"}
out=target/noisy-live
mkdir -p "$out"
cargo build --release -p harness -p sim-ollama
for seed in $seeds; do
  urls="$out/urls-$seed.txt"
  # Instance 0 gets 4 slots, so the one-server scenario runs agents side by side.
  target/release/sim-ollama --port 0 --instances 2 --preset dual-two-devices --num-parallel 4 \
    --time-scale 0.03 --seed "$seed" --noise "$noise" > "$urls" 2>/dev/null &
  sim=$!
  for _ in $(seq 50); do grep -q "^sim-ollama ready" "$urls" && break; sleep 0.1; done
  endpoints=$(sed -n 's/^sim-ollama listening on //p' "$urls" | paste -sd, -)
  rc=0
  target/release/harness matrix --endpoints "$endpoints" --model gemma3 --runtimes all \
    --scenarios deploy_dual_two_devices,deploy_single_4slots --out "$out/seed-$seed" > /dev/null || rc=$?
  kill "$sim"; wait "$sim" 2>/dev/null || true
  echo "seed $seed: harness exit $rc"
done
python3 - "$out" $seeds <<'PY'
import collections, json, sys
out, seeds = sys.argv[1], sys.argv[2:]
controls, correct, misses = collections.Counter(), collections.Counter(), []
correct_runs = collections.Counter()
for seed in seeds:
    r = json.load(open(f"{out}/seed-{seed}/results.json"))
    correct_variants = {c["runtime"] for c in r["summary"] if not c["control"]}
    for run in r["runs"]:
        if run["runtime"] in correct_variants:
            correct_runs[run["verdict"]] += 1
    for c in r["summary"]:
        # A client with one connection has one connection per server: with its two agents on
        # two servers it serializes nothing (the simulator's gate reads it parallel there too).
        if c["runtime"] == "ctl-one-connection" and c["scenario"] == "deploy_dual_two_devices":
            continue
        if c["control"]:
            controls[c["verdict"]] += 1
            if c["verdict"] not in ("serialized", "partly_serialized"):
                misses.append((seed, c["runtime"], c["scenario"], c["verdict"]))
        else:
            correct[c["verdict"]] += 1
            if c["verdict"] in ("serialized", "partly_serialized"):
                misses.append((seed, c["runtime"], c["scenario"], c["verdict"]))
print(f"control cells ({sum(controls.values())}):", dict(controls))
print(f"correct cells ({sum(correct.values())}):", dict(correct))
print(f"correct runs ({sum(correct_runs.values())}):", dict(correct_runs))
print("controls not caught / correct variants called (partly) serialized:", misses or "none")
PY
