"""The review team on five agent frameworks, unlabelled, each reviewer a tool-calling agent
(it looks the change up with a tool, then answers): LangGraph's ReAct agent over ChatOllama,
the OpenAI Agents SDK (Chat Completions and Responses models), pydantic-ai (a typed output
with an enum and two patterns, as a JSON schema the server enforces and pydantic validates),
AutoGen AgentChat over its Ollama client, and a tool loop of the reviewer's own over LiteLLM
(`litellm.acompletion` with the `ollama_chat/` provider, Ollama's /api/chat).

`review(framework, together=True)` runs the three reviewers at once (asyncio.gather);
`together=False` awaits each before the next, the bug. `tool="blocking"` gives the reviewers
a lookup tool that takes 0.3 s with `time.sleep` inside `async def`, the bug that holds the
event loop between two calls (issue 36); `tool="awaited"` the same tool with
`await asyncio.sleep`, its correct twin (LangGraph, the OpenAI Agents SDK, LiteLLM). Every client reads the simulator's address from the
environment the `sim` fixture sets (OLLAMA_HOST, OPENAI_BASE_URL)."""
import asyncio
import os
import time

REVIEWERS = ["security", "performance", "style"]
TASK = "Review this change: the cache now expires entries lazily. Look the change up first."
MODEL = "llama3.2:1b"  # gemma3 has no tool support (as in real Ollama)
FRAMEWORKS = ["langgraph", "openai-agents-chat", "openai-agents-responses", "pydantic-ai", "autogen", "litellm"]


def lookup_change(topic: str) -> str:
    """Look up a change by topic: its diff summary."""
    return f"The change to {topic}: entries expire when read, not on a timer."


async def lookup_change_blocking(topic: str) -> str:
    """Look up a change by topic: its diff summary."""
    time.sleep(0.3)  # the bug: a blocking call inside async def holds the event loop
    return lookup_change(topic)


async def lookup_change_awaited(topic: str) -> str:
    """Look up a change by topic: its diff summary."""
    await asyncio.sleep(0.3)
    return lookup_change(topic)


# The same name for every variant: the model's call (and its length in tokens) is the same.
lookup_change_blocking.__name__ = lookup_change_awaited.__name__ = "lookup_change"
TOOLS = {"plain": lookup_change, "blocking": lookup_change_blocking, "awaited": lookup_change_awaited}


def _langgraph(name, tool):
    from langchain_ollama import ChatOllama
    from langgraph.prebuilt import create_react_agent

    agent = create_react_agent(
        ChatOllama(model=MODEL, num_predict=30), [TOOLS[tool]], prompt=f"You are the {name} reviewer."
    )

    async def run():
        out = await agent.ainvoke({"messages": [("user", TASK)]})
        return out["messages"][-1].content

    return run


def _openai_agents(name, responses, tool):
    from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, function_tool
    from agents import set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # no trace upload to OpenAI's servers
    client = AsyncOpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key="sim-ollama")
    kind = OpenAIResponsesModel if responses else OpenAIChatCompletionsModel
    agent = Agent(
        name=name,
        instructions=f"You are the {name} reviewer.",
        model=kind(model=MODEL, openai_client=client),
        tools=[function_tool(TOOLS[tool])],
    )

    async def run():
        return (await Runner.run(agent, TASK)).final_output

    return run


def _pydantic_ai(name):
    from typing import Literal

    from pydantic import BaseModel, Field
    from pydantic_ai import Agent, NativeOutput
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.ollama import OllamaProvider

    class Review(BaseModel):
        verdict: Literal["approve", "request-changes"]
        risk: str = Field(pattern=r"^(low|medium|high)$")
        # `\d` is past what llama.cpp's grammar reads (any string there); a model writes a match.
        ticket: str = Field(pattern=r"^[A-Z]{2,4}-\d{1,5}$")

    model = OpenAIChatModel(MODEL, provider=OllamaProvider(base_url=os.environ["OPENAI_BASE_URL"]))
    # The typed output as a JSON schema the server enforces (Ollama's `format`).
    agent = Agent(
        model, system_prompt=f"You are the {name} reviewer.", output_type=NativeOutput(Review), tools=[lookup_change]
    )

    async def run():
        return (await agent.run(TASK)).output

    return run


