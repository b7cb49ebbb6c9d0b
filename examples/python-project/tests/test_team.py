"""The team's concurrency, judged: each test runs one entry point against a fresh simulator
(the `sim` fixture) and asks the judge whether the reviewers overlapped."""
import asyncio

import pytest

from review import team


def test_review_runs_reviewers_together(sim):
    asyncio.run(team.review())
    sim.assert_parallel()


@pytest.mark.asyncio
async def test_review_runs_reviewers_together_async(sim):
    await team.review()
    await sim.aassert_parallel()


@pytest.mark.sim_ollama(preset="single-1slot")
def test_one_slot_server_is_not_the_programs_fault(sim):
    """One parallel slot (Ollama's default since v0.10): the server answers one call at a
    time, and the judge says so in the deployment verdict without blaming the program."""
    asyncio.run(team.review())
    judgement = sim.assert_parallel()
    assert judgement.report.deployment.verdict == "no_speedup", judgement.explain()
    assert judgement.report.deployment.limit == "slots", judgement.explain()


def test_review_in_turn(sim):
    asyncio.run(team.review_in_turn())
    sim.assert_parallel()


def test_review_locked(sim):
    asyncio.run(team.review_locked())
    sim.assert_parallel()


def test_review_blocking(sim):
    asyncio.run(team.review_blocking())
    sim.assert_parallel()
