#!/usr/bin/env bash
# Installs CrewAI (pinned) into its own virtual environment, target/pycrewai, for the suite's
# CrewAI client program (fixtures/clients/python_crewai.py). Its own: CrewAI 1.15 requires
# openai<3, and the OpenAI Agents SDK and pydantic-ai of the other environments require
# openai>=3 (no set of versions satisfies both). About 1 GB; 16 s and 24 s of CPU with uv
# (measured 2026-11-27; pip took 94 s and 79 s). Safe to run again: it does nothing when CrewAI imports.
# `.ci/run` calls it while the suite compiles; the test calls it when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/pycrewai
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import importlib.util as u, sys; sys.exit(0 if u.find_spec('crewai') else 1)" 2>/dev/null; then
  bash scripts/loopback-ca.sh "$venv"
  exit 0
fi
uv=$(bash scripts/uv.sh)
# Made in place: an interrupted install fails the check above and is made again.
rm -rf "$venv"
"$uv" venv --quiet --python "$(command -v python3)" "$venv"
"$uv" pip install --quiet --python "$venv/bin/python" --compile-bytecode "crewai==1.15.30"
bash scripts/loopback-ca.sh "$venv"
# Imported once here, so a broken install is caught here, not in every program (3.6 s of CPU).
CREWAI_DISABLE_TELEMETRY=true OTEL_SDK_DISABLED=true "$venv/bin/python" -c "import crewai; print('crewai', crewai.__version__, 'installed')"
