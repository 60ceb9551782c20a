"""Durable sleep: ``ctx.sleep`` / ``ctx.sleep_until`` wake at a time recorded once, no process held."""

from __future__ import annotations

import re
import threading
from datetime import datetime, timedelta, timezone
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
from savegame.errors import ConfigurationError, RunStateError
from savegame.model import EffectKind, EffectStatus

State = dict[str, Any]

NAP = Workflow("nap")


@NAP.step(entry=True)
def nap(state: State, ctx: StepContext) -> tuple[State, str]:
    ctx.add_usage(tool_calls=1)
    ctx.sleep(state["for"])
    return {"woke": True}, "after"


@NAP.step()
def after(state: State, ctx: StepContext) -> tuple[State, str]:
    return {"after": True}, END


UNTIL = Workflow("until")


@UNTIL.step(entry=True)
def until(state: State, ctx: StepContext) -> tuple[State, str]:
    ctx.sleep_until(datetime.fromisoformat(state["at"]))
    return {"woke": True}, END


def _sleep_entry(run_id: str, store: Store) -> Any:
    (entry,) = [e for e in list_effects(run_id, store=store) if e.kind is EffectKind.SLEEP]
    return entry


def test_a_sleeping_run_holds_nothing_and_says_until_when(store: Store) -> None:
    result = run(NAP, {"for": timedelta(hours=1)}, store=store)
    assert result.status is RunStatus.WAITING and result.state == {"for": timedelta(hours=1)}
    entry = _sleep_entry(result.run_id, store)
    due = datetime.fromisoformat(entry.arguments["until"])
    info = store.get_run(result.run_id)
    assert (info.wake_at, info.lease, entry.status) == (due, None, EffectStatus.PENDING)
    assert due - info.created_at > timedelta(minutes=59)
    header = store.latest_checkpoint(result.run_id).header
    assert (header.next, header.metadata["waiting"]["until"]) == ("nap", due.isoformat())
    with pytest.raises(RunStateError, match=re.escape(f"its wake-up time {due.isoformat()}")):
        resume(result.run_id, store=store)
    # A resume does not sleep from a new start: the recorded due time stands.
    assert _sleep_entry(result.run_id, store).arguments["until"] == entry.arguments["until"]


def test_a_sleep_whose_time_has_passed_returns_at_once_and_is_recorded(store: Store) -> None:
    done = run(NAP, {"for": 0}, store=store)
    assert done.status is RunStatus.COMPLETED and done.usage.tool_calls == 1
    entry = _sleep_entry(done.run_id, store)
    assert entry.status is EffectStatus.DONE
    assert entry.result["woke"] >= entry.arguments["until"]
    past = (datetime.now(timezone.utc) - timedelta(days=1)).isoformat()
    assert run(UNTIL, {"at": past}, store=store).status is RunStatus.COMPLETED


def test_a_run_that_wants_to_block_sleeps_here_and_goes_on(store: Store) -> None:
    done = run(NAP, {"for": 0.2}, store=store, wait=True)
    assert (done.status, done.state["after"]) == (RunStatus.COMPLETED, True)
    entry = _sleep_entry(done.run_id, store)
    assert entry.result["woke"] >= entry.arguments["until"]  # not one moment before
    assert done.usage.tool_calls == 1


def test_resume_wait_sleeps_until_the_recorded_time(store: Store) -> None:
    result = run(NAP, {"for": 0.2}, store=store)
    assert result.status is RunStatus.WAITING
    done = resume(result.run_id, store=store, wait=True)
    assert done.status is RunStatus.COMPLETED
    entry = _sleep_entry(result.run_id, store)
    assert entry.result["woke"] >= entry.arguments["until"]


def test_sleep_until_needs_an_aware_datetime(store: Store) -> None:
    with pytest.raises(ConfigurationError, match="timezone-aware"):
        run(UNTIL, {"at": "2030-01-01T00:00:00"}, store=store)


def test_a_sleeping_run_can_be_cancelled(store: Store) -> None:
    result = run(NAP, {"for": timedelta(days=2)}, store=store)
    after = cancel(result.run_id, store=store)
    assert (after.status, after.wake_at) == (RunStatus.CANCELLED, None)
    assert store.claim_run("someone", 5) is None


def test_a_worker_wakes_a_sleeping_run_when_it_is_due(sqlite_url: str) -> None:
    run_id = submit(NAP, {"for": 0.3}, store=sqlite_url).run_id
    worker = Worker(sqlite_url, poll=0.02, lease_ttl=5)
    thread = threading.Thread(target=worker.run, kwargs={"idle_exit": 1.5})
    thread.start()
    thread.join()
    with open_store(sqlite_url) as store:
        assert store.get_run(run_id).status is RunStatus.COMPLETED
        entry = _sleep_entry(run_id, store)
    assert entry.result["woke"] >= entry.arguments["until"]
    assert worker.stats.claimed == 2  # submitted, then woken when due: never before
