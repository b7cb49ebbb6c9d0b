"""The pytest plugin (loaded by pytest when the wheel is installed): the `sim` fixture.

    def test_agents(sim):                  # a fresh simulator for this test
        asyncio.run(run_team())            # OLLAMA_HOST (and the OpenAI/Anthropic base URLs) point at it
        sim.assert_parallel()

Configure per test with a marker, or for the project in pytest's ini options:

    @pytest.mark.sim_ollama(preset="single-1slot", models=["gemma3", "qwen3:0.6b"], time_scale=0.05)

    [pytest]                               # or [tool.pytest.ini_options]
    sim_ollama_preset = ideal
    sim_ollama_models = gemma3
    sim_ollama_time_scale = 0.1
    sim_ollama_stand_in = llama3.2:1b      # answer for model names the catalogue lacks

The marker takes every `Simulator` argument (preset, config, models, time_scale, seed,
instances, num_parallel, stand_in, args). The fixture works in sync tests and in async ones
(pytest-asyncio): use `await sim.aassert_parallel()` there to keep the loop free.

Where the verdict waits on a probe run (the gaps between the agents' calls could be their own
work or waiting for each other's, and one run cannot tell: `sim.assert_parallel()` raises
`ProbeNeeded`), the plugin runs the test body once more as a probe run, the simulator holding
answers back so the agents do their local work one at a time, and the second
`assert_parallel()` judges both runs. (Calls that never overlapped, each starting longer after
the one before than a call lasts, are probed the same way, every answer held: whether they
waited for each other's answers or only for a delay of the program's own. A program that
fails in a probe run, where answers come later as longer calls would, fails the test with a
note saying so.) Where that verdict rests on the agents waiting for each
other and fails (`ConfirmationNeeded`: a pause of the whole process in one run reads the same),
the plugin runs the body a third time, repeating the run the waits would blame, and the third
`assert_parallel()` keeps the verdict of the two pairs closer to parallel (waits that do not
recur are not the program's). Where the run lost no more time than the simulator itself was
late sending answers (`RerunNeeded`, cause `simulator_late`: a machine too busy to run it on
time), or whose whole shortfall is one stall reading the last answer (`client_lag`,
inconclusive), the plugin runs the test once more in a new window, and that run's verdict
stands: what recurs is the program's, what does not was the machine's. The
test body must make the same calls each time.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterator, Optional

import pytest

from ._sim import PROBE_FAILED, ConfirmationNeeded, JudgeFailure, ProbeNeeded, RerunNeeded, RescaleNeeded, Simulator

_MARKER = "sim_ollama"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("sim_ollama_preset", "sim-ollama deployment preset for the sim fixture", default="ideal")
    parser.addini("sim_ollama_models", "models the sim fixture loads before each test", type="args", default=["gemma3"])
    parser.addini("sim_ollama_time_scale", "time scale of the sim fixture's simulator", default="0.1")
    parser.addini(
        "sim_ollama_stand_in",
        "catalogue model that answers for the model names the simulator's catalogue lacks (default: none)",
        default="",
    )


def pytest_configure(config: pytest.Config) -> None:
    _ini_time_scale(config)  # a bad value stops the run before any test, as a usage error
    config.addinivalue_line(
        "markers",
        f"{_MARKER}(**options): options of the sim fixture's simulator "
        "(preset, config, models, time_scale, seed, instances, num_parallel, stand_in, args)",
    )


def _ini_time_scale(config: pytest.Config) -> float:
    value = config.getini("sim_ollama_time_scale")
    try:
        scale = float(value)
    except ValueError:
        scale = float("nan")
    if not scale > 0 or scale == float("inf"):
        raise pytest.UsageError(f"sim_ollama_time_scale = {value!r} is not a positive number")
    return scale


def _options(request: pytest.FixtureRequest) -> Dict[str, Any]:
    ini = request.config.getini
    options: Dict[str, Any] = {
        "preset": ini("sim_ollama_preset"),
        "models": list(ini("sim_ollama_models")),
        "time_scale": _ini_time_scale(request.config),
    }
    if ini("sim_ollama_stand_in"):
        options["stand_in"] = ini("sim_ollama_stand_in")
    # The closest marker wins (a test's over its class's over its module's).
    marker = request.node.get_closest_marker(_MARKER)
    if marker is not None:
        if marker.args:
            raise pytest.UsageError(f"@pytest.mark.{_MARKER} takes keyword options only, got {marker.args!r}")
        options.update(marker.kwargs)
    return options


@pytest.fixture
def sim(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Simulator]:
    """A simulator for this test: started on a free loopback port with its models loaded,
    OLLAMA_HOST, OPENAI_BASE_URL, ANTHROPIC_BASE_URL and SIM_OLLAMA_URLS pointing at it (an
    OPENAI_API_KEY / ANTHROPIC_API_KEY set when missing, as the SDKs insist on one), a mark
    taken; stopped after the test."""
    with Simulator(**_options(request)) as s:
        for key, value in s.environment.items():
            monkeypatch.setenv(key, value)
        for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
            if not os.environ.get(key):
                monkeypatch.setenv(key, "sim-ollama")
        s.mark()
        yield s


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Runs the test body once more as a probe run when its judge asked for one, a third time
    when the probed verdict asks to be confirmed, and the whole once more in a new window
    when the verdict may be the machine's (`Report.needs_rerun`): each at most once per window;
    and where the verdict is inconclusive for the time scale (`RescaleNeeded`), once more on
    the simulator restarted at the longer time scale the report names."""
    try:
        return (yield)
    except (ProbeNeeded, ConfirmationNeeded, RerunNeeded, RescaleNeeded) as e:
        s = getattr(item, "funcargs", {}).get("sim")
        if not isinstance(s, Simulator):
            raise
        wanted = e
    first: Optional[RescaleNeeded] = None
    while True:
        # Outside the handler, so a failure of a later run is reported on its own.
        if isinstance(wanted, RerunNeeded) and not s.rerunning:
            s.rerun()  # a new window: the body from its start, its verdict standing
        elif isinstance(wanted, ProbeNeeded) and not s.probing:
            s.probe()  # the body again: its assert_parallel() now judges both runs
        elif isinstance(wanted, ConfirmationNeeded) and s.probing and not s.confirming:
            s.confirm(wanted.judgement.report.confirm)  # a third time: both pairs judged
        elif isinstance(wanted, RescaleNeeded) and not s.rescaled:
            # Inconclusive for the time scale: the simulator restarted at the longer one the
            # report names (same port with one instance), the body from its start there.
            first = wanted
            s.rescale(wanted.judgement.report.longer_time_scale)
            os.environ.update(s.environment)
        else:
            raise wanted
        try:
            item.runtest()
            return None
        except (ProbeNeeded, ConfirmationNeeded, RerunNeeded, RescaleNeeded) as e:
            wanted = e
        except JudgeFailure as e:
            if first is None or e.judgement.verdict == "parallel":
                raise
            # Short of parallel at the longer time scale: the time lost there is the program's
            # own delays, which no agent waited on another for (a probe run showed it): the
            # inconclusive verdict stands, with what the longer time scale read.
            raise JudgeFailure(
                first.judgement,
                f"{first.args[0].splitlines()[0]}; at time scale {s.time_scale} it read "
                f"{e.judgement.verdict.replace('_', ' ')}, the time lost there the program's own delays "
                "(no agent waited on another's call): inconclusive",
            ) from None
        except Exception as e:
            if s.probing and not isinstance(e, AssertionError) and hasattr(e, "add_note"):  # Python 3.11+
                e.add_note(PROBE_FAILED)
            raise
