"""Child runs: ``ctx.start_child`` / ``ctx.wait_children`` / ``ctx.run_child``, started once,
their ends journaled in the parent, a waiting parent holding no process."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from savegame import (
    END,
    RunStatus,
    StepContext,
    Store,
    Worker,
    Workflow,
    open_store,
    resume,
    run,
    submit,
)
from savegame.client import cancel, list_effects
from savegame.effects import ChildRun
from savegame.errors import ChildRunError, ConfigurationError, NonDeterminismError, RunStateError
from savegame.model import WOKEN, EffectKind

State = dict[str, Any]

RESEARCH = Workflow("research")


@RESEARCH.step(entry=True)
def research(state: State, ctx: StepContext) -> tuple[State, str]:
    if state.get("fail"):
        raise RuntimeError(f"no sources on {state['topic']}")
    return {"summary": f"notes on {state['topic']}"}, END


PLANNER = Workflow("planner")


@PLANNER.step(entry=True)
def plan(state: State, ctx: StepContext) -> tuple[State, str]:
    kids = [ctx.start_child(RESEARCH, {"topic": t, "fail": t == "fail"}) for t in state["topics"]]
    return {"kids": kids}, "gather"


@PLANNER.step()
def gather(state: State, ctx: StepContext) -> tuple[State, str]:
    try:
        results = ctx.wait_children(state["kids"])
    except ChildRunError as exc:
        return {"failed": [exc.child_run_id, exc.status, exc.error]}, END
    return {"summaries": [r["summary"] for r in results]}, END


ONE = Workflow("one-child")


@ONE.step(entry=True)
def one(state: State, ctx: StepContext) -> tuple[State, str]:
    child = ctx.start_child(RESEARCH, {"topic": state["topic"]}, run_id=state.get("child_id"))
    seen = ctx.interrupt({"started": child.run_id})  # the step runs again after this
    return {"child": child.run_id, "seen": seen, "got": ctx.wait_child(child)}, END


def _children(store: Store, parent: str) -> list[str]:
    return [
        e.metadata["child"] for e in list_effects(parent, store=store) if e.kind is EffectKind.CHILD
    ]


def test_a_parent_waits_for_its_children_holding_nothing_and_wakes_with_the_last(
    store: Store,
) -> None:
    result = run(PLANNER, {"topics": ["a", "b", "c"]}, store=store)
    assert result.status is RunStatus.WAITING
    kids = result.state["kids"]
    assert all(isinstance(k, ChildRun) for k in kids)  # a handle is pure data: kept in state
    assert [k.run_id for k in kids] == [f"{result.run_id}:1:{i}" for i in range(3)]
    assert _children(store, result.run_id) == [k.run_id for k in kids]
    for kid in kids:
        info = store.get_run(kid.run_id)
        assert (info.status, info.thread_id, info.workflow) == (
            RunStatus.QUEUED,
            kid.run_id,
            "research",
        )
        assert info.metadata["parent"]["run"] == result.run_id
    with pytest.raises(RunStateError, match="3 events"):
        resume(result.run_id, store=store)

    for kid in kids:
        assert store.get_run(result.run_id).wake_at is None  # not before the last one
        assert resume(kid.run_id, store=store).status is RunStatus.COMPLETED
    assert store.get_run(result.run_id).wake_at == WOKEN
    done = resume(result.run_id, store=store)
    assert done.status is RunStatus.COMPLETED
    assert done.state["summaries"] == ["notes on a", "notes on b", "notes on c"]


def test_a_parent_that_blocks_runs_its_children_here(store: Store) -> None:
    done = run(PLANNER, {"topics": ["x", "y"]}, store=store, wait=True)
    assert (done.status, done.state["summaries"]) == (
        RunStatus.COMPLETED,
        ["notes on x", "notes on y"],
    )
    assert len(store.list_runs()) == 3


PICKY = Workflow("picky")


@PICKY.step(entry=True)
def picky(state: State, ctx: StepContext) -> tuple[State, str]:
    awaited = ctx.start_child(RESEARCH, {"topic": "awaited"})
    ctx.start_child(RESEARCH, {"topic": "left alone"})  # started, never waited for
    return {"got": ctx.wait_child(awaited)}, END


# A hang here is the bug: a blocking resume of a parent that already waits once waited
# for a wake nobody would cause, its children queued with no one to run them.
@pytest.mark.timeout(60)
def test_a_parent_already_waiting_resumed_blocking_runs_its_children_here(store: Store) -> None:
    waiting = run(PLANNER, {"topics": ["a", "b"]}, store=store)
    assert waiting.status is RunStatus.WAITING
    done = resume(waiting.run_id, store=store, wait=True)
    assert (done.status, done.state["summaries"]) == (
        RunStatus.COMPLETED,
        ["notes on a", "notes on b"],
    )
    again = run(PLANNER, {"topics": ["c"]}, store=store)
    # run() of that run id, blocking, takes the same road.
    done = run(PLANNER, store=store, run_id=again.run_id, thread_id=again.run_id, wait=True)
    assert (done.status, done.state["summaries"]) == (RunStatus.COMPLETED, ["notes on c"])


@pytest.mark.timeout(60)
def test_a_blocking_resume_runs_only_the_children_the_parent_waits_for(store: Store) -> None:
    waiting = run(PICKY, {}, store=store)
    assert waiting.status is RunStatus.WAITING
    done = resume(waiting.run_id, store=store, wait=True)
    assert done.state["got"]["topic"] == "awaited"
    first, second = _children(store, waiting.run_id)
    assert store.get_run(first).status is RunStatus.COMPLETED
    assert store.get_run(second).status is RunStatus.QUEUED  # for a worker, not this caller


def test_a_failed_child_comes_back_as_its_error(store: Store) -> None:
    done = run(PLANNER, {"topics": ["ok", "fail"]}, store=store, wait=True)
    assert done.status is RunStatus.COMPLETED
    child, status, error = done.state["failed"]
    assert (child, status) == (f"{done.run_id}:1:1", "failed")
    assert "no sources on fail" in error
    assert store.get_run(child).status is RunStatus.FAILED


def test_a_child_is_started_once_however_often_its_step_runs(store: Store) -> None:
    paused = run(ONE, {"topic": "t"}, store=store)
    assert paused.status is RunStatus.INTERRUPTED
    waiting = resume(paused.run_id, store=store, value="go")  # the step runs again
    assert waiting.status is RunStatus.WAITING
    assert [r.workflow for r in store.list_runs()].count("research") == 1
    resume(f"{paused.run_id}:1:0", store=store)
    done = resume(paused.run_id, store=store)
    assert done.state["got"] == {"topic": "t", "summary": "notes on t"}


def test_a_child_id_given_by_the_step_is_kept_and_a_taken_one_refused(store: Store) -> None:
    done = run(ONE, {"topic": "t", "child_id": "my-child"}, store=store)
    assert store.get_run("my-child").metadata["parent"]["run"] == done.run_id
    other = run(RESEARCH, {"topic": "u"}, store=store, run_id="taken")
    assert other.status is RunStatus.COMPLETED
    with pytest.raises(ConfigurationError, match="not this step's child"):
        run(ONE, {"topic": "t", "child_id": "taken"}, store=store)


def test_another_child_at_the_same_position_is_refused(store: Store) -> None:
    paused = run(ONE, {"topic": "t"}, store=store)
    other = Workflow("one-child")

    @other.step(entry=True)
    def one(state: State, ctx: StepContext) -> tuple[State, str]:
        ctx.start_child(RESEARCH, {"topic": "another"})
        return {}, END

    with pytest.raises(NonDeterminismError):
        resume(paused.run_id, store=store, workflow=other, value="go")


STRANGER = Workflow("stranger")


@STRANGER.step(entry=True)
def stranger(state: State, ctx: StepContext) -> tuple[State, str]:
    return {"got": ctx.wait_child(state["other"])}, END


def test_waiting_for_a_run_that_is_no_child_is_refused(store: Store) -> None:
    with pytest.raises(ConfigurationError, match="not a child run it started"):
        run(STRANGER, {"other": "someone-else"}, store=store)


def test_a_child_workflow_must_be_importable(store: Store) -> None:
    local = Workflow("local")

    @local.step(entry=True)
    def step(state: State, ctx: StepContext) -> tuple[State, str]:
        return {}, END

    parent = Workflow("parent-of-local")

    @parent.step(entry=True)
    def start(state: State, ctx: StepContext) -> tuple[State, str]:
        return {"r": ctx.run_child(local)}, END

    with pytest.raises(ConfigurationError, match="no importable reference"):
        run(parent, {}, store=store)


def test_cancelling_a_parent_cancels_its_children(store: Store) -> None:
    result = run(PLANNER, {"topics": ["a", "b"]}, store=store)
    first, second = (k.run_id for k in result.state["kids"])
    assert resume(first, store=store).status is RunStatus.COMPLETED
    cancel(result.run_id, store=store)
    statuses = [store.get_run(r).status for r in (result.run_id, first, second)]
    assert statuses == [RunStatus.CANCELLED, RunStatus.COMPLETED, RunStatus.CANCELLED]


def test_workers_run_a_planner_and_its_children_each_once(sqlite_url: str) -> None:
    run_id = submit(PLANNER, {"topics": ["a", "b", "c"]}, store=sqlite_url).run_id
    worker = Worker(sqlite_url, concurrency=2, poll=0.02, lease_ttl=5)
    thread = threading.Thread(target=worker.run, kwargs={"idle_exit": 1.0})
    thread.start()
    thread.join()
    with open_store(sqlite_url) as store:
        info = store.get_run(run_id)
        assert info.status is RunStatus.COMPLETED, info
        final = store.latest_checkpoint(run_id)
        runs = store.list_runs()
    assert sorted(r.workflow for r in runs) == ["planner", "research", "research", "research"]
    assert final.header.step == 2
    assert set(worker.stats.finished) == {r.run_id for r in runs}


def test_the_tree_shows_a_parent_and_its_children(store: Store) -> None:
    from savegame.client import tree

    done = run(PLANNER, {"topics": ["a", "b"]}, store=store, wait=True)
    node = tree(done.run_id, store=store).node(done.run_id)
    assert node.spawned_by is None
    assert [c.run_id for c in node.spawned] == [f"{done.run_id}:1:0", f"{done.run_id}:1:1"]
    assert all(
        c.spawned_by == done.run_id and c.run.status is RunStatus.COMPLETED for c in node.spawned
    )
    child = tree(node.spawned[0].run_id, store=store).node(node.spawned[0].run_id)
    assert child.spawned_by == done.run_id
