"""Queues from the caller's side: ``declare_queue``, ``submit(queue=...)`` with priority and
a dedup key, ``Worker(queues=...)``, ``list_queues``; refused where a store has none."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from savegame import RunStatus, Worker, open_store, submit
from savegame.client import declare_queue, list_queues
from savegame.errors import ConfigurationError, NotFoundError
from savegame.stores import MemoryStore, Queue
from tests.docs.pages import doc_example, run_example

from .test_children import RESEARCH


def test_a_store_without_queues_refuses_them_naming_itself() -> None:
    store = MemoryStore()
    with pytest.raises(ConfigurationError, match="MemoryStore store has no queues"):
        submit(RESEARCH, {"topic": "a"}, store=store, queue="emails")
    with pytest.raises(ConfigurationError, match="MemoryStore"):
        declare_queue("emails", concurrency=2, store=store)
    assert store.list_runs() == []  # nothing created


def test_a_worker_with_queues_on_a_store_without_them_stops_at_once() -> None:
    with pytest.raises(ConfigurationError, match=r"Worker\(queues=\.\.\.\)"):
        Worker(MemoryStore(), queues=["emails"]).run(idle_exit=5)


def test_priority_and_dedup_key_need_a_queue(sqlite_url: str) -> None:
    with pytest.raises(ConfigurationError, match="need a queue"):
        submit(RESEARCH, {"topic": "a"}, store=sqlite_url, dedup_key="k")
    with pytest.raises(ConfigurationError, match="need a queue"):
        submit(RESEARCH, {"topic": "a"}, store=sqlite_url, priority=3)


def test_a_queue_must_be_declared_and_its_limits_make_sense(sqlite_url: str) -> None:
    with pytest.raises(NotFoundError, match="emails"):
        submit(RESEARCH, {"topic": "a"}, store=sqlite_url, queue="emails")
    with pytest.raises(ConfigurationError, match="worker_concurrency"):
        declare_queue("emails", worker_concurrency=-1, store=sqlite_url)
    with pytest.raises(ConfigurationError, match="period"):
        declare_queue("emails", limit=5, period=0, store=sqlite_url)
    assert declare_queue("emails", limit=5, period=60, store=sqlite_url) == Queue(
        "emails", limit=5, period=60
    )


def test_a_second_submit_with_a_dedup_key_gets_the_first_run_until_it_ends(
    sqlite_url: str,
) -> None:
    declare_queue("emails", store=sqlite_url)
    first = submit(RESEARCH, {"topic": "a"}, store=sqlite_url, queue="emails", dedup_key="o-1")
    again = submit(RESEARCH, {"topic": "b"}, store=sqlite_url, queue="emails", dedup_key="o-1")
    assert again.run_id == first.run_id and again.status is RunStatus.QUEUED
    Worker(sqlite_url, poll=0.02, queues=["emails"]).run(idle_exit=0.3)
    # It completed: the key starts a new run.
    later = submit(RESEARCH, {"topic": "c"}, store=sqlite_url, queue="emails", dedup_key="o-1")
    assert later.run_id != first.run_id
    with open_store(sqlite_url) as store:
        assert store.get_run(first.run_id).status is RunStatus.COMPLETED
        assert len(store.list_runs()) == 2


def test_a_worker_takes_only_its_queues_highest_priority_first(sqlite_url: str) -> None:
    declare_queue("emails", store=sqlite_url)
    declare_queue("reports", store=sqlite_url)
    low = submit(RESEARCH, {"topic": "low"}, store=sqlite_url, queue="emails")
    high = submit(RESEARCH, {"topic": "high"}, store=sqlite_url, queue="emails", priority=9)
    report = submit(RESEARCH, {"topic": "r"}, store=sqlite_url, queue="reports")
    plain = submit(RESEARCH, {"topic": "p"}, store=sqlite_url)
    order: list[str] = []
    worker = Worker(
        sqlite_url, poll=0.02, queues=["emails"], on_result=lambda r: order.append(r.run_id)
    )
    worker.run(idle_exit=0.3)
    assert order == [high.run_id, low.run_id]
    depth = {q.queue.name: (q.queued, q.running, q.unfinished) for q in list_queues(sqlite_url)}
    assert depth == {"emails": (0, 0, 0), "reports": (1, 0, 1)}
    with open_store(sqlite_url) as store:
        assert store.get_run(report.run_id).status is RunStatus.QUEUED
        assert store.get_run(plain.run_id).status is RunStatus.QUEUED
    # A worker of every queue takes the rest.
    everyone = threading.Thread(target=Worker(sqlite_url, poll=0.02).run, kwargs={"idle_exit": 0.3})
    everyone.start()
    everyone.join()
    with open_store(sqlite_url) as store:
        assert {r.status for r in store.list_runs()} == {RunStatus.COMPLETED}


def test_the_guide_queue_example_runs_as_written(tmp_path: Path) -> None:
    example = doc_example("docs/guides/schedules-and-queues.md", "queues.declare")
    out = run_example(tmp_path, example)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "emails 0 0"
