"""Start or continue through the Python API (``run``/``submit`` with a run id that exists, a
busy thread), on a real SQLite file; the worker that continues a re-submitted run is real."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from savegame import END, RunStatus, StepContext, Worker, Workflow, run, submit, tool
from savegame.client import get_run, list_runs
from savegame.errors import (
    ConfigurationError,
    ConflictError,
    RunExistsError,
    StepError,
    ThreadBusyError,
)
from savegame.runtime import _setup, _start

executed: Counter[str] = Counter()
broken = {"on": False}

wf = Workflow("counting")


@wf.step(entry=True)
def tick(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    executed[ctx.run_id] += 1
    if broken["on"]:
        raise RuntimeError("the API is down")
    n = state.get("n", 0) + 1
    return {"n": n}, ("tick" if n < state["until"] else END)


@tool(effect="write", approval=True)
def send(to: str) -> str:
    executed["send"] += 1
    return f"sent to {to}"


gated = Workflow("gated")


@gated.step(entry=True)
def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"sent": ctx.call(send, to=state["to"])}, END


@pytest.fixture(autouse=True)
def _clean() -> None:
    executed.clear()
    broken["on"] = False


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'start.db'}"


def test_submit_queues_a_failed_run_again_and_a_worker_finishes_it(url: str) -> None:
    broken["on"] = True
    for run_id in ("again", "as-is"):
        with pytest.raises(StepError, match="the API is down"):
            run(wf, {"until": 2}, run_id=run_id, store=url)
    broken["on"] = False

    assert submit(wf, {"until": 2}, run_id="again", store=url).status is RunStatus.QUEUED
    kept = submit(wf, {"until": 2}, run_id="as-is", store=url, on_exists="return")
    assert kept.status is RunStatus.FAILED
    stats = Worker(url, poll=0.05).run(idle_exit=0.3)
    assert stats.finished == {"again": "completed"}
    assert get_run("again", store=url).status is RunStatus.COMPLETED
    assert get_run("as-is", store=url).status is RunStatus.FAILED


def test_run_executes_a_queued_run_here(url: str) -> None:
    assert submit(wf, {"until": 2}, run_id="q", store=url).status is RunStatus.QUEUED
    result = run(wf, {"until": 2}, run_id="q", store=url)
    assert (result.status, result.state["n"], executed["q"]) == (RunStatus.COMPLETED, 2, 2)


def test_a_run_waiting_for_a_person_is_returned_as_it_stands(url: str) -> None:
    paused = run(gated, {"to": "bob"}, run_id="p", store=url)
    assert paused.status is RunStatus.INTERRUPTED
    again = run(gated, {"to": "bob"}, run_id="p", store=url)
    assert (again.status, again.interrupt_id) == (RunStatus.INTERRUPTED, "p:1:0:approval")
    assert again.checkpoint_id == paused.checkpoint_id
    assert executed["send"] == 0


def test_the_input_is_compared_on_top_of_the_thread_state_it_started_from(url: str) -> None:
    run(wf, {"until": 2}, thread_id="T", store=url)
    second = run(wf, {"until": 1}, thread_id="T", run_id="second", store=url)
    assert second.state == {"n": 3, "until": 1}  # went on from the thread's n=2

    assert run(wf, {"until": 1}, thread_id="T", run_id="second", store=url) == second
    assert run(wf, run_id="second", store=url) == second  # no input given: nothing to compare
    assert executed["second"] == 1
    with pytest.raises(RunExistsError, match="another input: until: 2 given, 1 at its start"):
        run(wf, {"until": 2}, thread_id="T", run_id="second", store=url)
    with pytest.raises(RunExistsError, match="it runs on thread 'T', not 'U'"):
        run(wf, {"until": 1}, thread_id="U", run_id="second", store=url)
    with pytest.raises(RunExistsError, match="n: 0 given, 2 at its start"):
        run(wf, {"until": 1, "n": 0}, thread_id="T", run_id="second", store=url)


def test_a_busy_thread_is_a_conflict_naming_the_run(url: str) -> None:
    paused = run(gated, {"to": "bob"}, thread_id="chat", run_id="first", store=url)
    with pytest.raises(ThreadBusyError) as caught:
        run(gated, {"to": "eve"}, thread_id="chat", store=url)
    assert isinstance(caught.value, ConflictError)
    assert (caught.value.thread_id, caught.value.run_id, caught.value.status) == (
        "chat",
        "first",
        "interrupted",
    )
    assert "cancel first" in str(caught.value)
    beside = run(gated, {"to": "eve"}, thread_id="chat", store=url, on_thread_busy="allow")
    assert beside.status is RunStatus.INTERRUPTED
    assert beside.run_id != paused.run_id


def after(
    monkeypatch: pytest.MonkeyPatch, module: Any, name: str, meanwhile: Callable[[], Any]
) -> None:
    """Run ``meanwhile`` once, right after the next start's ``module.name`` returned: the
    moment a second process starting on the thread at once would act."""
    original = getattr(module, name)
    pending = [meanwhile]

    def then(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        while pending:
            pending.pop()()
        return out

    monkeypatch.setattr(module, name, then)


def after_the_look(monkeypatch: pytest.MonkeyPatch, meanwhile: Callable[[], Any]) -> None:
    """After the start looked at its thread and found it free."""
    after(monkeypatch, _start, "_check_thread", meanwhile)


def test_a_run_started_between_the_look_and_the_create_keeps_the_thread(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both starts found the thread free; the store decides in the insert: one run.
    other = partial(run, gated, {"to": "bob"}, thread_id="chat", run_id="other", store=url)
    after_the_look(monkeypatch, other)
    with pytest.raises(ThreadBusyError) as caught:
        run(gated, {"to": "eve"}, thread_id="chat", run_id="mine", store=url)
    assert (caught.value.run_id, caught.value.status) == ("other", "interrupted")
    assert [r.run_id for r in list_runs(thread_id="chat", store=url)] == ["other"]
    assert executed["send"] == 0


def test_a_waiting_start_waits_out_a_run_started_under_it(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run that got in first is short: a start that waits goes on after it, from
    # the state it left.
    first = partial(run, wf, {"until": 2}, thread_id="T", run_id="first", store=url)
    after_the_look(monkeypatch, first)
    second = run(wf, {"until": 3}, thread_id="T", run_id="second", store=url, on_thread_busy="wait")
    assert second.state == {"n": 3, "until": 3}
    assert (executed["first"], executed["second"]) == (2, 1)


def test_a_thread_that_moved_on_under_a_start_is_read_again(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A run started and ended after this start read the thread's state and before its
    # create: that state is stale; the start is set up again from the new head.
    run(wf, {"until": 1}, thread_id="T", store=url)
    quick = partial(run, wf, {"until": 2}, thread_id="T", run_id="quick", store=url)
    after(monkeypatch, _setup, "_thread_state", quick)
    late = run(wf, {"until": 3}, thread_id="T", run_id="late", store=url)
    assert late.state == {"n": 3, "until": 3}
    assert executed["late"] == 1  # n=1, quick's n=2, then late's one step (not two)
    assert [r.run_id for r in list_runs(thread_id="T", store=url)][:2] == ["late", "quick"]


def test_unknown_policies_are_refused_before_anything_is_written(url: str) -> None:
    with pytest.raises(ConfigurationError, match="on_exists must be one of continue, return"):
        run(wf, {"until": 1}, store=url, on_exists="replace")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="on_thread_busy must be one of reject, wait"):
        submit(wf, {"until": 1}, store=url, on_thread_busy="queue")  # type: ignore[arg-type]
    assert executed == Counter()
