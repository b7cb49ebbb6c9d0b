"""The review team as a LangGraph graph, map-reduce style: three reviewer nodes fan out from
START, each a two-turn ChatOllama conversation, and an editor node that joins them and asks the
model for one report from the three reviews. `build(blocking=True)` is the same graph with the
classic bug: async nodes calling the blocking `invoke`."""
import operator
from typing import Annotated, List, TypedDict

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_ollama import ChatOllama
from langgraph.graph import END, START, StateGraph

REVIEWERS = ["security", "performance", "style"]
TURNS = ["Review this change: the cache now expires entries lazily.", "Now name the riskiest line."]


class State(TypedDict):
    change: str
    reviews: Annotated[List[str], operator.add]
    report: str


def reviewer(name: str, blocking: bool):
    llm = ChatOllama(model="gemma3", num_predict=30)

    async def node(state: State) -> dict:
        messages = [SystemMessage(f"You are the {name} reviewer.")]
        for turn in TURNS:
            messages.append(HumanMessage(turn))
            reply = llm.invoke(messages) if blocking else await llm.ainvoke(messages)
            messages.append(AIMessage(reply.content))
        return {"reviews": [f"{name}: {messages[-1].content}"]}

    return node


def editor(blocking: bool):
    llm = ChatOllama(model="gemma3", num_predict=40)

    async def node(state: State) -> dict:
        # The editor's prompt carries the reviewers' answers: it cannot start before them, and
        # the judge sees that (it recognises its own answers in later prompts).
        messages = [
            SystemMessage("You are the editor. Merge the reviews into one report."),
            HumanMessage("\n\n".join(sorted(state["reviews"]))),
        ]
        reply = llm.invoke(messages) if blocking else await llm.ainvoke(messages)
        return {"report": reply.content}

    return node


def build(blocking: bool = False):
    graph = StateGraph(State)
    for name in REVIEWERS:
        graph.add_node(name, reviewer(name, blocking))
        graph.add_edge(START, name)
    graph.add_node("editor", editor(blocking))
    graph.add_edge(REVIEWERS, "editor")
    graph.add_edge("editor", END)
    return graph.compile()
