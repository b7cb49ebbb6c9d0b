"""The sample project's LangGraph reviewers under those pauses: with an awaited tool each test
must pass (a pause may make the first pair read short of parallel; the confirmation run must
take it away), with a blocking tool each must be caught (the waits recur). Prints one line per
test: the verdict and the confirmation (first pair, second pair, which was kept)."""
import asyncio

import pytest
from review import frameworks
from sim_ollama import ConfirmationNeeded, JudgeFailure, ProbeNeeded

pytestmark = pytest.mark.sim_ollama(models=[frameworks.MODEL])


def confirmation(report):
    c = report.raw.get("confirmation")
    return c and (c["first"], c.get("again"), c["kept"])


@pytest.mark.parametrize("i", range(40))
def test_awaited(sim, i):
    asyncio.run(frameworks.review("langgraph", together=True, tool="awaited"))
    j = sim.assert_parallel()
    print(f"\nAWAITED {i}: {j.verdict}; confirmation {confirmation(j.report)}")


@pytest.mark.parametrize("i", range(20))
def test_blocking(sim, i):
    asyncio.run(frameworks.review("langgraph", together=True, tool="blocking"))
    try:
        sim.assert_parallel()
        print(f"\nBLOCKING {i}: parallel (missed)")
    except (ProbeNeeded, ConfirmationNeeded):
        raise  # the fixture runs the test again
    except JudgeFailure as e:
        print(f"\nBLOCKING {i}: caught {e.judgement.verdict}; confirmation {confirmation(e.judgement.report)}")
