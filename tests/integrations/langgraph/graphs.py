"""LangGraph graphs the CLI and retention tests share: a superstep that stops half-way, a
subgraph that interrupts, a Send fan-out (the chat graph is ``test_saver.chat_graph``)."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send, interrupt

import savegame


class Log(TypedDict):
    log: Annotated[list[str], operator.add]


def parallel_graph() -> Any:
    """a, then b and c in one superstep (c interrupts), then d once both are in."""

    def c(state: Log) -> dict[str, Any]:
        return {"log": [f"c {interrupt('ok?')}"]}

    g = StateGraph(Log)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", lambda s: {"log": ["b"]})
    g.add_node("c", c)
    g.add_node("d", lambda s: {"log": ["d"]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("a", "c")
    g.add_edge(["b", "c"], "d")
    g.add_edge("d", END)
    return g


def nested_graph() -> Any:
    """``inner`` (i1, then i2 interrupts) as a node of the outer graph, then ``after``."""

    def i2(state: Log) -> dict[str, Any]:
        return {"log": [f"i2 {interrupt('inner?')}"]}

    inner = StateGraph(Log)
    inner.add_node("i1", lambda s: {"log": ["i1"]})
    inner.add_node("i2", i2)
    inner.add_edge(START, "i1")
    inner.add_edge("i1", "i2")
    inner.add_edge("i2", END)
    outer = StateGraph(Log)
    outer.add_node("inner", inner.compile())
    outer.add_node("after", lambda s: {"log": ["after"]})
    outer.add_edge(START, "inner")
    outer.add_edge("inner", "after")
    outer.add_edge("after", END)
    return outer


class Fan(TypedDict):
    topics: list[str]
    results: Annotated[list[str], operator.add]


def fan_graph() -> Any:
    g = StateGraph(Fan)
    g.add_node("work", lambda arg: {"results": [arg["topic"].upper()]})
    g.add_conditional_edges(
        START, lambda s: [Send("work", {"topic": t}) for t in s["topics"]], ["work"]
    )
    g.add_edge("work", END)
    return g


def two_asks_graph() -> Any:
    """x and y in one superstep, each asks a person: two interrupts pending at once."""
    g = StateGraph(Log)
    g.add_node("x", lambda s: {"log": [f"x {interrupt('x?')}"]})
    g.add_node("y", lambda s: {"log": [f"y {interrupt('y?')}"]})
    g.add_edge(START, "x")
    g.add_edge(START, "y")
    g.add_edge("x", END)
    g.add_edge("y", END)
    return g


def asks_twice_graph() -> Any:
    """One node asks, then asks again: its second interrupt comes after an answer."""

    def n(state: Log) -> dict[str, Any]:
        first = interrupt("first?")
        second = interrupt("second?")
        return {"log": [f"n {first} {second}"]}

    g = StateGraph(Log)
    g.add_node("n", n)
    g.add_edge(START, "n")
    g.add_edge("n", END)
    return g


@dataclass(frozen=True)
class Parcel:
    """A class of the application's own: a reader in another process does not import it."""

    weight: int


#: The name Parcel is stored under.
PARCEL = "tests.langgraph.Parcel"


class Shipping(TypedDict):
    parcel: Parcel


def parcel_graph() -> Any:
    """One node that weighs a Parcel (registered, so the saver stores it)."""
    savegame.register(Parcel, name=PARCEL)
    g = StateGraph(Shipping)
    g.add_node("weigh", lambda s: {"parcel": Parcel(s["parcel"].weight + 1)})
    g.add_edge(START, "weigh")
    g.add_edge("weigh", END)
    return g
