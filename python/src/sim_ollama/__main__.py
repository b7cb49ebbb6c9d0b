"""`python -m sim_ollama ARGS`: the simulator, as `sim-ollama ARGS`."""
from ._binary import run

run("sim-ollama")
