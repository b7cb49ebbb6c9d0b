"""sim-ollama from Python: a deterministic Ollama simulator and its judge.

    from sim_ollama import Simulator
    with Simulator(models=["gemma3"]) as sim:       # ideal deployment, model loaded, mark taken
        run_my_agents(host=sim.url)
        sim.assert_parallel()                        # AssertionError with the report in words

Under pytest the `sim` fixture does the same for each test (see `sim_ollama.pytest_plugin`).
"""
from ._binary import BinaryNotFound, find_binary
from ._sim import (
    JUDGEMENT_SCHEMA_VERSION,
    ConfirmationNeeded,
    Deployment,
    JudgeFailure,
    Judgement,
    ProbeNeeded,
    Report,
    RerunNeeded,
    RescaleNeeded,
    Simulator,
    SimulatorError,
)

__all__ = [
    "BinaryNotFound",
    "ConfirmationNeeded",
    "Deployment",
    "JUDGEMENT_SCHEMA_VERSION",
    "JudgeFailure",
    "Judgement",
    "ProbeNeeded",
    "Report",
    "RerunNeeded",
    "RescaleNeeded",
    "Simulator",
    "SimulatorError",
    "find_binary",
]
