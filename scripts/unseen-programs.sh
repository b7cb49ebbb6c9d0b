#!/usr/bin/env bash
# Runs every program of fixtures/unseen under `harness exec` (ideal deployment, gemma3 and
# llama3.2:1b loaded, any other model name answered as gemma3) and prints one line per program:
# its answer (c*: parallel; b*: not parallel), the judge's verdict and cause, and whether the
# verdict is wrong (a correct program not parallel, a buggy one parallel). Exit 1 when a buggy
# program read parallel (the judge failed open).
#
#   bash scripts/unseen-programs.sh [OUT]   # OUT: a directory for each run's report (default: a temporary one)
#
# Needs the Python clients' venvs (`bash scripts/setup-clients.sh`, `bash scripts/setup-python-project.sh venv`),
# CrewAI's venv (`bash scripts/setup-crewai.sh`), node and go, and the harness built
# (`cargo build -p harness`). About 4 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-$(mktemp -d)}
mkdir -p "$out"
harness=target/debug/harness
[ -x "$harness" ] || { echo "build the harness first: cargo build -p harness" >&2; exit 2; }
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
for g in fixtures/unseen/*.go; do
  bin="$out/$(basename "$g" .go)"
  go build -buildvcs=false -o "$bin" "$g" 2>"$bin.build.log" \
    || { echo "the Go program $g did not build: $bin.build.log" >&2; exit 2; }
done
failed_open=0
printf '%-36s %-12s %-34s %s\n' program answer verdict wrong
# judge NAME CMD...: one program under harness exec, its line of the table. A program whose
# docstring says "Run with --agents N" (one-shot calls, nothing to chain them by) gets it, as
# its user would give it.
judge() {
  local name=$1 verdict wrong="" answer src
  shift
  src=$(ls fixtures/unseen/"$name" 2>/dev/null)
  local agents=()
  if [ -n "$src" ] && n=$(grep -o -m1 "Run with --agents [0-9]*" "$src" | grep -o "[0-9]*$"); then
    agents=(--agents "$n")
  fi
  "$harness" exec --preload gemma3 --preload llama3.2:1b --stand-in gemma3 "${agents[@]}" --json "$out/$name.json" -- "$@" \
    >"$out/$name.txt" 2>&1
  verdict=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['report']; print(r['verdict'], r['cause'])" \
    "$out/$name.json" 2>/dev/null || echo "no report")
  case "$name" in
    c*) answer=parallel; [[ "$verdict" == parallel* ]] || wrong="not parallel (cry of wolf?)" ;;
    b*) answer="not parallel"; if [[ "$verdict" == parallel* ]]; then wrong="PARALLEL: failed open"; failed_open=1; fi ;;
  esac
  printf '%-36s %-12s %-34s %s\n' "$name" "$answer" "$verdict" "$wrong"
}
for f in fixtures/unseen/[bc][0-9]*; do
  name=$(basename "$f")
  case "$f" in
    *.py)
      if grep -q "^from crewai\|^import crewai" "$f"; then py=target/pycrewai/bin/python
      elif grep -q anthropic "$f"; then py=target/pyclients/bin/python
      else py=target/pyproject/bin/python; fi
      judge "$name" "$py" "$f" ;;
    *.mjs) judge "$name" node "$f" ;;
    *.go) judge "$name" "$out/$(basename "$f" .go)" ;;
  esac
done
# The Go program's buggy twin: a sync.Mutex around each call.
judge b11_go_mutex "$out/c08_go_waitgroup" mutex
echo "reports in $out"
exit $failed_open
