"""``durable_tool`` in real LangGraph graphs on SavegameSaver over an SQLite file: a
node re-run after an interrupt, a retry of its RetryPolicy, ToolNode's parallel calls,
a write left in doubt and settled by a person, and the refusals. Each call counted in
a ledger the tool appends to, so "ran once" is what the outside world saw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, RetryPolicy, interrupt

import savegame
from savegame.errors import ConfigurationError, InDoubtEffectError, NonDeterminismError
from savegame.langgraph import SavegameSaver, durable_tool


def conf(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


class Ledger:
    """What the outside world received: one line per real call."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def add(self, **call: Any) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(call) + "\n")

    def calls(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines()]


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "ledger.jsonl")


def email_graph(ledger: Ledger, *, before: int = 0, **tool_options: Any) -> StateGraph[Any]:
    @durable_tool(**tool_options)
    def send_email(to: str, body: str) -> str:
        ledger.add(to=to, body=body)
        return f"sent #{len(ledger.calls())}"

    def draft(state: MessagesState) -> dict[str, Any]:
        sent = send_email("ann@example.com", "the draft")
        answer = interrupt({"sent": sent, "question": "send the follow-up?"})
        follow = send_email("ann@example.com", f"follow-up: {answer}")
        return {"messages": [AIMessage(content=f"{sent}, {follow}")]}

    def think(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"thought {len(state['messages'])}")]}

    g = StateGraph(MessagesState)
    g.add_node("draft", draft)
    previous = START
    for i in range(before):  # steps (checkpoints) before the node that calls
        g.add_node(f"think{i}", think)
        g.add_edge(previous, f"think{i}")
        previous = f"think{i}"
    g.add_edge(previous, "draft")
    g.add_edge("draft", END)
    return g


def test_a_node_rerun_after_an_interrupt_does_not_call_again(
    sqlite_url: str, ledger: Ledger
) -> None:
    graph = email_graph(ledger).compile(checkpointer=SavegameSaver(sqlite_url))
    out = graph.invoke({"messages": [HumanMessage(content="hi")]}, conf("t1"))
    assert out["__interrupt__"][0].value["sent"] == "sent #1"
    assert len(ledger.calls()) == 1
    # The node runs again from its top on resume, in a fresh saver (another process).
    again = email_graph(ledger).compile(checkpointer=SavegameSaver(sqlite_url))
    out = again.invoke(Command(resume="yes"), conf("t1"))
    assert out["messages"][-1].content == "sent #1, sent #2"
    assert ledger.calls() == [
        {"to": "ann@example.com", "body": "the draft"},
        {"to": "ann@example.com", "body": "follow-up: yes"},
    ]


def test_each_execution_counts_its_calls_from_zero(sqlite_url: str, ledger: Ledger) -> None:
    """Two threads, the same graph: one thread's journal is never another's."""
    graph = email_graph(ledger).compile(checkpointer=SavegameSaver(sqlite_url))
    for thread in ("a", "b"):
        graph.invoke({"messages": [HumanMessage(content="hi")]}, conf(thread))
        graph.invoke(Command(resume=thread), conf(thread))
    bodies = [c["body"] for c in ledger.calls()]
    assert bodies == ["the draft", "follow-up: a", "the draft", "follow-up: b"]


def test_a_retry_of_the_node_returns_the_recorded_result(sqlite_url: str, ledger: Ledger) -> None:
    failures = iter([RuntimeError("flaky"), None])

    @durable_tool
    def charge(amount: int) -> str:
        ledger.add(amount=amount)
        return "ch_1"

    def pay(state: MessagesState) -> dict[str, Any]:
        receipt = charge(100)
        error = next(failures)
        if error is not None:
            raise error  # after the charge: LangGraph's retry re-runs the whole node
        return {"messages": [AIMessage(content=receipt)]}

    g = StateGraph(MessagesState)
    g.add_node(
        "pay",
        pay,
        retry_policy=RetryPolicy(max_attempts=2, initial_interval=0.01, retry_on=RuntimeError),
    )
    g.add_edge(START, "pay")
    g.add_edge("pay", END)
    out = g.compile(checkpointer=SavegameSaver(sqlite_url)).invoke(
        {"messages": [HumanMessage(content="pay")]}, conf("r")
    )
    assert out["messages"][-1].content == "ch_1"
    assert ledger.calls() == [{"amount": 100}]


