"""Attacks on where a child run goes (issue 30, point 6): a queue that is not there, names
and priorities that make no sense, a parent's dedup key, a schedule's queue edited in the
database. Each is refused at the step (or the firing) that met it, nothing half-created.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, cast

import pytest

from savegame import RunStatus, open_store, resume, submit
from savegame.client import (
    declare_queue,
    fire_schedules,
    get_schedule,
    list_effects,
    list_runs,
    schedule,
)
from savegame.errors import ConfigurationError
from savegame.model import EffectKind
from savegame.stores import Enqueue, QueueStore
from tests.adversarial.conftest import Raw
from tests.runtime.child_queue_flows import PLANNER, children_of
from tests.runtime.test_schedules import DAILY, T0


def _planner(url: str, tmp_path: Path, children: list[dict[str, Any]], **submit_kw: Any) -> str:
    state = {"log": str(tmp_path / "marks.log"), "children": children}
    return submit(PLANNER, state, store=url, **submit_kw).run_id


def _nothing_started(url: str, parent: str) -> None:
    assert [r.run_id for r in list_runs(store=url)] == [parent]
    assert [e for e in list_effects(parent, store=url) if e.kind is EffectKind.CHILD] == []


def test_a_child_in_a_queue_not_declared_fails_the_parent_s_step_creating_nothing(
    raw: Raw, tmp_path: Path
) -> None:
    declare_queue("llm", concurrency=1, store=raw.url)
    parent = _planner(raw.url, tmp_path, [{}, {"queue": "nope"}], queue="llm")
    with pytest.raises(ConfigurationError) as info:
        resume(parent, store=raw.url)
    said = str(info.value)
    assert f"run {parent} step 'plan'" in said and "'nope'" in said and "declared" in said
    with open_store(raw.url) as store:
        assert store.get_run(parent).status is RunStatus.FAILED
    # The first child was started before the second was refused; the refused one was
    # never journaled nor created.
    kids = [
        e.metadata["child"]
        for e in list_effects(parent, store=raw.url)
        if e.kind is EffectKind.CHILD
    ]
    assert kids == children_of(parent, 1)
    assert sorted(r.run_id for r in list_runs(store=raw.url)) == sorted([parent, *kids])
    # Declared now: the step runs again, the first child is the same, the second is created.
    declare_queue("nope", store=raw.url)
    assert resume(parent, store=raw.url).status is RunStatus.WAITING
    with open_store(raw.url) as store:
        placed = [cast(QueueStore, store).run_queue(r) for r in children_of(parent, 2)]
    assert placed == [Enqueue("llm"), Enqueue("nope")]


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"queue": ""}, "queue name must be a non-empty string"),
        ({"queue": 5}, "queue name must be a non-empty string"),
        ({"queue": "q" * 201}, "at most 200"),
        ({"queue": "llm", "priority": True}, "priority must be a whole number"),
        ({"queue": "llm", "priority": "high"}, "priority must be a whole number"),
        ({"priority": 2**31}, "priority out of range"),
        ({"priority": 1.5}, "priority must be a whole number"),
    ],
)
def test_hostile_queue_names_and_priorities_are_refused_at_the_step(
    sqlite_url: str, tmp_path: Path, options: dict[str, Any], words: str
) -> None:
    declare_queue("llm", store=sqlite_url)
    parent = _planner(sqlite_url, tmp_path, [options], queue="llm")
    with pytest.raises(ConfigurationError, match=words) as info:
        resume(parent, store=sqlite_url)
    assert f"run {parent} step 'plan'" in str(info.value)
    _nothing_started(sqlite_url, parent)


def test_a_priority_for_a_child_of_no_queue_is_refused(sqlite_url: str, tmp_path: Path) -> None:
    parent = _planner(sqlite_url, tmp_path, [{"priority": 3}])
    with pytest.raises(ConfigurationError, match="a priority needs a queue"):
        resume(parent, store=sqlite_url)
    _nothing_started(sqlite_url, parent)


def test_a_child_never_takes_its_parent_s_dedup_key(raw: Raw, tmp_path: Path) -> None:
    # Taken, the key would name the parent: the first child a DuplicateRunError.
    declare_queue("llm", store=raw.url)
    parent = _planner(raw.url, tmp_path, [{}, {}, {}], queue="llm", dedup_key="order-7")
    assert resume(parent, store=raw.url).status is RunStatus.WAITING
    with open_store(raw.url) as store:
        queues = cast(QueueStore, store)
        assert queues.run_queue(parent) == Enqueue("llm", 0, "order-7")
        assert [queues.run_queue(r) for r in children_of(parent, 3)] == [Enqueue("llm")] * 3


@pytest.mark.parametrize("edit", ["queue = 'free'", "queue = NULL", "priority = 9"])
def test_a_schedule_s_queue_edited_in_the_database_is_not_fired(
    raw: Raw, edit: str, caplog: pytest.LogCaptureFixture
) -> None:
    # 'free' has no limit: an edit that moved the runs there would lift the queue's.
    declare_queue("reports", concurrency=1, store=raw.url)
    declare_queue("free", store=raw.url)
    schedule("daily", DAILY, cron="*/5 * * * *", store=raw.url, queue="reports")
    raw.execute(f"UPDATE schedules SET {edit}, next_at = ?", (int(T0.timestamp() * 1e6),))
    with caplog.at_level(logging.WARNING, logger="savegame.worker.schedules"):
        assert fire_schedules(store=raw.url, now=T0) == []
    assert "checksum mismatch" in caplog.text
    assert get_schedule("daily", store=raw.url).next_at == T0  # left for a fix
    assert list_runs(store=raw.url) == []
