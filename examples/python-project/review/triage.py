"""A ticket triager over LangChain: one ChatOllama call per ticket, the tickets sent together
with the runnable's `batch`. `batch` runs the calls on a pool of `max_concurrency` threads, and
without it on Python's default pool, min(32, CPUs + 4) threads: 6 on a 2-core CI machine, 20
on a 16-core laptop. More tickets than threads run in rounds, and still save most of the time
one at a time would take: the judge reads that partly serialized, naming the limit. `abatch`
awaits every call at once."""
from langchain_ollama import ChatOllama

TICKETS = [f"Ticket {i}: the export job fails on file {i}.csv with a timeout." for i in range(12)]


def _llm():
    return ChatOllama(model="gemma3", num_predict=60)


def _prompts():
    return [f"Triage this ticket in one line: {t}" for t in TICKETS]


def triage(max_concurrency=None) -> list:
    replies = _llm().batch(_prompts(), config={"max_concurrency": max_concurrency})
    return [r.content for r in replies]


async def triage_async() -> list:
    replies = await _llm().abatch(_prompts())
    return [r.content for r in replies]
