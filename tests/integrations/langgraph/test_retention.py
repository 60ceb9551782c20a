"""LangGraph's rules for ``savegame.client.prune``, from Python: without them LangGraph runs are
left alone (and said so); with them a thread is one unit and a waiting one is exempt."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import HumanMessage
from langgraph.types import Command

import savegame
from savegame.integrations.langgraph import retention
from savegame.langgraph import SavegameSaver
from tests.integrations.langgraph.graphs import nested_graph
from tests.integrations.langgraph.test_saver import chat_graph, conf


def graph(url: str) -> Any:
    return chat_graph().compile(checkpointer=SavegameSaver(url))


def test_without_rules_langgraph_runs_are_left_alone(sqlite_url: str) -> None:
    chat = graph(sqlite_url)
    chat.invoke({"messages": [HumanMessage(content="hi")]}, conf("t1"))
    chat.invoke(Command(resume="yes"), conf("t1"))
    policy = savegame.maintenance.RetentionPolicy(keep_last=1, finished_for=timedelta(0))
    plan = savegame.client.prune(policy, store=sqlite_url)
    assert (plan.runs, plan.checkpoints) == ([], [])
    assert len(plan.skipped) == 1 and "langgraph" in next(iter(plan.skipped.values()))
    assert len(list(chat.get_state_history(conf("t1")))) == 4


def test_with_rules_a_finished_thread_goes_and_a_waiting_one_stays(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every checkpoint a keyframe: with deltas, keep_last=1 keeps what the latest loads
    # from (all of these short threads), and nothing of the waiting thread would go.
    monkeypatch.setenv("SAVEGAME_KEYFRAME_EVERY", "1")
    chat = graph(sqlite_url)
    chat.invoke({"messages": [HumanMessage(content="hi")]}, conf("done"))
    chat.invoke(Command(resume="yes"), conf("done"))
    chat.invoke({"messages": [HumanMessage(content="hi")]}, conf("waiting"))
    policy = savegame.maintenance.RetentionPolicy(keep_last=1, finished_for=timedelta(0))
    rules = {"langgraph": retention()}
    plan = savegame.client.prune(policy, store=sqlite_url, rules=rules, dry_run=True)
    by_thread = {r.run_id: r.thread_id for r in savegame.client.list_runs(store=sqlite_url)}
    assert [by_thread[r] for r in plan.runs] == ["done"]
    assert [by_thread[r] for r in plan.exempt_runs] == ["waiting"]
    assert plan.checkpoints == [] and plan.skipped == {}

    # Waiting runs too, when asked: the thread's latest checkpoint stays, resumable.
    asked = savegame.maintenance.RetentionPolicy(keep_last=1, include_waiting=True)
    savegame.client.prune(asked, store=sqlite_url, rules=rules)
    fresh = graph(sqlite_url)
    assert len(list(fresh.get_state_history(conf("waiting")))) < 3
    out = fresh.invoke(Command(resume="fine"), conf("waiting"))
    assert [m.content for m in out["messages"]] == ["hi", "reply 1", "said fine"]


def test_a_thread_goes_whole_or_not_at_all(sqlite_url: str) -> None:
    """An older subgraph namespace of a thread used since is not deleted on its own age."""
    nested = nested_graph().compile(checkpointer=SavegameSaver(sqlite_url))
    nested.invoke({"log": []}, conf("t"))
    nested.invoke(Command(resume="a"), conf("t"))
    first = {r.run_id for r in savegame.client.list_runs(store=sqlite_url)}
    nested.invoke({"log": []}, conf("t"))  # a new subgraph namespace; the root line goes on
    nested.invoke(Command(resume="b"), conf("t"))
    runs = savegame.client.list_runs(store=sqlite_url)
    assert len(runs) == 3
    old_sub = next(r for r in runs if r.run_id in first and r.metadata["checkpoint_ns"])
    created = {
        r.run_id: [h.created_at for h in savegame.client.history(r.run_id, store=sqlite_url)]
        for r in runs
    }
    newest = max(t for times in created.values() for t in times)
    idle = newest - max(created[old_sub.run_id])
    assert idle > timedelta(0)
    # Past the old namespace's age, short of the thread's: nothing goes.
    policy = savegame.maintenance.RetentionPolicy(finished_for=idle / 2)
    rules = {"langgraph": retention()}
    kept = savegame.client.prune(policy, store=sqlite_url, rules=rules, dry_run=True, now=newest)
    assert kept.runs == []
    later = newest + idle
    gone = savegame.client.prune(policy, store=sqlite_url, rules=rules, dry_run=True, now=later)
    assert sorted(gone.runs) == sorted(r.run_id for r in runs)
