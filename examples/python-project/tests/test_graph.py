"""The LangGraph version of the team, judged the same way."""
import asyncio

from review import graph


def test_graph_fans_out(sim):
    out = asyncio.run(graph.build().ainvoke({"change": "lazy cache expiry", "reviews": []}))
    assert len(out["reviews"]) == len(graph.REVIEWERS) and out["report"]
    sim.assert_parallel()


def test_graph_blocking_nodes(sim):
    asyncio.run(graph.build(blocking=True).ainvoke({"change": "lazy cache expiry", "reviews": []}))
    sim.assert_parallel()
