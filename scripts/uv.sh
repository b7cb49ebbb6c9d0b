#!/usr/bin/env bash
# Prints the path of uv (Astral's Python package installer, pinned), installing it first into
# target/ci-tools (the venv .ci/run keeps its tools in) when neither that one nor one on PATH is
# there. The setup scripts make their venvs with it: measured on a fresh clone of this machine
# kind (2026-11-27), the three venvs took 200 s of wall and 170 s of CPU with pip, 36 s and 55 s
# with `uv pip install --compile-bytecode`, the same packages at the same versions (their
# `pip freeze` compared); pip's CPU was taken from the suite's build beside it. Measured with
# `for s in setup-clients.sh "setup-python-project.sh venv" setup-crewai.sh; do /usr/bin/time
# bash scripts/$s; done` in a fresh clone with no target/, once at 48ac1bd (pip) and once here.
# Usage: UV=$(bash scripts/uv.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.13.8
tools=target/ci-tools
ours() { [ -x "$tools/bin/uv" ] && [ "$("$tools/bin/uv" --version | cut -d' ' -f2)" = "$version" ]; }
if ours; then
  echo "$PWD/$tools/bin/uv"
  exit 0
fi
if command -v uv >/dev/null 2>&1 && [ "$(uv --version | cut -d' ' -f2)" = "$version" ]; then
  command -v uv
  exit 0
fi
mkdir -p target
# One installer at a time: the setup scripts run beside each other in .ci/run and the tests.
exec 8>target/uv-install.lock
flock 8
if ! ours; then
  [ -x "$tools/bin/python" ] || python3 -m venv "$tools" >&2
  "$tools/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$version" >&2
fi
echo "$PWD/$tools/bin/uv"
