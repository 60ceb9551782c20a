"""What a LangGraph thread waits for, its status as savegame shows it, and answering its
``interrupt()`` without the graph: real graphs on SavegameSaver over an SQLite file, the
answer recorded through ``langgraph.answer`` and taken by LangGraph's own
``graph.invoke(None, config)``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import WRITES_IDX_MAP
from langgraph.graph import END as LG_END
from langgraph.graph import START, StateGraph
from langgraph.types import Command

import savegame
from savegame import END, RunStatus, Workflow
from savegame.codec.crypto import Keyring
from savegame.codec.storage import StorageConfig
from savegame.errors import ConfigurationError, EffectSettledError, NotFoundError, RunStateError
from savegame.integrations import langgraph
from savegame.integrations.langgraph import _answer, _waits
from savegame.integrations.langgraph._claims import marker_id
from savegame.langgraph import SavegameSaver
from savegame.model import BOOKKEEPING_KEY
from savegame.stores import open_store
from tests.integrations.langgraph.graphs import (
    Log,
    asks_twice_graph,
    nested_graph,
    two_asks_graph,
)
from tests.integrations.langgraph.migrate_graphs import sqlite_source
from tests.integrations.langgraph.test_saver import chat_graph, conf


def statuses(url: str, thread: str) -> set[str]:
    return {r.info.status.value for r in langgraph.shown_runs(thread_id=thread, store=url)}


def test_resume_index_is_langgraphs() -> None:
    assert WRITES_IDX_MAP["__resume__"] == _waits.RESUME_INDEX


def test_an_interrupt_waits_everywhere_until_answered_then_the_graph_takes_the_answer(
    sqlite_url: str,
) -> None:
    graph = chat_graph().compile(checkpointer=SavegameSaver(sqlite_url))
    graph.invoke({"messages": [HumanMessage(content="hi")]}, conf("t1"))
    state = graph.get_state(conf("t1"))
    (shown,) = langgraph.shown_runs(store=sqlite_url)
    assert (shown.stored, shown.info.status) == (RunStatus.COMPLETED, RunStatus.INTERRUPTED)
    assert [
        r.info.run_id for r in langgraph.shown_runs(status="interrupted", store=sqlite_url)
    ] == [shown.info.run_id]
    assert langgraph.shown_runs(status="completed", store=sqlite_url) == []
    (waiting,) = langgraph.waiting(store=sqlite_url)
    assert waiting.run_id == shown.info.run_id
    assert waiting.interrupt_id == state.interrupts[0].id
    assert (waiting.name, waiting.node) == ("ask", "ask")
    assert waiting.payload == {"question": "send it?", "draft": "reply 1"}
    assert langgraph.waiting("t1", store=sqlite_url) == [waiting]

    done = langgraph.answer("t1", "yes", by="alice", store=sqlite_url)
    assert (done.interrupt_id, done.by, done.node) == (waiting.interrupt_id, "alice", "ask")
    # Answered, not yet taken: nothing waits for a person; the thread waits for its graph.
    assert langgraph.waiting(store=sqlite_url) == []
    assert statuses(sqlite_url, "t1") == {"queued"}
    (asked,) = langgraph.thread_of("t1", store=sqlite_url).asks  # type: ignore[union-attr]
    assert asked.answered is not None
    assert (asked.answered.value, asked.answered.by) == ("yes", "alice")

    # Another process with the graph continues it, as LangGraph resumes anything.
    again = chat_graph().compile(checkpointer=SavegameSaver(sqlite_url))
    out = again.invoke(None, done.config)
    assert out["approved"] is True
    assert [m.content for m in out["messages"]] == ["hi", "reply 1", "said yes"]
    assert statuses(sqlite_url, "t1") == {"completed"}


def test_two_interrupts_at_once_are_answered_one_by_one(sqlite_url: str) -> None:
    graph = two_asks_graph().compile(checkpointer=SavegameSaver(sqlite_url))
    graph.invoke({"log": []}, conf("p"))
    asked = {i.value: i.id for i in graph.get_state(conf("p")).interrupts}
    assert {p.interrupt_id for p in langgraph.waiting(store=sqlite_url)} == set(asked.values())
    with pytest.raises(ConfigurationError, match="waits on 2 interrupts"):
        langgraph.answer("p", "?", store=sqlite_url)

    langgraph.answer("p", "Y!", interrupt_id=asked["y?"], by="bob", store=sqlite_url)
    assert [p.interrupt_id for p in langgraph.waiting(store=sqlite_url)] == [asked["x?"]]
    assert statuses(sqlite_url, "p") == {"interrupted"}  # x still waits for a person
    out = graph.invoke(None, conf("p"))
    assert out["log"] == ["y Y!"] and [i.id for i in out["__interrupt__"]] == [asked["x?"]]

    langgraph.answer("p", "X!", store=sqlite_url)  # the only one left
    assert graph.invoke(None, conf("p"))["log"] == ["x X!", "y Y!"]
    assert statuses(sqlite_url, "p") == {"completed"}


def test_a_node_that_asks_again_gets_each_answer_in_order(sqlite_url: str) -> None:
    graph = asks_twice_graph().compile(checkpointer=SavegameSaver(sqlite_url))
    graph.invoke({"log": []}, conf("s"))
    langgraph.answer("s", "A", store=sqlite_url)
    out = graph.invoke(None, conf("s"))
    assert out["__interrupt__"][0].value == "second?"
    (second,) = langgraph.waiting(store=sqlite_url)
    assert second.payload == "second?"
    # Its resume write holds the first answer already: the second is appended to it.
    langgraph.answer("s", "B", interrupt_id=second.interrupt_id, store=sqlite_url)
    assert graph.invoke(None, conf("s"))["log"] == ["n A B"]


def test_a_subgraphs_interrupt_is_one_question_shown_on_the_thread(sqlite_url: str) -> None:
    graph = nested_graph().compile(checkpointer=SavegameSaver(sqlite_url))
    graph.invoke({"log": []}, conf("n"))
    runs = langgraph.shown_runs(thread_id="n", store=sqlite_url)
    assert {r.info.status for r in runs} == {RunStatus.INTERRUPTED}  # the root and the subgraph
    root = next(r for r in runs if r.head is not None and r.head.line.root)
    (waiting,) = langgraph.waiting(store=sqlite_url)
    assert (waiting.run_id, waiting.node, waiting.payload) == (
        root.info.run_id,
        "inner > i2",
        "inner?",
    )
    # Any of the thread's runs names it.
    sub = next(r for r in runs if r is not root)
    assert langgraph.waiting(sub.info.run_id, store=sqlite_url) == [waiting]
    langgraph.answer(sub.info.run_id, "sure", store=sqlite_url)
    assert statuses(sqlite_url, "n") == {"queued"}
    assert graph.invoke(None, conf("n"))["log"] == ["i1", "i2 sure", "after"]


def test_answering_twice_or_after_the_graph_went_on_is_refused(sqlite_url: str) -> None:
    graph = chat_graph().compile(checkpointer=SavegameSaver(sqlite_url))
    graph.invoke({"messages": [HumanMessage(content="hi")]}, conf("t1"))
    first = langgraph.answer("t1", "yes", by="alice", store=sqlite_url)
    for interrupt_id in (None, first.interrupt_id):
        with pytest.raises(RunStateError, match="answered already \\(by alice at"):
            langgraph.answer("t1", "no", interrupt_id=interrupt_id, by="bob", store=sqlite_url)
    graph.invoke(None, conf("t1"))
    with pytest.raises(NotFoundError, match=f"pending interrupt '{first.interrupt_id} in Lang"):
        langgraph.answer("t1", "no", interrupt_id=first.interrupt_id, store=sqlite_url)
    with pytest.raises(RunStateError, match="not waiting on an interrupt"):
        langgraph.answer("t1", "no", store=sqlite_url)
    with pytest.raises(NotFoundError, match="no LangGraph thread or run 'nope'"):
        langgraph.answer("nope", "no", store=sqlite_url)
    assert graph.get_state(conf("t1")).values["approved"] is True


@pytest.mark.parametrize("graph_of", [chat_graph, asks_twice_graph], ids=["first", "again"])
def test_of_two_people_answering_at_once_one_wins(sqlite_url: str, graph_of: Any) -> None:
    """Both read the interrupt as waiting; the second write finds the first's: refused.
    ``first``: the task's first answer (inserted); ``again``: one after an earlier answer
    (the task's resume write replaced only if unchanged)."""
    graph = graph_of().compile(checkpointer=SavegameSaver(sqlite_url))
    start = {"log": []} if graph_of is asks_twice_graph else {"messages": [HumanMessage("hi")]}
    graph.invoke(start, conf("t"))
    if graph_of is asks_twice_graph:
        langgraph.answer("t", "A", store=sqlite_url)
        graph.invoke(None, conf("t"))
    store = open_store(sqlite_url)
    waits = _answer.find_thread(store, "t", None)
    assert waits is not None
    seen = _answer.pick(waits, None)  # bob's view, read before alice answers
    langgraph.answer("t", "alice's", by="alice", store=sqlite_url)
    with pytest.raises(EffectSettledError, match="written by someone else first"):
        _answer._write(store, seen, "bob's", {"answers": seen.interrupt_id, "by": "bob"}, None)
    store.close()
    (asked,) = langgraph.thread_of("t", store=sqlite_url).asks  # type: ignore[union-attr]
    assert asked.answered is not None and asked.answered.by == "alice"


def test_an_answer_in_an_encrypted_store(sqlite_url: str) -> None:
    """The answer is sealed like every journal entry and the graph reads it back; a
    later answer replaces the sealed resume write under its own check."""
    storage = StorageConfig(keyring=Keyring({"k1": os.urandom(32)}, active="k1"))
    graph = asks_twice_graph().compile(checkpointer=SavegameSaver(sqlite_url, storage=storage))
    graph.invoke({"log": []}, conf("s"))
    langgraph.answer("s", "A", store=sqlite_url, storage=storage)
    graph.invoke(None, conf("s"))
    langgraph.answer("s", "B", store=sqlite_url, storage=storage)
    assert graph.invoke(None, conf("s"))["log"] == ["n A B"]
    assert savegame.client.verify(store=sqlite_url, storage=storage).ok


def test_a_status_filter_lists_savegame_and_langgraph_runs_in_one_order(sqlite_url: str) -> None:
    wf = Workflow("asks")

    @wf.step(entry=True)
    def ask(state: dict[str, Any], ctx: Any) -> Any:
        return {"answer": ctx.interrupt("ok?")}, END

    graph = chat_graph().compile(checkpointer=SavegameSaver(sqlite_url))
    made = []  # oldest first: savegame, LangGraph, savegame, LangGraph
    for i in range(2):
        made.append(savegame.run(wf, {}, store=sqlite_url).run_id)
        graph.invoke({"messages": [HumanMessage(content="hi")]}, conf(f"g{i}"))
        made.append(savegame.client.list_runs(thread_id=f"g{i}", store=sqlite_url)[0].run_id)
    graph.invoke({"messages": [HumanMessage(content="hi")]}, conf("g-done"))
    langgraph.answer("g-done", "yes", store=sqlite_url)
    graph.invoke(None, conf("g-done"))

    waiting = langgraph.shown_runs(status="interrupted", store=sqlite_url)
    assert [r.info.run_id for r in waiting] == made[::-1]
    assert {r.info.status for r in waiting} == {RunStatus.INTERRUPTED}
    # Pages follow each other by keyset, the two kinds still merged in order.
    page = langgraph.shown_runs(status="interrupted", limit=3, store=sqlite_url)
    rest = langgraph.shown_runs(status="interrupted", before=page[-1].info.run_id, store=sqlite_url)
    assert [r.info.run_id for r in page + rest] == made[::-1]
    completed = langgraph.shown_runs(status="completed", store=sqlite_url)
    assert [r.info.thread_id for r in completed] == ["g-done"]
    # The inbox agrees with the filter: both kinds, one entry per waiting run.
    assert {p.run_id for p in langgraph.waiting(store=sqlite_url)} == set(made)


def test_a_migrations_bookkeeping_runs_are_left_out_of_lists(tmp_path: Path) -> None:
    source = tmp_path / "langgraph.db"
    threads = sqlite_source(source)
    url = f"sqlite:///{tmp_path / 'target.db'}"
    langgraph.migrate(str(source), url)
    markers = [marker_id(t) for t in threads]
    listed = {r.info.run_id for r in langgraph.shown_runs(store=url)}
    assert listed and not listed & set(markers)
    assert {r.info.thread_id for r in langgraph.shown_runs(store=url)} == set(threads)
    for run_id in markers:  # still there by id, marked as bookkeeping
        info = savegame.client.get_run(run_id, store=url)
        assert info.metadata[BOOKKEEPING_KEY] == "langgraph-migration"
        assert langgraph.bookkeeping(info)
    # The threads left waiting on the subgraph's interrupt wait in the inbox, on their root run.
    waiting = langgraph.waiting(store=url)
    assert {p.node for p in waiting} == {"approve > ask"}
    roots = [savegame.client.get_run(p.run_id, store=url) for p in waiting]
    assert sorted(r.thread_id for r in roots) == ["forked", "waiting"]
    assert all(r.metadata["checkpoint_ns"] == "" for r in roots)


def test_a_reserved_write_replaced_in_an_encrypted_store_keeps_its_check(sqlite_url: str) -> None:
    """A task's second interrupt replaces its ``__interrupt__`` write (a reserved channel):
    with keys, the replaced entry must still pass its check (it failed before the fix)."""
    storage = StorageConfig(keyring=Keyring({"k1": os.urandom(32)}, active="k1"))
    graph = asks_twice_graph().compile(checkpointer=SavegameSaver(sqlite_url, storage=storage))
    graph.invoke({"log": []}, conf("s"))
    out = graph.invoke(Command(resume="A"), conf("s"))
    assert out["__interrupt__"][0].value == "second?"
    assert savegame.client.verify(store=sqlite_url, storage=storage).damaged == []
    assert graph.invoke(Command(resume="B"), conf("s"))["log"] == ["n A B"]


def test_a_thread_that_failed_or_stopped_before_a_node_is_failed_or_running(
    sqlite_url: str,
) -> None:
    def boom(state: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("the API said no")

    g = StateGraph(Log)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", boom)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", LG_END)
    saver = SavegameSaver(sqlite_url)
    with pytest.raises(RuntimeError):
        g.compile(checkpointer=saver).invoke({"log": []}, conf("failed"))
    # A static breakpoint: tasks left, nothing recorded about them.
    g.compile(checkpointer=saver, interrupt_before=["b"]).invoke({"log": []}, conf("paused"))
    assert statuses(sqlite_url, "failed") == {"failed"}
    assert statuses(sqlite_url, "paused") == {"running"}
    assert langgraph.waiting(store=sqlite_url) == []
    assert [r.info.thread_id for r in langgraph.shown_runs(status="failed", store=sqlite_url)] == [
        "failed"
    ]
