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
  exit 0
fi
mkdir -p target
rm -rf "$venv.tmp"
python3 -m venv "$venv.tmp"
"$venv.tmp/bin/pip" install --quiet --disable-pip-version-check "ollama==0.6.3" "openai==3.54.0" "anthropic==2.12.0" "maturin==1.16.0"
rm -rf "$venv"
mv "$venv.tmp" "$venv"
# A venv records its own path: recreate the entry points for the final location (console
# scripts such as pip keep the old path in their first line: call `python -m pip`).
python3 -m venv --upgrade "$venv" >/dev/null
"$venv/bin/python" -c "import ollama, httpx, openai, anthropic; print('clients: ollama installed, openai', openai.__version__, 'anthropic', anthropic.__version__)"
