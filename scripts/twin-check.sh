#!/usr/bin/env bash
# The twin's predictions against live servers (issue 37), on three real deployments this machine
# can run with ../shared/tools/real-ollama: one server with one slot, one server with four, two
# servers (one slot each) sharing the 2 cores. For each: start the servers, `harness calibrate`
# them, then run held-out scenarios (other agent counts, call lengths, histories, options than
# calibration used) live, on the twin, and on the closest stock preset (the catalogue's gemma3
# profile, at time scale 0.05: its calls are a GPU's, 13 s for 1,500 tokens), and tabulate the deployment speedups (scripts/twin-table.py).
#   [RUNS=3] scripts/twin-check.sh OUT_DIR [HARNESS_BIN]   (RUNS: runs of each cell, live, twin and stock)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/twin-check.sh OUT_DIR [HARNESS_BIN]}"
bin="${2:-target/debug/harness}"
mkdir -p "$out"
common=(--runtimes tokio-default --runs "${RUNS:-3}" --tokens-scale 5)
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; pids=(); sleep 1; }
trap stop EXIT
serve() { # PORT PARALLEL
  local line
  line="$(OLLAMA_NUM_PARALLEL="$2" bash scripts/real-ollama.sh "$1")"
  pids+=("${line%% *}")
}
deployment() { # NAME PRESET SCENARIOS URLS
  local name="$1" preset="$2" scenarios="$3" urls="$4"
  echo "== $name" >&2
  # A deployment already measured (both files there) is not measured again.
  if [ ! -f "$out/$name.live/results.json" ] || [ ! -f "$out/$name.twin.toml" ]; then
    "$bin" calibrate --endpoints "$urls" --model tiny --tokens 1000 --out "$out/$name.twin.toml" 2>&1 | tail -1 >&2
    "$bin" matrix "${common[@]}" --max-solo-runs "$(( ${RUNS:-3} + 2 ))" --scenarios "$scenarios" --endpoints "$urls" --model tiny --out "$out/$name.live" >/dev/null 2>"$out/$name.live.log"
  fi
  "$bin" matrix "${common[@]}" --scenarios "$scenarios" --config "$out/$name.twin.toml" --out "$out/$name.twin" >/dev/null 2>"$out/$name.twin.log"
  "$bin" matrix "${common[@]}" --scenarios "$scenarios" --config "sim-ollama/fixtures/presets/$preset.toml" --model gemma3 --time-scale 0.05 --out "$out/$name.stock" >/dev/null 2>"$out/$name.stock.log"
}
serve_if() { [ -f "$out/$1.live/results.json" ] && [ -f "$out/$1.twin.toml" ] || serve "$2" "$3"; }
single="deploy_single_4slots,pitfall_default_one_slot,scale_8,history_slot_each"
serve_if one-slot 11611 1
deployment one-slot single-1slot "$single" http://127.0.0.1:11611
stop
serve_if four-slots 11612 4
deployment four-slots single-4slots "$single" http://127.0.0.1:11612
stop
serve_if two-servers-shared-cores 11613 1
serve_if two-servers-shared-cores 11614 1
deployment two-servers-shared-cores dual-one-device "deploy_dual_two_devices,deploy_dual_one_device,chimera_homo_gpu80_ctx512,baseline_vs_chimera_gpu80_ctx512" http://127.0.0.1:11613,http://127.0.0.1:11614
stop
python3 scripts/twin-table.py "$out"
