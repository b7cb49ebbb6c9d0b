"""The review team on the official ollama-python client. `review` is the program as written;
the other entry points are the same team with one concurrency bug each, as they appear in real
code. Every function reads OLLAMA_HOST, as ollama-python does."""
import asyncio

import ollama

MODEL = "gemma3"
REVIEWERS = ["security", "performance", "style"]
TURNS = ["Review this change: the cache now expires entries lazily.", "Now name the riskiest line."]


async def reviewer(client: ollama.AsyncClient, name: str) -> str:
    history = [{"role": "system", "content": f"You are the {name} reviewer."}]
    for turn in TURNS:
        history.append({"role": "user", "content": turn})
        reply = await client.chat(model=MODEL, messages=history, options={"num_predict": 30})
        history.append({"role": "assistant", "content": reply.message.content})
    return history[-1]["content"]


async def review() -> list:
    """Correct: the reviewers run together."""
    client = ollama.AsyncClient()
    return await asyncio.gather(*(reviewer(client, n) for n in REVIEWERS))


async def review_in_turn() -> list:
    """Bug: each reviewer is awaited before the next one starts."""
    client = ollama.AsyncClient()
    return [await reviewer(client, n) for n in REVIEWERS]


async def review_locked() -> list:
    """Bug: one asyncio.Lock shared by the team, held around every call (meant as a rate
    limit, it lets one call through at a time)."""
    client = ollama.AsyncClient()
    lock = asyncio.Lock()

    class Locked:
        async def chat(self, **kw):
            async with lock:
                return await client.chat(**kw)

    return await asyncio.gather(*(reviewer(Locked(), n) for n in REVIEWERS))


async def review_blocking() -> list:
    """Bug: the synchronous client called inside async code blocks the event loop, so the
    gathered reviewers run one call at a time."""
    client = ollama.Client()

    class Blocking:
        async def chat(self, **kw):
            return client.chat(**kw)

    return await asyncio.gather(*(reviewer(Blocking(), n) for n in REVIEWERS))
