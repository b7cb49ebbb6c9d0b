#!/usr/bin/env bash
# Builds the Python wheel (python/): the sim-ollama and harness binaries and the sim_ollama
# module, into target/wheels. Usage: scripts/build-wheel.sh [PROFILE]   (default: release)
# maturin packs the crate it builds (sim-ollama); the harness binary, from another crate of
# the workspace, goes in as a data script and pip installs it beside sim-ollama.
# Needs maturin (`pip install maturin`); uses target/pyclients' when it is there.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:-release}
# A release wheel is stripped and compressed as usual; a test build's (270 MB of binaries
# with debug info) is compressed at the fastest level, 34 s -> a few.
case "$profile" in
  # maturin builds a bin with `cargo rustc --profile P`: with `test` that is the crate's test
  # harness, not the binary.
  test) echo "build-wheel: the test profile builds test harnesses; use dev or release" >&2; exit 2 ;;
  dev) dir=debug; pack=(--compression-level 1) ;;
  release) dir=release; pack=(--strip) ;;
  *) dir=$profile; pack=(--compression-level 1) ;;
esac
maturin=${MATURIN:-}
if [ -z "$maturin" ]; then
  if [ -x target/pyclients/bin/maturin ]; then maturin=target/pyclients/bin/maturin
  else maturin=$(command -v maturin || true); fi
fi
if [ -z "$maturin" ]; then
  echo "build-wheel: maturin is needed: pip install maturin (or bash scripts/setup-clients.sh)" >&2
  exit 2
fi
cargo build --profile "$profile" -p harness --bin harness
rm -rf target/wheel-data
mkdir -p target/wheel-data/scripts
cp "target/$dir/harness" target/wheel-data/scripts/harness
if [ "$profile" = release ]; then strip target/wheel-data/scripts/harness; fi
rm -rf target/wheels
(cd python && "$OLDPWD/$maturin" build --profile "$profile" "${pack[@]}" --out "$OLDPWD/target/wheels" --quiet 2>&1) \
  || { echo "build-wheel: maturin build failed" >&2; exit 1; }
ls target/wheels/*.whl
