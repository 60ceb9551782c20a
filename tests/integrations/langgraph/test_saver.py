"""Real LangGraph graphs on SavegameSaver over an SQLite file: interrupts and
``Command(resume=...)``, ``update_state``, time travel by ``checkpoint_id``, subgraphs,
``Send`` fan-out, the durability modes; each resume from a new saver on the same file."""

from __future__ import annotations

import operator
import subprocess
import sys
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, interrupt

from savegame import codec
from savegame.langgraph import SavegameSaver


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    approved: bool


def chat_graph() -> Any:
    def ask(state: Chat) -> dict[str, Any]:
        answer = interrupt({"question": "send it?", "draft": state["messages"][-1].content})
        return {"approved": answer == "yes", "messages": [HumanMessage(content=f"said {answer}")]}

    def reply(state: Chat) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"reply {len(state['messages'])}")]}

    g = StateGraph(Chat)
    g.add_node("reply", reply)
    g.add_node("ask", ask)
    g.add_edge(START, "reply")
    g.add_edge("reply", "ask")
    g.add_edge("ask", END)
    return g


def conf(thread: str, **extra: Any) -> Any:
    return {"configurable": {"thread_id": thread, **extra}}


def test_plain_import_does_not_import_langgraph() -> None:
    code = "import sys, savegame; assert not any(m.startswith('langgraph') for m in sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_interrupt_then_resume_from_a_new_saver(sqlite_url: str) -> None:
    first = chat_graph().compile(checkpointer=SavegameSaver(sqlite_url))
    out = first.invoke({"messages": [HumanMessage(content="hi")]}, conf("t1"))
    assert out["__interrupt__"][0].value["question"] == "send it?"
    again = chat_graph().compile(checkpointer=SavegameSaver(sqlite_url))
    snapshot = again.get_state(conf("t1"))
    assert snapshot.next == ("ask",)
    assert snapshot.tasks[0].interrupts[0].value["draft"] == "reply 1"
    done = again.invoke(Command(resume="yes"), conf("t1"))
    assert done["approved"] is True
    assert [m.content for m in done["messages"]] == ["hi", "reply 1", "said yes"]
    assert isinstance(done["messages"][1], AIMessage)


def test_update_state_and_time_travel(sqlite_url: str) -> None:
    graph = chat_graph().compile(checkpointer=SavegameSaver(sqlite_url))
    graph.invoke({"messages": [HumanMessage(content="hi")]}, conf("t2"))
    graph.invoke(Command(resume="no"), conf("t2"))
    history = list(graph.get_state_history(conf("t2")))
    assert history[0].values["approved"] is False
    # Back to the checkpoint before "ask" ran, and answer differently there: a branch.
    before_ask = next(s for s in history if s.next == ("ask",))
    forked = graph.update_state(before_ask.config, {"messages": [AIMessage(content="edited")]})
    done = graph.invoke(Command(resume="yes"), forked)
    assert done["approved"] is True
    assert [m.content for m in done["messages"]] == ["hi", "reply 1", "edited", "said yes"]
    # The old branch is still there, by its checkpoint id.
    old = graph.get_state(history[0].config)
    assert old.values["approved"] is False
    assert [m.content for m in old.values["messages"]] == ["hi", "reply 1", "said no"]


class Fan(TypedDict):
    topics: list[str]
    results: Annotated[list[str], operator.add]


def test_send_fan_out_in_a_subgraph_each_durability_mode(sqlite_url: str) -> None:
    def work(arg: dict[str, str]) -> dict[str, list[str]]:
        return {"results": [arg["topic"].upper()]}

    inner = StateGraph(Fan)
    inner.add_node("work", work)
    inner.add_conditional_edges(
        START, lambda s: [Send("work", {"topic": t}) for t in s["topics"]], ["work"]
    )
    inner.add_edge("work", END)

    outer = StateGraph(Fan)
    outer.add_node("inner", inner.compile())
    outer.add_edge(START, "inner")
    outer.add_edge("inner", END)
    saver = SavegameSaver(sqlite_url)
    graph = outer.compile(checkpointer=saver)
    for mode in ("sync", "async", "exit"):
        out = graph.invoke({"topics": ["a", "b"]}, conf(f"fan-{mode}"), durability=mode)
        assert sorted(out["results"]) == ["A", "B"]
        state = SavegameSaver(sqlite_url).get_tuple(conf(f"fan-{mode}", checkpoint_ns=""))
        assert state is not None
        assert sorted(state.checkpoint["channel_values"]["results"]) == ["A", "B"]


def _extend(state: list[int] | None, writes: list[list[int]]) -> list[int]:
    out = list(state or [])
    for write in writes:
        out.extend(write)
    return out


class Deltas(TypedDict):
    items: Annotated[list[int], DeltaChannel(_extend)]
    n: int


def test_prune_keep_latest_keeps_what_a_delta_channel_is_rebuilt_from(sqlite_url: str) -> None:
    def step(state: Deltas) -> dict[str, Any]:
        return {"items": [len(state.get("items") or [])], "n": state.get("n", 0) + 1}

    g = StateGraph(Deltas)
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: END if s["n"] >= 6 else "step")
    saver = SavegameSaver(sqlite_url)
    g.compile(checkpointer=saver).invoke({"items": [], "n": 0}, conf("deltas"))
    saver.prune(["deltas"])
    after = g.compile(checkpointer=SavegameSaver(sqlite_url)).get_state(conf("deltas"))
    assert after.values == {"items": [0, 1, 2, 3, 4, 5], "n": 6}


class Snapshots(TypedDict):
    items: Annotated[list[int], DeltaChannel(_extend, snapshot_frequency=3)]
    n: int


def test_a_delta_channels_snapshots_and_a_sends_timeout_are_saved(sqlite_url: str) -> None:
    """A DeltaChannel writes its whole value every ``snapshot_frequency`` updates (LangGraph's
    ``_DeltaSnapshot``); a Send may carry a timeout policy of timedeltas."""
    import datetime as dt

    def step(state: Snapshots) -> dict[str, Any]:
        return {"items": [len(state.get("items") or [])], "n": state.get("n", 0) + 1}

    def route(state: Snapshots) -> Any:
        if state["n"] >= 7:
            return END
        return [Send("step", state) if state["n"] % 2 else "step"]

    g = StateGraph(Snapshots)
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", route, ["step", END])
    g.compile(checkpointer=SavegameSaver(sqlite_url)).invoke({"items": [], "n": 0}, conf("snap"))
    after = g.compile(checkpointer=SavegameSaver(sqlite_url)).get_state(conf("snap"))
    assert after.values["items"] == list(range(7))
    # A Send's timeout (async nodes only) turns into a TimeoutPolicy of timedeltas.
    sent = Send("step", {"n": 1}, timeout=dt.timedelta(minutes=5, microseconds=1))
    assert codec.decode_value(codec.encode_value(sent, "send")).timeout == sent.timeout
