"""Tool-calling reviewers on five agent frameworks, with no X-Agent labels: run together they
must read parallel (the judge tells the agents apart from their conversations, tool calls and
the answers they carry), awaited one after another serialized. With a tool that calls
time.sleep inside async def (LangGraph here; the OpenAI Agents SDK and LiteLLM the same, by hand) the agents wait for each other
between their calls: one run cannot tell that from their own work, so the fixture runs the
test again as a probe run, and the judge names the work between calls (issue 36)."""
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


@pytest.mark.parametrize("framework", ["langgraph"])
def test_reviewers_with_a_blocking_tool_are_caught(sim, framework):
    asyncio.run(frameworks.review(framework, together=True, tool="blocking"))
    sim.assert_parallel()


@pytest.mark.parametrize("framework", ["langgraph"])
def test_reviewers_with_an_awaited_tool_are_parallel(sim, framework):
    asyncio.run(frameworks.review(framework, together=True, tool="awaited"))
    sim.assert_parallel()


def test_reviewers_through_a_litellm_router_are_parallel(sim):
    out = asyncio.run(frameworks.review_routed())
    assert len(out) == len(frameworks.REVIEWERS)
    sim.assert_parallel()


def test_a_litellm_router_of_one_request_at_a_time_is_caught(sim):
    """`max_parallel_requests=1` on the router's deployment: the server allows the reviewers
    together (the ideal preset), the client's router lets one call through at a time."""
    asyncio.run(frameworks.review_routed(max_parallel_requests=1))
    judgement = sim.judge()
    assert judgement.verdict in ("serialized", "partly_serialized"), judgement.explain()
    assert judgement.report.cause == "client", judgement.explain()
