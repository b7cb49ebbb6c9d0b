#!/usr/bin/env bash
# Installs CrewAI (pinned) into its own virtual environment, target/pycrewai, for the suite's
# CrewAI client program (fixtures/clients/python_crewai.py). Its own: CrewAI 1.15 requires
# openai<3, and the OpenAI Agents SDK and pydantic-ai of the other environments require
# openai>=3 (pip finds no set of versions for both). About 1 GB and a minute of pip (measured
# 58 s, 51 s of CPU, 2026-11-26). Safe to run again: it does nothing when CrewAI imports.
# `.ci/run` calls it while the suite compiles; the test calls it when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/pycrewai
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import importlib.util as u, sys; sys.exit(0 if u.find_spec('crewai') else 1)" 2>/dev/null; then
  exit 0
fi
mkdir -p target
rm -rf "$venv.tmp"
python3 -m venv "$venv.tmp"
"$venv.tmp/bin/pip" install --quiet --disable-pip-version-check "crewai==1.15.30"
rm -rf "$venv"
mv "$venv.tmp" "$venv"
python3 -m venv --upgrade "$venv" >/dev/null
# Imported once here, so a broken install is caught here, not in every program (3.6 s of CPU).
CREWAI_DISABLE_TELEMETRY=true OTEL_SDK_DISABLED=true "$venv/bin/python" -c "import crewai; print('crewai', crewai.__version__, 'installed')"
