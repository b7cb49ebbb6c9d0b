"""The review team as a LangGraph graph: three reviewer nodes fan out from START, each a
two-turn ChatOllama conversation, and a node that collects their reviews. `build(blocking=True)`
is the same graph with the classic bug: async nodes calling the blocking `invoke`."""
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


def collect(state: State) -> dict:
    return {"report": "\n".join(sorted(state["reviews"]))}


def build(blocking: bool = False):
    graph = StateGraph(State)
    for name in REVIEWERS:
        graph.add_node(name, reviewer(name, blocking))
        graph.add_edge(START, name)
    graph.add_node("collect", collect)
    graph.add_edge(REVIEWERS, "collect")
    graph.add_edge("collect", END)
    return graph.compile()
