"""`python -m sim_ollama.harness ARGS`: the harness, as `harness ARGS` (`harness exec -- CMD`)."""
from ._binary import run

if __name__ == "__main__":
    run("harness")
