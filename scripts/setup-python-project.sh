#!/usr/bin/env bash
# Builds the Python wheel and installs it into a fresh virtual environment (target/pyproject)
# with what the sample user project (examples/python-project) needs from PyPI, pinned in its
# requirements.txt. The suite's `clients` tests then run the sample project's pytest suite and
# the package's own tests (python/tests) in it. `.ci/run` calls it; the test calls it too, so
# the installed wheel is always the current code's.
# Usage: scripts/setup-python-project.sh [PROFILE]   (default: dev; `release` for a wheel to
# hand to users). `scripts/setup-python-project.sh venv` makes only the venv with the
# requirements and stops: it needs no build, so `.ci/run` makes it while the suite compiles. The suite is built with `--cargo-profile dev` so these builds reuse it (maturin
# cannot build binaries in the test profile: it would package test harnesses); built in the
# test profile, the dev build of the two binaries and their dependencies cost a fresh clone
# 5.5 minutes more (.ci/run's build phase 606 s -> 940 s).
set -euo pipefail
cd "$(dirname "$0")/.."
# One setup at a time: the suite's two Python package tests call this at once, and a second
# caller reinstalling the wheel while the first one's pytest runs removes the binaries under
# it. The second waits, then finds the wheel current and leaves it alone.
mkdir -p target
exec 9>target/pyproject.lock
flock 9
profile=${1:-dev}
case "$profile" in dev) dir=debug ;; *) dir=$profile ;; esac
venv_only=false
if [ "$profile" = venv ]; then venv_only=true; fi
venv=target/pyproject
requirements=examples/python-project/requirements.txt
stamp=$(sha256sum "$requirements" | cut -c1-16)
uv=$(bash scripts/uv.sh)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.requirements" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$venv"
  "$uv" venv --quiet --python "$(command -v python3)" "$venv"
  "$uv" pip install --quiet --python "$venv/bin/python" --compile-bytecode -r "$requirements"
  echo "$stamp" >"$venv/.requirements"
fi
bash scripts/loopback-ca.sh "$venv"
if $venv_only; then
  echo "python-project: $venv has the sample project's requirements"
  exit 0
fi
# The wheel is rebuilt and reinstalled unless what the venv has is already the current code:
# the same two binaries as this build's and the same Python sources. Each binary is built as
# build-wheel.sh builds it (sim-ollama alone, as maturin selects it: cargo unifies features
# over the packages selected, so a build of both would be another binary).
cargo build --quiet --profile "$profile" -p harness --bin harness
cargo build --quiet --profile "$profile" --manifest-path sim-ollama/Cargo.toml --bin sim-ollama
installed=$("$venv/bin/python" -c "import os, sim_ollama; print(os.path.dirname(sim_ollama.__file__))" 2>/dev/null || true)
if [ -n "$installed" ] && [ "$(cat "$venv/.profile" 2>/dev/null)" = "$profile" ] \
  && cmp -s "target/$dir/sim-ollama" "$venv/bin/sim-ollama" && cmp -s "target/$dir/harness" "$venv/bin/harness" \
  && diff -rq --exclude=__pycache__ python/src/sim_ollama "$installed" >/dev/null; then
  echo "python-project: the installed wheel is the current code's"
  exit 0
fi
bash scripts/setup-clients.sh >/dev/null   # maturin comes from the clients' environment
bash scripts/build-wheel.sh "$profile" >/dev/null
# Its module needs no dependencies.
"$uv" pip install --quiet --python "$venv/bin/python" --reinstall --no-deps target/wheels/*.whl
echo "$profile" >"$venv/.profile"
"$venv/bin/python" -c "import sim_ollama, sys; print('python-project: sim-ollama wheel installed in', sys.prefix)"
