"""Attacks on a worker's shared handle: its slots and ticker share one pooled store.

A pool smaller than the slots, a store unreachable at start, a stop while slots are
mid-run (the handle is closed at the end while they release their leases), and a
Store given by the caller, which the worker must leave open.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from savegame import END, RunStatus, StepContext, Worker, Workflow, submit
from savegame.stores import open_store
from tests import services

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # the test Redis has no AOF

STEPS = Workflow("attack-shared-steps")


@STEPS.step(entry=True)
def step(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    time.sleep(0.01)  # every slot holds a run at once, all wanting a connection
    n = state.get("n", 0) + 1
    return {"n": n}, ("step" if n < 6 else END)


@pytest.fixture(params=["postgres", "redis", "redis-max_connections"])
def pooled_url(request: pytest.FixtureRequest) -> Iterator[str]:
    # The pool smaller than the slots; on Redis redis-py's own max_connections too,
    # whose plain pool raised "Too many connections" once the slots shared one handle.
    if request.param == "postgres":
        with services.postgres_schema() as schema:
            yield services.with_query(services.postgres_url(schema), pool_max="1")
    else:
        option = "pool_max" if request.param == "redis" else "max_connections"
        with services.redis_prefix() as prefix:
            yield services.with_query(services.redis_url(prefix), **{option: "1"})


def _submit(url: str, n: int) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [submit(STEPS, {}, store=url).run_id for _ in range(n)]


def _statuses(url: str, ids: list[str]) -> set[RunStatus]:
    store = open_store(url)
    try:
        return {store.get_run(i).status for i in ids}
    finally:
        store.close()


def test_a_pool_smaller_than_the_slots_still_finishes_every_run(pooled_url: str) -> None:
    # The slots wait their turn for a connection: none fails a claim, none loses a
    # lease (a heartbeat waits like any call), every run completes.
    ids = _submit(pooled_url, 10)
    stats = Worker(pooled_url, concurrency=6, poll=0.05, lease_ttl=10.0).run(idle_exit=0.5)
    assert stats.errors == {}
    assert stats.slot_errors == 0
    assert sorted(stats.finished) == sorted(ids)
    assert set(stats.finished.values()) == {RunStatus.COMPLETED.value}
    assert _statuses(pooled_url, ids) == {RunStatus.COMPLETED}


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://postgres@127.0.0.1:1/test?connect_timeout=1&pool_timeout=1",
        "redis://127.0.0.1:1/0?socket_connect_timeout=1",
    ],
)
def test_a_store_unreachable_at_start_stops_the_worker_with_the_reason(url: str) -> None:
    worker = Worker(url, concurrency=4, poll=0.05)
    done: list[BaseException | None] = []

    def work() -> None:
        try:
            worker.run(idle_exit=0.2)
            done.append(None)
        except BaseException as exc:
            done.append(exc)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), "the worker hung on an unreachable store"
    assert done and done[0] is not None


def test_a_stop_mid_run_leaves_every_run_resumable(pooled_url: str) -> None:
    # stop() while slots are mid-run: each finishes its step, checkpoints, releases its
    # lease through the shared handle, which is closed only after the last slot ends.
    ids = _submit(pooled_url, 6)
    worker = Worker(pooled_url, concurrency=3, poll=0.05, lease_ttl=30.0)
    claimed = threading.Event()
    worker.on_result = lambda _result: claimed.set()
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(worker.run()), daemon=True)
    thread.start()
    claimed.wait(60)
    worker.stop()
    thread.join(60)
    assert not thread.is_alive()
    assert out and out[0].errors == {}
    # Another worker takes every unfinished run at once: its lease was released, not
    # left to expire (30 s), and it resumes from its last checkpoint.
    rest = Worker(pooled_url, concurrency=3, poll=0.05, lease_ttl=30.0).run(idle_exit=0.5)
    assert rest.errors == {}
    assert _statuses(pooled_url, ids) == {RunStatus.COMPLETED}


def test_a_worker_on_a_store_leaves_it_open(pooled_url: str) -> None:
    ids = _submit(pooled_url, 3)
    store = open_store(pooled_url)
    try:
        stats = Worker(store, concurrency=2, poll=0.05).run(idle_exit=0.3)
        assert sorted(stats.finished) == sorted(ids)
        # Still open: the caller's handle answers after the worker ended.
        assert {store.get_run(i).status for i in ids} == {RunStatus.COMPLETED}
        assert _submit(pooled_url, 1)
        assert store.list_runs() is not None
    finally:
        store.close()
