#!/usr/bin/env bash
# Starts a real Ollama v0.33 server (CPU build, tiny model) from ../shared/tools/real-ollama on
# 127.0.0.1:PORT, for checking behaviour and live mode against the real thing. Prints "PID URL".
#   scripts/real-ollama.sh 11501
#   OLLAMA_NUM_PARALLEL=2 scripts/real-ollama.sh 11502
# The shared copy stores its library symlinks as small text files naming their targets (a copy
# that does not keep links), which the dynamic loader rejects ("file too short"); this copies the
# tool once into target/real-ollama with the links made again, then runs its serve.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
src="${REAL_OLLAMA:-../shared/tools/real-ollama}"
[ -x "$src/serve.sh" ] || { echo "no real Ollama at $src (set REAL_OLLAMA)" >&2; exit 2; }
dst=target/real-ollama
if [ ! -x "$dst/serve.sh" ]; then
  rm -rf "$dst.tmp"
  mkdir -p "$dst.tmp"
  cp -r "$src"/. "$dst.tmp"/
  chmod -R u+w "$dst.tmp"
  for f in "$dst.tmp"/lib/ollama/*; do
    # A stand-in for a link: a few bytes naming another file of the same directory.
    if [ -f "$f" ] && [ "$(stat -c %s "$f")" -lt 256 ]; then
      target="$(head -c 255 "$f")"
      if [ -e "$(dirname "$f")/$target" ]; then
        ln -sf "$target" "$f"
      fi
    fi
  done
  mv "$dst.tmp" "$dst"
fi
exec bash "$dst/serve.sh" "$@"
