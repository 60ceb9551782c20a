"""``SavegameSaver.prune(keep_latest)`` keeps what LangGraph's own prune keeps.

After LangGraph's prune tests for PostgresSaver (``test_prune_postgres.py``, which
``tests/peers/langgraph/run.py`` also runs against SavegameSaver): the kept checkpoint
has no parent left dangling, a finished subgraph call's namespace goes, an interrupted
subgraph and a ``checkpointer=True`` subgraph keep their latest, and a pruned thread
runs on like a twin that was never pruned.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

from savegame.langgraph import SavegameSaver


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    calls: Annotated[list[str], operator.add]


def conf(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def say(i: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"hi {i}", id=f"hi-{i}")]}


def reply(ask: bool) -> Any:
    def node(state: State) -> dict[str, Any]:
        n = len(state["messages"])
        answer = interrupt("approve?") if ask else "ok"
        return {"messages": [AIMessage(f"{answer} {n}", id=f"reply-{n}")]}

    return node


def counting(name: str, *, checkpointer: bool | None) -> Any:
    def count(state: State) -> dict[str, Any]:
        n = len(state["messages"])
        return {"calls": [name], "messages": [AIMessage(f"{name} {n}", id=f"{name}-{n}")]}

    g = StateGraph(State)
    g.add_node("count", count)
    g.add_edge(START, "count")
    return g.compile(checkpointer=checkpointer)


def namespaces(saver: SavegameSaver, thread: str) -> list[str]:
    return sorted({t.config["configurable"]["checkpoint_ns"] for t in saver.list(conf(thread))})


def test_the_kept_checkpoint_has_no_dangling_parent(sqlite_url: str) -> None:
    saver = SavegameSaver(sqlite_url)
    g = StateGraph(State)
    g.add_node("reply", reply(ask=False))
    g.add_edge(START, "reply")
    graph = g.compile(checkpointer=saver)
    for i in range(3):
        for thread in ("pruned", "twin"):
            graph.invoke(say(i), conf(thread))
    before = graph.get_state(conf("pruned"))
    assert before.parent_config is not None

    saver.prune(["pruned"])

    after = graph.get_state(conf("pruned"))
    assert [t.config["configurable"]["checkpoint_id"] for t in saver.list(conf("pruned"))] == [
        before.config["configurable"]["checkpoint_id"]
    ]
    assert after.parent_config is None
    assert after.values == before.values
    for thread in ("pruned", "twin"):
        graph.invoke(say(3), conf(thread))
    assert graph.get_state(conf("pruned")).values == graph.get_state(conf("twin")).values


def test_finished_subgraph_calls_go_and_a_checkpointer_true_subgraph_stays(
    sqlite_url: str,
) -> None:
    """A thread that calls a subgraph each turn grew a namespace per turn, pruned or not."""
    saver = SavegameSaver(sqlite_url)
    parent = StateGraph(State)
    parent.add_node("memory", counting("memory", checkpointer=True))
    parent.add_node("call", counting("call", checkpointer=None))
    parent.add_edge(START, "memory")
    parent.add_edge("memory", "call")
    graph = parent.compile(checkpointer=saver)
    for i in range(5):
        for thread in ("pruned", "twin"):
            graph.invoke(say(i), conf(thread))
    assert len(namespaces(saver, "pruned")) == 7  # the root, memory, 5 calls

    saver.prune(["pruned"])

    assert namespaces(saver, "pruned") == ["", "memory"]
    for thread in ("pruned", "twin"):
        graph.invoke(say(5), conf(thread))
    assert graph.get_state(conf("pruned")).values == graph.get_state(conf("twin")).values


def test_an_interrupted_subgraph_keeps_its_latest_and_resumes(sqlite_url: str) -> None:
    saver = SavegameSaver(sqlite_url)
    sub = StateGraph(State)
    sub.add_node("reply", reply(ask=True))
    sub.add_edge(START, "reply")
    parent = StateGraph(State)
    parent.add_node("sub", sub.compile())
    parent.add_edge(START, "sub")
    graph = parent.compile(checkpointer=saver)
    for thread in ("pruned", "twin"):
        for i in range(2):
            graph.invoke(say(i), conf(thread))
            graph.invoke(Command(resume=f"yes {i}"), conf(thread))
        graph.invoke(say(2), conf(thread))
    before = graph.get_state(conf("pruned"), subgraphs=True)
    waiting = before.tasks[0].state.config["configurable"]["checkpoint_ns"]

    saver.prune(["pruned"])

    assert namespaces(saver, "pruned") == ["", waiting]
    for thread in ("pruned", "twin"):
        graph.invoke(Command(resume="yes 2"), conf(thread))
    assert graph.get_state(conf("pruned")).values == graph.get_state(conf("twin")).values


def test_prune_refuses_a_single_string(sqlite_url: str) -> None:
    """``prune("thread")`` would prune the threads "t", "h", "r" ...: refused, as LangGraph's."""
    with pytest.raises(TypeError, match="not a str"):
        SavegameSaver(sqlite_url).prune("pruned")
