#!/usr/bin/env bash
# Renders a harness output directory's report.html and every timeline SVG to PNG with headless
# Chromium, to look at the pictures: bash scripts/render.sh DIR [CHROMIUM]
# Writes DIR/png/*.png. Needs Debian's chromium (apt-get install chromium).
set -euo pipefail
dir=${1:?usage: render.sh DIR [CHROMIUM]}
chrome=${2:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$chrome" ] || { echo "render.sh: no chromium found (apt-get install chromium)" >&2; exit 1; }
mkdir -p "$dir/png"
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
shot() { # file width height out
  "$chrome" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --hide-scrollbars --window-size="$2,$3" \
    --screenshot="$4" "file://$(realpath "$1")" >/dev/null 2>&1
}
[ -f "$dir/report.html" ] && shot "$dir/report.html" 1280 2400 "$dir/png/report.png"
for svg in "$dir"/timelines/*.svg "$dir"/*.svg; do
  [ -f "$svg" ] || continue
  w=$(sed -n 's/.*<svg[^>]* width="\([0-9]*\)".*/\1/p' "$svg" | head -1)
  h=$(sed -n 's/.*<svg[^>]* height="\([0-9]*\)".*/\1/p' "$svg" | head -1)
  shot "$svg" "${w:-1100}" "${h:-600}" "$dir/png/$(basename "$svg" .svg).png"
done
ls "$dir/png"