def tool_calls_message(*calls: tuple[str, dict[str, Any]]) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[
            {"name": name, "args": args, "id": f"call_{i}"} for i, (name, args) in enumerate(calls)
        ],
    )


def test_toolnode_parallel_calls_are_named_by_the_models_call_ids(
    sqlite_url: str, ledger: Ledger
) -> None:
    @durable_tool
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        ledger.add(to=to, body=body)
        return f"sent to {to}"

    def approve(state: MessagesState) -> dict[str, Any]:
        interrupt("after the tools")
        return {}

    g = StateGraph(MessagesState)
    g.add_node("tools", ToolNode([send_email]))
    g.add_node("approve", approve)
    g.add_edge(START, "tools")
    g.add_edge("tools", "approve")
    g.add_edge("approve", END)
    graph = g.compile(checkpointer=SavegameSaver(sqlite_url))
    message = tool_calls_message(*(("send_email", {"to": t, "body": "x"}) for t in "abcd"))
    graph.invoke({"messages": [message]}, conf("p"))
    assert sorted(c["to"] for c in ledger.calls()) == ["a", "b", "c", "d"]
    # The model never sees tool_call_id (LangChain injects it).
    assert set(ToolNode([send_email]).tools_by_name["send_email"].args) == {"to", "body"}
    # A resume in another process asks the journal, by the same call ids.
    graph = g.compile(checkpointer=SavegameSaver(sqlite_url))
    out = graph.invoke(Command(resume="ok"), conf("p"))
    assert len(ledger.calls()) == 4
    contents = sorted(m.content for m in out["messages"] if m.type == "tool")
    assert contents == ["sent to a", "sent to b", "sent to c", "sent to d"]


def test_time_travel_forks_a_new_execution(sqlite_url: str, ledger: Ledger) -> None:
    """LangGraph's replay from a checkpoint_id copies it into a new "fork" checkpoint, whose
    tasks have new ids: the nodes after it run again, durable tools too (as LangGraph
    documents for replays). Pinned so a change of either side is seen."""

    @durable_tool
    def send_email(to: str) -> str:
        """Send an email."""
        ledger.add(to=to)
        return f"sent to {to}"

    g = StateGraph(MessagesState)
    g.add_node("tools", ToolNode([send_email]))
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    graph = g.compile(checkpointer=SavegameSaver(sqlite_url))
    graph.invoke({"messages": [tool_calls_message(("send_email", {"to": "a"}))]}, conf("tt"))
    before_tools = [s for s in graph.get_state_history(conf("tt")) if s.next == ("tools",)]
    graph.invoke(None, before_tools[0].config)
    assert ledger.calls() == [{"to": "a"}, {"to": "a"}]
    forked = next(iter(graph.get_state_history(conf("tt"))))
    assert forked.metadata is not None


def test_a_write_that_raised_stays_in_doubt_until_a_person_settles_it(
    sqlite_url: str, ledger: Ledger
) -> None:
    outcomes = iter([TimeoutError("gateway timeout"), None])

    @durable_tool
    def refund(order: str) -> str:
        ledger.add(order=order)
        error = next(outcomes)
        if error is not None:
            raise error  # after the refund may have happened
        return "re_2"

    def node(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=refund("o1"))]}

    g = StateGraph(MessagesState)
    g.add_node("refund", node)
    g.add_edge(START, "refund")
    g.add_edge("refund", END)
    saver = SavegameSaver(sqlite_url)
    graph = g.compile(checkpointer=saver)
    with pytest.raises(InDoubtEffectError) as caught:
        graph.invoke({"messages": [HumanMessage(content="refund")]}, conf("d"))
    assert len(ledger.calls()) == 1
    # Not called again while in doubt, however often the graph is run.
    with pytest.raises(InDoubtEffectError):
        graph.invoke(None, conf("d"))
    assert len(ledger.calls()) == 1
    error = caught.value
    assert error.request_id.startswith("tool:")
    savegame.resolve(error.run_id, error.request_id, done=True, result="re_1", store=sqlite_url)
    out = graph.invoke(None, conf("d"))
    assert out["messages"][-1].content == "re_1"
    assert len(ledger.calls()) == 1


