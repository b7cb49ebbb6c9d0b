#!/usr/bin/env bash
# Installs the client libraries the suite's `clients` tests run real programs with: a Python
# virtual environment in target/pyclients with the official ollama client, the official
# OpenAI SDK and the official Anthropic SDK (all pinned), from PyPI.
# Node programs use Node's built-in fetch and need nothing. Safe to run again: it does nothing
# when the environment is complete. `.ci/run` calls it; the tests call it too when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/pyclients
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import ollama, httpx, openai, anthropic, maturin" 2>/dev/null; then
  bash scripts/loopback-ca.sh "$venv"
  exit 0
fi
uv=$(bash scripts/uv.sh)
# Made in place: an interrupted install fails the import check above and is made again.
rm -rf "$venv"
"$uv" venv --quiet --python "$(command -v python3)" "$venv"
"$uv" pip install --quiet --python "$venv/bin/python" --compile-bytecode \
  "ollama==0.6.3" "openai==3.54.0" "anthropic==2.12.0" "maturin==1.16.0"
bash scripts/loopback-ca.sh "$venv"
"$venv/bin/python" -c "import ollama, httpx, openai, anthropic; print('clients: ollama installed, openai', openai.__version__, 'anthropic', anthropic.__version__)"
