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
    """One parallel slot (Ollama's default since v0.10): the server runs one call at a time,
    and the program is not blamed for it. The reviewers' calls are short (30 tokens), so
    their per-call overhead, paid before a slot, is about half of each and still overlaps:
    the slot's queueing is the deployment's largest cost, and the deployment allows part of
    an ideal server's saving (`partial`, limit `slots`) or, where the program's own time
    between its calls hides the queueing, 80 % of it or more (`full`)."""
    asyncio.run(team.review())
    judgement = sim.assert_parallel()
    deployment = judgement.report.deployment
    assert deployment.costs and deployment.costs[0][0] == "slots", judgement.explain()
    assert deployment.verdict in ("partial", "full"), judgement.explain()
    if deployment.verdict == "partial":
        assert deployment.limit == "slots", judgement.explain()


def test_review_in_turn(sim):
    asyncio.run(team.review_in_turn())
    sim.assert_parallel()


def test_review_locked(sim):
    asyncio.run(team.review_locked())
    sim.assert_parallel()


def test_review_blocking(sim):
    asyncio.run(team.review_blocking())
    sim.assert_parallel()