def test_an_idempotent_write_in_doubt_is_called_again_with_the_same_request_id(
    sqlite_url: str, ledger: Ledger
) -> None:
    outcomes = iter([ConnectionError("reset"), None])

    @durable_tool(idempotent=True)
    def refund(order: str, request_id: str) -> str:
        ledger.add(order=order, request_id=request_id)
        error = next(outcomes)
        if error is not None:
            raise error
        return "re_1"

    def node(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=refund("o1"))]}

    g = StateGraph(MessagesState)
    g.add_node("refund", node)
    g.add_edge(START, "refund")
    g.add_edge("refund", END)
    graph = g.compile(checkpointer=SavegameSaver(sqlite_url))
    with pytest.raises(ConnectionError):
        graph.invoke({"messages": [HumanMessage(content="refund")]}, conf("i"))
    out = graph.invoke(None, conf("i"))
    assert out["messages"][-1].content == "re_1"
    first, second = ledger.calls()
    assert first["request_id"] == second["request_id"]
    assert first["request_id"].startswith("tool:")


def test_a_rerun_that_calls_with_other_arguments_is_refused(
    sqlite_url: str, ledger: Ledger
) -> None:
    bodies = iter(["first draft", "second draft"])

    @durable_tool
    def send_email(body: str) -> str:
        ledger.add(body=body)
        return "sent"

    def node(state: MessagesState) -> dict[str, Any]:
        send_email(next(bodies))  # not deterministic: an unjournaled model call, say
        interrupt("wait")
        return {}

    g = StateGraph(MessagesState)
    g.add_node("n", node)
    g.add_edge(START, "n")
    g.add_edge("n", END)
    graph = g.compile(checkpointer=SavegameSaver(sqlite_url))
    graph.invoke({"messages": []}, conf("nd"))
    with pytest.raises(NonDeterminismError, match="first draft"):
        graph.invoke(Command(resume="go"), conf("nd"))
    assert ledger.calls() == [{"body": "first draft"}]


def test_async_tools_in_an_async_graph(sqlite_url: str, ledger: Ledger) -> None:
    import asyncio

    @durable_tool
    async def post(text: str) -> str:
        ledger.add(text=text)
        return f"posted {text}"

    async def node(state: MessagesState) -> dict[str, Any]:
        first, second = await asyncio.gather(post("a"), post("b"))
        interrupt("wait")
        return {"messages": [AIMessage(content=f"{first}; {second}")]}

    g = StateGraph(MessagesState)
    g.add_node("n", node)
    g.add_edge(START, "n")
    g.add_edge("n", END)

    async def main() -> Any:
        graph = g.compile(checkpointer=SavegameSaver(sqlite_url))
        await graph.ainvoke({"messages": []}, conf("as"))
        return await graph.ainvoke(Command(resume="go"), conf("as"))

    out = asyncio.run(main())
    assert out["messages"][-1].content == "posted a; posted b"
    assert sorted(c["text"] for c in ledger.calls()) == ["a", "b"]


def test_refusals_say_what_to_do(sqlite_url: str, ledger: Ledger) -> None:
    @durable_tool
    def send(to: str) -> str:
        ledger.add(to=to)
        return "ok"

    with pytest.raises(ConfigurationError, match="inside a LangGraph node"):
        send("a")

    def node(state: MessagesState) -> dict[str, Any]:
        send("b")
        return {}

    g = StateGraph(MessagesState)
    g.add_node("n", node)
    g.add_edge(START, "n")
    g.add_edge("n", END)
    with pytest.raises(ConfigurationError, match="SavegameSaver"):
        g.compile(checkpointer=InMemorySaver()).invoke({"messages": []}, conf("x"))
    with pytest.raises(ConfigurationError, match="durability='exit'"):
        g.compile(checkpointer=SavegameSaver(sqlite_url)).invoke(
            {"messages": []}, conf("y"), durability="exit"
        )
    with pytest.raises(ConfigurationError, match="tool_call_id"):

        @durable_tool
        def clash(tool_call_id: str) -> None: ...

    assert ledger.calls() == []


