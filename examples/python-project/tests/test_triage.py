"""A batch of tickets through LangChain's `batch`: with a thread for each ticket, or with
`abatch`, the calls run together; through six threads (what `batch` gets by default on a 2-core
machine) they run in two rounds: most of the time is still saved, but twice what the server
needs is taken, and the judge names the limit."""
import asyncio

import pytest

from review import triage


# Twelve Python threads take 0.1-0.25 s to start on a busy machine, against calls of 80 ms at
# the default time scale (0.1): the start-up, the program's own, then reads as most of the time
# lost, and the judge says to judge it at a longer time scale (cause `time_scale`). At 0.5 the
# calls are 400 ms and outlast it.
@pytest.mark.sim_ollama(time_scale=0.5)
def test_a_batch_with_a_thread_per_ticket_is_parallel(sim):
    assert len(triage.triage(max_concurrency=len(triage.TICKETS))) == len(triage.TICKETS)
    sim.assert_parallel()


def test_an_async_batch_is_parallel(sim):
    asyncio.run(triage.triage_async())
    sim.assert_parallel()


def test_a_batch_through_six_threads_is_caught(sim):
    triage.triage(max_concurrency=6)
    # One call per ticket and no labels: twelve requests in two rounds of six could be six
    # agents' two turns each (each thread of the pool sends its next call after its answer,
    # as an agent would, so a probe run cannot tell them apart either): say there are twelve.
    judgement = sim.assert_judged("partly_serialized", agents=len(triage.TICKETS))
    assert judgement.report.cause == "client", judgement.explain()
    assert "at most 6 of 12" in judgement.report.reason, judgement.explain()
