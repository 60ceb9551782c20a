"""Schedules: occurrences planned by the missed policy, fired once, run by workers."""

from __future__ import annotations

import logging
import os
import sqlite3
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import savegame
from savegame import END, RunStatus, StepContext, StorageConfig, Worker, Workflow
from savegame.client import fire_schedules, schedule
from savegame.codec.crypto import Keyring
from savegame.errors import ConfigurationError, ConflictError, NotFoundError
from savegame.fleet._schedules import BATCH, next_after, occurrence_id, plan
from savegame.stores import Enqueue, MemoryStore, SqliteStore
from savegame.stores.schedules import Missed, ScheduleRecord, schedules_of
from tests.services import scratch_store

DAILY = Workflow("daily-report")


@DAILY.step(entry=True)
def report(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"reported": state.get("team", "?")}, END


T0 = datetime(2030, 1, 7, 9, 0, tzinfo=timezone.utc)  # a Monday


def record(cron: str = "*/5 * * * *", **kw: Any) -> ScheduleRecord:
    fields: dict[str, Any] = {
        "name": "s", "workflow": "w", "workflow_ref": "m:w", "cron": cron, "input": {},
        "missed": Missed.LATEST, "catchup_window": 60.0, "next_at": T0, "created_at": T0,
        "updated_at": T0,
    }  # fmt: skip
    fields.update(kw)
    return ScheduleRecord(**fields)


# -- the plan ------------------------------------------------------------------------------
def test_an_occurrence_on_time_starts_and_the_cursor_moves_to_the_next() -> None:
    starts, cursor = plan(record(), T0 + timedelta(seconds=10))
    assert (starts, cursor) == ([T0], T0 + timedelta(minutes=5))


@pytest.mark.parametrize(
    ("missed", "expected"),
    [
        # Workers down from 09:00 to 09:31; the window is 60 s: 09:30 is on time.
        (Missed.LATEST, [T0 + timedelta(minutes=25), T0 + timedelta(minutes=30)]),
        (Missed.SKIP, [T0 + timedelta(minutes=30)]),
        (Missed.ALL, [T0 + timedelta(minutes=5 * i) for i in range(7)]),
    ],
)
def test_missed_occurrences_follow_the_policy(missed: Missed, expected: list[datetime]) -> None:
    starts, cursor = plan(record(missed=missed), T0 + timedelta(minutes=31))
    assert starts == expected
    assert cursor == T0 + timedelta(minutes=35)


def test_a_long_outage_with_all_starts_a_batch_per_firing() -> None:
    now = T0 + timedelta(days=2)
    starts, cursor = plan(record(missed=Missed.ALL), now)
    assert len(starts) == BATCH and starts[0] == T0
    assert cursor == starts[-1] + timedelta(minutes=5)


def test_weekdays_only_skip_the_weekend() -> None:
    friday = datetime(2030, 1, 11, 9, 0, tzinfo=timezone.utc)
    sched = record("0 9 * * 1-5", next_at=friday)
    _, cursor = plan(sched, friday)
    assert cursor == datetime(2030, 1, 14, 9, 0, tzinfo=timezone.utc)  # Monday


# -- the API -------------------------------------------------------------------------------
@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'sched.db'}"


def test_schedule_stores_it_with_its_cursor_at_the_next_occurrence(db: str) -> None:
    got = schedule("reports", DAILY, cron="0 9 * * 1-5", input={"team": "ops"}, store=db)
    assert (got.workflow, got.cron, got.input, got.missed) == (
        "daily-report", "0 9 * * 1-5", {"team": "ops"}, Missed.LATEST,
    )  # fmt: skip
    assert got.workflow_ref.endswith("test_schedules:DAILY")
    assert got.next_at > datetime.now(timezone.utc) and got.next_at.hour == 9
    assert [s.name for s in savegame.client.list_schedules(store=db)] == ["reports"]
    with pytest.raises(ConflictError):
        schedule("reports", DAILY, cron="@daily", store=db)
    assert schedule("reports", DAILY, cron="@daily", replace=True, store=db).cron == "@daily"


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"cron": "0 0 9 * * 1-5"}, "has 6 fields"),
        ({"cron": "61 * * * *"}, "not a valid cron"),
        ({"cron": "*/5 * * * *", "missed": "twice"}, "missed must be one of"),
        ({"cron": "*/5 * * * *", "catchup_window": -1}, "catchup_window"),
        ({"cron": "*/5 * * * *", "name": "two words"}, "whitespace"),
        ({"cron": "*/5 * * * *", "name": "x" * 184}, "at most 183"),
    ],
)
def test_bad_schedules_are_refused_naming_what(db: str, kw: dict[str, Any], words: str) -> None:
    args: dict[str, Any] = {"name": "s", **kw}
    with pytest.raises(ConfigurationError, match=words):
        schedule(args.pop("name"), DAILY, store=db, **args)


