"""Tool-calling reviewers on four agent frameworks, with no X-Agent labels: run together they
must read parallel (the judge tells the agents apart from their conversations, tool calls and
the answers they carry), awaited one after another serialized."""
import asyncio

import pytest

from review import frameworks

# The reviewers call a tool: a model that supports tools.
pytestmark = pytest.mark.sim_ollama(models=[frameworks.MODEL])


@pytest.mark.parametrize("framework", frameworks.FRAMEWORKS)
def test_reviewers_together_are_parallel(sim, framework):
    out = asyncio.run(frameworks.review(framework, together=True))
    assert len(out) == len(frameworks.REVIEWERS)
    sim.assert_parallel()


@pytest.mark.parametrize("framework", frameworks.FRAMEWORKS)
def test_reviewers_in_turn_are_caught(sim, framework):
    asyncio.run(frameworks.review(framework, together=False))
    judgement = sim.judge()
    assert judgement.verdict == "serialized", judgement.explain()
    assert judgement.report.cause == "client", judgement.explain()
