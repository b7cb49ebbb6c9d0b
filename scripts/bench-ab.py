#!/usr/bin/env python3
"""Two sim-ollama builds side by side under `harness bench`, alternating, one round each time.

    scripts/bench-ab.py BEFORE_BIN,AFTER_BIN ROUNDS [harness bench options...]

e.g. `scripts/bench-ab.py /tmp/sim-before,target/release/sim-ollama 6 --streams 1000 --tokens 1`
(build the "before" binary from an older commit and copy it aside first). Each round runs
`target/release/harness bench --rounds 1 --sim-bin BIN --json ...`, the builds in alternating
order, and the script prints, per build, the median and mean of the simulator's CPU per token
(per request with --tokens 1), the median client lateness p50 and p99, the median ratio of the
client p99 to the bare writer's in the same round, server lateness p99, context switches per
token and peak RSS. These machines are noisy: only the side-by-side differences mean anything.
"""
import json
import statistics as st
import subprocess
import sys
import tempfile

HARNESS = "target/release/harness"


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    bins, rounds, extra = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3:]
    res = {b: {k: [] for k in ("cpu", "p50", "p99", "ratio", "srv99", "sw", "rss")} for b in bins}
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        for i in range(rounds):
            for b in bins if i % 2 == 0 else bins[::-1]:
                run = [HARNESS, "bench", "--rounds", "1", "--sim-bin", b, "--json", out.name, *extra]
                done = subprocess.run(run, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                if done.returncode != 0:
                    sys.exit(f"bench-ab: {' '.join(run)} failed:\n{done.stderr}")
                with open(out.name) as f:
                    d = json.load(f)
                for row in d["rows"]:
                    if row["server"] != "sim-ollama":
                        continue
                    bare = next(r for r in d["rows"] if r["server"] != "sim-ollama" and r["streams"] == row["streams"])
                    for r in row["rounds"]:
                        x = res[b]
                        x["cpu"].append(r["cpu_us_per_token"])
                        x["p50"].append(r["client_ms"][0])
                        x["p99"].append(r["client_ms"][1])
                        x["ratio"].append(r["client_ms"][1] / bare["median"]["client_ms"][1])
                        x["srv99"].append(r["server_ms"][1])
                        x["sw"].append(r["switches_per_token"])
                        x["rss"].append(r["rss_peak_mb"])
    for b in bins:
        x = res[b]
        m = st.median
        print(
            f"{b}: n={len(x['cpu'])} cpu/token median {m(x['cpu']):.1f} mean {st.mean(x['cpu']):.1f} µs"
            f" | client p50 {m(x['p50']):.1f} p99 {m(x['p99']):.1f} ms | p99/bare {m(x['ratio']):.2f}x"
            f" | server p99 {m(x['srv99']):.2f} ms | switches {m(x['sw']):.2f} | rss {m(x['rss']):.0f} MB"
        )


if __name__ == "__main__":
    main()