@pytest.mark.parametrize("housekeeping", ["prune", "copy_thread"])
def test_prune_and_copy_keep_the_calls_a_rerun_needs(
    sqlite_url: str, ledger: Ledger, housekeeping: str
) -> None:
    """The node is interrupted after a write; the line is rebuilt (prune keep_latest) or
    copied to another thread: resumed there, the node finds its call."""
    saver = SavegameSaver(sqlite_url)
    graph = email_graph(ledger, before=3).compile(checkpointer=saver)
    graph.invoke({"messages": [HumanMessage(content="hi")]}, conf("h"))
    assert len(ledger.calls()) == 1
    stored = len(list(saver.list(conf("h"))))
    thread = "h"
    if housekeeping == "prune":
        saver.prune(["h"])
        assert len(list(saver.list(conf("h")))) < stored
    else:
        saver.copy_thread("h", "h2")
        thread = "h2"
    again = email_graph(ledger, before=3).compile(checkpointer=SavegameSaver(sqlite_url))
    out = again.invoke(Command(resume="yes"), conf(thread))
    assert out["messages"][-1].content == "sent #1, sent #2"
    assert [c["body"] for c in ledger.calls()] == ["the draft", "follow-up: yes"]


def test_a_subgraph_nodes_calls_live_in_its_namespace(sqlite_url: str, ledger: Ledger) -> None:
    inner = email_graph(ledger).compile()
    outer = StateGraph(MessagesState)
    outer.add_node("inner", inner)
    outer.add_edge(START, "inner")
    outer.add_edge("inner", END)
    graph = outer.compile(checkpointer=SavegameSaver(sqlite_url))
    graph.invoke({"messages": [HumanMessage(content="hi")]}, conf("s"))
    graph = outer.compile(checkpointer=SavegameSaver(sqlite_url))
    out = graph.invoke(Command(resume="yes"), conf("s"))
    assert out["messages"][-1].content == "sent #1, sent #2"
    assert len(ledger.calls()) == 2
    store = SavegameSaver(sqlite_url).store
    runs = {r.run_id: r.metadata["checkpoint_ns"] for r in store.list_runs(thread_id="s")}
    tools = [e for e in store.list_effects(limit=1000) if e.request_id.startswith("tool:")]
    assert {runs[e.run_id] for e in tools} == {ns for ns in runs.values() if ns}


def test_sync_durability(sqlite_url: str, ledger: Ledger) -> None:
    graph = email_graph(ledger).compile(checkpointer=SavegameSaver(sqlite_url))
    graph.invoke({"messages": [HumanMessage(content="hi")]}, conf("sy"), durability="sync")
    out = graph.invoke(Command(resume="ok"), conf("sy"), durability="sync")
    assert out["messages"][-1].content == "sent #1, sent #2"
    assert len(ledger.calls()) == 2


def test_a_write_that_raised_is_settled_by_its_reconcile(sqlite_url: str, ledger: Ledger) -> None:
    outcomes = iter([TimeoutError("gateway timeout")])
    happened: dict[str, str] = {}

    def look_up(request_id: str) -> str | None:
        return happened.get(request_id)  # the outside system's own record

    @durable_tool(reconcile=look_up)
    def refund(order: str, request_id: str) -> str:
        ledger.add(order=order)
        happened[request_id] = "re_9"
        raise next(outcomes)

    def node(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=refund("o1"))]}

    g = StateGraph(MessagesState)
    g.add_node("refund", node)
    g.add_edge(START, "refund")
    g.add_edge("refund", END)
    out = g.compile(checkpointer=SavegameSaver(sqlite_url)).invoke(
        {"messages": [HumanMessage(content="refund")]}, conf("rc")
    )
    assert out["messages"][-1].content == "re_9"
    assert len(ledger.calls()) == 1