def test_a_workflow_without_a_reference_is_refused(db: str) -> None:
    local = Workflow("local")

    @local.step(entry=True)
    def step(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {}, END

    with pytest.raises(ConfigurationError, match="no importable reference"):
        schedule("s", local, cron="@hourly", store=db)


def test_a_store_without_schedules_is_refused_by_name(tmp_path: Path) -> None:
    with (
        scratch_store("redis", tmp_path) as store,
        pytest.raises(ConfigurationError, match="does not keep schedules"),
    ):
        schedule("s", DAILY, cron="@hourly", store=store)


def _due(db: str, name: str, at: datetime) -> None:
    """Set the schedule's cursor (the check does not cover it), as if ``at`` were next."""
    with SqliteStore(db.removeprefix("sqlite:///")) as store:
        s = schedules_of(store)
        s.put_schedule(replace(s.get_schedule(name), next_at=at), replace=True)


def test_firing_starts_each_occurrence_once_with_a_derived_id(db: str) -> None:
    schedule("reports", DAILY, cron="*/5 * * * *", input={"team": "ops"}, store=db)
    _due(db, "reports", T0)
    first = fire_schedules(store=db, now=T0 + timedelta(seconds=5))
    assert first == [occurrence_id("reports", T0)] == ["reports:20300107T090000Z"]
    assert fire_schedules(store=db, now=T0 + timedelta(seconds=6)) == []
    run = savegame.client.get_run(first[0], store=db)
    assert run.status is RunStatus.QUEUED and run.thread_id == first[0]
    assert run.metadata["schedule"] == {"name": "reports", "at": T0.isoformat()}
    got = savegame.client.get_schedule("reports", store=db)
    assert (got.fired, got.last_run_id, got.next_at) == (1, first[0], T0 + timedelta(minutes=5))


def test_a_paused_schedule_fires_nothing_and_resumes_after_now(db: str) -> None:
    schedule("reports", DAILY, cron="*/5 * * * *", store=db)
    _due(db, "reports", T0)
    savegame.client.pause_schedule("reports", store=db)
    assert fire_schedules(store=db, now=T0 + timedelta(hours=1)) == []
    resumed = savegame.client.resume_schedule("reports", store=db)
    assert not resumed.paused and resumed.next_at > datetime.now(timezone.utc)
    savegame.client.remove_schedule("reports", store=db)
    with pytest.raises(NotFoundError):
        savegame.client.remove_schedule("reports", store=db)


def test_a_worker_fires_a_due_schedule_and_runs_the_occurrence(db: str) -> None:
    schedule("reports", DAILY, cron="* * * * *", input={"team": "ops"}, store=db)
    now = datetime.now(timezone.utc).replace(second=0, microsecond=0)
    _due(db, "reports", now)
    stats = Worker(db, poll=0.05, lease_ttl=5).run(idle_exit=1.0)
    run_id = occurrence_id("reports", now)
    assert stats.scheduled == 1 and stats.finished == {run_id: "completed"}
    state = savegame.client.get_checkpoint(
        savegame.client.get_run(run_id, store=db).head_checkpoint_id or "", store=db
    )
    assert state.state["reported"] == "ops"


def test_a_schedule_naming_a_queue_fires_its_runs_in_it(db: str) -> None:
    savegame.client.declare_queue("reports", concurrency=1, store=db)
    got = schedule("daily", DAILY, cron="* * * * *", store=db, queue="reports", priority=2)
    assert (got.queue, got.priority) == ("reports", 2)
    now = datetime.now(timezone.utc).replace(second=0, microsecond=0)
    _due(db, "daily", now)
    # A worker of that queue fires the schedule and runs the occurrence.
    stats = Worker(db, poll=0.05, lease_ttl=5, queues=["reports"]).run(idle_exit=1.0)
    run_id = occurrence_id("daily", now)
    assert stats.finished == {run_id: "completed"}
    with SqliteStore(db.removeprefix("sqlite:///")) as store:
        assert store.run_queue(run_id) == Enqueue("reports", 2)


def test_a_schedule_s_queue_is_declared_in_a_store_with_queues(db: str) -> None:
    with pytest.raises(NotFoundError, match="reports"):
        schedule("daily", DAILY, cron="@daily", store=db, queue="reports")
    with pytest.raises(ConfigurationError, match="priority needs a queue"):
        schedule("daily", DAILY, cron="@daily", store=db, priority=3)
    assert savegame.client.list_schedules(store=db) == []  # nothing stored
    memory = MemoryStore()
    with pytest.raises(ConfigurationError, match="MemoryStore store has no queues"):
        schedule("daily", DAILY, cron="@daily", store=memory, queue="reports")
    assert savegame.client.list_schedules(store=memory) == []


def test_an_edited_schedule_row_is_not_fired_under_a_keyring(
    db: str, caplog: pytest.LogCaptureFixture
) -> None:
    storage = StorageConfig(keyring=Keyring({"k": os.urandom(32)}, active="k"))
    schedule("reports", DAILY, cron="*/5 * * * *", store=db, storage=storage)
    _due(db, "reports", T0)
    with sqlite3.connect(db.removeprefix("sqlite:///")) as conn:
        conn.execute("UPDATE schedules SET workflow_ref = 'os:system'")
    with caplog.at_level(logging.WARNING, logger="savegame.worker.schedules"):
        assert fire_schedules(store=db, storage=storage, now=T0) == []
    assert "checksum mismatch" in caplog.text
    assert savegame.client.get_schedule("reports", store=db).next_at == T0  # left for a fix


# -- the plan, as a property: firings at any times ------------------------------------------
CRONS = ("*/5 * * * *", "0 9 * * 1-5", "17 */2 * * *", "0 0 1 * *")


@given(
    cron=st.sampled_from(CRONS),
    missed=st.sampled_from(list(Missed)),
    window=st.integers(min_value=0, max_value=7200),
    gaps=st.lists(st.integers(min_value=0, max_value=3 * 86400), min_size=1, max_size=12),
)
@settings(max_examples=60, deadline=None)
def test_successive_firings_start_each_occurrence_at_most_once_in_order(
    cron: str, missed: Missed, window: int, gaps: list[int]
) -> None:
    sched = record(cron, missed=missed, catchup_window=float(window))
    sched = replace(sched, next_at=next_after(cron, T0))
    now, started = T0, []
    for gap in gaps:
        now += timedelta(seconds=gap)
        if sched.next_at > now:
            continue  # not due: the store would not list it
        starts, cursor = plan(sched, now)
        assert cursor > sched.next_at  # the cursor only moves forward ...
        assert all(sched.next_at <= at <= now for at in starts)  # ... over what was due
        assert all(at < cursor for at in starts) and starts == sorted(starts)
        # Every occurrence at or after the catch-up cutoff starts (unless a batch is full).
        cutoff = now - timedelta(seconds=window)
        on_time = [at for at in _occurrences(cron, max(sched.next_at, cutoff), now)]
        if len(starts) < BATCH:
            assert set(on_time) <= set(starts)
        started += starts
        sched = replace(sched, next_at=cursor)
    assert len(started) == len(set(started))  # never twice
    if missed is Missed.ALL:  # nothing lost: every occurrence up to the last cursor started
        assert started == _occurrences(
            cron, next_after(cron, T0), sched.next_at - timedelta(microseconds=1)
        )


def _occurrences(cron: str, start: datetime, end: datetime) -> list[datetime]:
    found, at = [], next_after(cron, start - timedelta(microseconds=1))
    while at <= end:
        found.append(at)
        at = next_after(cron, at)
    return found