def _autogen(name):
    from autogen_agentchat.agents import AssistantAgent
    from autogen_ext.models.ollama import OllamaChatCompletionClient

    client = OllamaChatCompletionClient(
        model=MODEL,
        host=os.environ["OLLAMA_HOST"],
        model_info={
            "vision": False,
            "function_calling": True,
            "json_output": True,
            "family": "unknown",
            "structured_output": True,
        },
    )
    agent = AssistantAgent(
        name, model_client=client, tools=[lookup_change], system_message=f"You are the {name} reviewer."
    )

    async def run():
        return (await agent.run(task=TASK)).messages[-1]

    return run


# LiteLLM reads its model price list from its own package, not from GitHub at import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _tool_spec(fn):
    """An OpenAI-style function tool for `fn(topic: str)`."""
    parameters = {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]}
    return {"type": "function", "function": {"name": fn.__name__, "description": fn.__doc__, "parameters": parameters}}


def _litellm(name, tool, router=None):
    import json

    import litellm

    fn = TOOLS[tool]
    # Through a LiteLLM Router (its deployments named "reviewer"), or straight to the server.
    complete = router.acompletion if router else litellm.acompletion
    model = "reviewer" if router else f"ollama_chat/{MODEL}"

    async def run():
        messages = [{"role": "system", "content": f"You are the {name} reviewer."}, {"role": "user", "content": TASK}]
        for _ in range(4):
            response = await complete(
                model=model,
                api_base=os.environ["OLLAMA_HOST"],
                messages=messages,
                tools=[_tool_spec(fn)],
                # Longer answers than the other frameworks' 30 tokens: LiteLLM's own work per
                # call (a Router's most of all) is milliseconds of Python, which calls of 20 ms
                # (30 tokens at time scale 0.1) do not outlast on a busy machine.
                max_tokens=100,
            )
            message = response.choices[0].message
            if not message.tool_calls:
                return message.content
            messages.append(message.model_dump())
            for call in message.tool_calls:
                out = fn(**json.loads(call.function.arguments or "{}"))
                if asyncio.iscoroutine(out):
                    out = await out
                messages.append({"role": "tool", "tool_call_id": call.id, "content": out})
        raise RuntimeError(f"the {name} reviewer never answered")

    return run


def reviewer(framework: str, name: str, tool: str = "plain"):
    """One reviewer agent of `framework`: an async callable that runs it once. `tool`: the
    lookup tool, `plain`, `blocking` or `awaited` (LangGraph, the OpenAI Agents SDK and LiteLLM)."""
    if framework == "langgraph":
        return _langgraph(name, tool)
    if framework in ("openai-agents-chat", "openai-agents-responses"):
        return _openai_agents(name, responses=framework.endswith("responses"), tool=tool)
    if framework == "pydantic-ai":
        return _pydantic_ai(name)
    if framework == "autogen":
        return _autogen(name)
    if framework == "litellm":
        return _litellm(name, tool)
    raise ValueError(f"unknown framework {framework!r}: one of {', '.join(FRAMEWORKS)}")


async def review_routed(max_parallel_requests=None) -> list:
    """The LiteLLM reviewers together, through one `litellm.Router` whose deployment is the
    server; `max_parallel_requests=1` (a per-deployment limit, set for a server thought to run
    one call at a time) lets one call through at a time: the client's serialization, whatever
    the server allows."""
    import litellm

    params = {"model": f"ollama_chat/{MODEL}", "api_base": os.environ["OLLAMA_HOST"]}
    if max_parallel_requests is not None:
        params["max_parallel_requests"] = max_parallel_requests
    router = litellm.Router(model_list=[{"model_name": "reviewer", "litellm_params": params}])
    return await asyncio.gather(*(_litellm(n, "plain", router)() for n in REVIEWERS))


async def review(framework: str, together: bool = True, tool: str = "plain") -> list:
    runs = [reviewer(framework, n, tool) for n in REVIEWERS]
    if together:
        return await asyncio.gather(*(run() for run in runs))
    return [await run() for run in runs]  # the bug: each agent awaited before the next
