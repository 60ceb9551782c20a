"""Children of a queued parent (issue 30, point 6): they go in their parent's queue at its
priority unless ``start_child(queue=..., priority=...)`` says otherwise, so a worker of
that queue runs them and the queue's limits hold for the whole tree.

Each step appends ``start``/``end`` markers to a file named in the state
(``child_queue_flows``); what ran at once is read from those markers, never from timing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from savegame import RunStatus, Worker, open_store, resume, submit
from savegame.client import declare_queue, list_effects
from savegame.errors import ConfigurationError
from savegame.model import EffectKind
from savegame.stores import Enqueue, QueueStore
from tests import services

from .child_queue_flows import PLANNER, check_tree_done, children_of, submit_tree


def where(url: str, run_ids: list[str]) -> list[Enqueue | None]:
    with open_store(url) as store:
        return [cast(QueueStore, store).run_queue(r) for r in run_ids]


@pytest.fixture(params=services.SQL_BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store with queues: SQLite and PostgreSQL."""
    with services.BACKENDS[request.param](tmp_path) as found:
        yield found


def test_a_worker_of_the_queue_runs_a_planner_and_its_children_one_at_a_time(
    url: str, tmp_path: Path
) -> None:
    parent = submit_tree(url, tmp_path / "marks.log")
    # Before the fix the children had no queue: this worker never claimed them, and the
    # planner waited for ever (the worker left idle).
    Worker(url, concurrency=3, poll=0.02, lease_ttl=5, queues=["llm"]).run(idle_exit=1.0)
    check_tree_done(url, parent, tmp_path / "marks.log")
    assert where(url, children_of(parent, 3)) == [Enqueue("llm")] * 3


def test_a_plain_worker_keeps_the_parent_s_queue_limit_for_its_children(
    sqlite_url: str, tmp_path: Path
) -> None:
    parent = submit_tree(sqlite_url, tmp_path / "marks.log")
    # Three slots and no queue named: before the fix the three children ran at once.
    Worker(sqlite_url, concurrency=3, poll=0.02, lease_ttl=5).run(idle_exit=1.0)
    check_tree_done(sqlite_url, parent, tmp_path / "marks.log")


def test_a_child_takes_its_parent_s_queue_and_priority_unless_told(
    url: str, tmp_path: Path
) -> None:
    declare_queue("llm", concurrency=1, store=url)
    declare_queue("other", store=url)
    options = [{}, {"queue": "other"}, {"queue": "other", "priority": 1}, {"priority": -2}]
    state = {"log": str(tmp_path / "marks.log"), "children": options}
    parent = submit(PLANNER, state, store=url, queue="llm", priority=7).run_id
    assert resume(parent, store=url).status is RunStatus.WAITING  # its first step, here
    assert where(url, children_of(parent, 4)) == [
        Enqueue("llm", 7), Enqueue("other", 7), Enqueue("other", 1), Enqueue("llm", -2),
    ]  # fmt: skip


def test_a_parent_of_no_queue_starts_children_of_none_unless_told(
    sqlite_url: str, tmp_path: Path
) -> None:
    declare_queue("other", store=sqlite_url)
    options = [{}, {"queue": "other"}]
    state = {"log": str(tmp_path / "marks.log"), "children": options}
    parent = submit(PLANNER, state, store=sqlite_url).run_id
    assert resume(parent, store=sqlite_url).status is RunStatus.WAITING
    assert where(sqlite_url, children_of(parent, 2)) == [None, Enqueue("other")]


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_a_store_without_queues_refuses_a_child_s_queue_creating_nothing(
    backend: str, tmp_path: Path
) -> None:
    state = {"log": str(tmp_path / "marks.log"), "children": [{"queue": "llm"}]}
    with services.scratch_store(backend, tmp_path) as store:
        parent = submit(PLANNER, state, store=store).run_id
        name = type(store).__name__
        with pytest.raises(ConfigurationError, match=f"{name} store has no queues") as info:
            resume(parent, store=store)
        assert f"run {parent} step 'plan'" in str(info.value)
        assert store.get_run(parent).status is RunStatus.FAILED
        assert [r.run_id for r in store.list_runs()] == [parent]
        assert [e for e in list_effects(parent, store=store) if e.kind is EffectKind.CHILD] == []
