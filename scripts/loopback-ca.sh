#!/usr/bin/env bash
# Points the suite's Python venv VENV at a CA bundle of one certificate (a self-signed one, its
# key thrown away: fixtures/clients/loopback-ca.pem), whatever SSL_CERT_FILE says outside it
# (this project's machines set it to the system's bundle).
# Why: httpx (under ollama-python, the OpenAI and Anthropic SDKs, LiteLLM, CrewAI...) builds an
# SSL context for every client it makes, loading certifi's ~150 roots even for plain HTTP: 30 ms
# of CPU per client on this project's 2-core machines, twelve clients 0.35 s (0.01 s with the
# one-certificate file; `python -c` timing twelve `ollama.Client()`s, 2026-11-27). The suite's
# programs talk plain HTTP to loopback only and never use a certificate; across a suite run
# those contexts cost 12 s of CPU (192 s -> 180 s, the suite 145 s -> 137 s, measured side by
# side). A .pth line runs when the venv's Python starts; a user's own venv is left alone.
# Usage: scripts/loopback-ca.sh VENV   (called by the setup scripts; safe to run again)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$1
cp fixtures/clients/loopback-ca.pem "$venv/loopback-ca.pem"
site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "import os, sys; p = os.path.join(sys.prefix, 'loopback-ca.pem'); os.path.exists(p) and os.environ.__setitem__('SSL_CERT_FILE', p)" >"$site/sim_ollama_suite_loopback_ca.pth"
