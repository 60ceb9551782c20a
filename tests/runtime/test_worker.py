"""The worker fleet in one process: claims, graceful stop, and runs it cannot start."""

from __future__ import annotations

import asyncio
import importlib
import logging
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from savegame import END, RunStatus, StepContext, Worker, Workflow, submit
from savegame.stores import SqliteStore
from tests import services

QUICK = Workflow("quick")


@QUICK.step(entry=True)
def once(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"done": True}, END


def test_a_run_the_worker_cannot_start_is_parked_and_the_queue_moves_on(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "q.db")
    try:
        # A workflow defined inside a function has no importable reference.
        local = Workflow("local")

        @local.step(entry=True)
        def step(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
            return {}, END

        stuck = submit(local, store=store).run_id
        good = submit(QUICK, store=store).run_id
        stats = Worker(store, poll=0.01, lease_ttl=5).run(idle_exit=0.3)
        assert store.get_run(good).status is RunStatus.COMPLETED
        parked = store.get_run(stuck)
        assert parked.status is RunStatus.FAILED and "workflow reference" in (parked.error or "")
        assert stats.claimed == 2  # not claimed again and again
    finally:
        store.close()


SLOW = Workflow("slow-steps")


@SLOW.step(entry=True)
def nap(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    time.sleep(0.02)  # long enough for every slot to hold a run at once
    n = state.get("n", 0) + 1
    return {"n": n}, ("nap" if n < 5 else END)


def test_a_worker_s_slots_share_one_postgresql_pool() -> None:
    # One pool per slot met max_connections with 4 workers of 16 slots; pooled stores
    # are opened once per worker, and its pool_max bounds the worker's connections.
    import psycopg

    name = f"sgworker{uuid.uuid4().hex[:12]}"
    with services.postgres_schema() as schema:
        url = services.with_query(
            services.postgres_url(schema), application_name=name, pool_max="2"
        )
        ids = [submit(SLOW, {}, store=url) for _ in range(8)]
        seen: list[int] = []
        stop = threading.Event()

        def count() -> None:
            with psycopg.connect(services.postgres_conninfo(), autocommit=True) as conn:
                while not stop.is_set():
                    row = conn.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                        (name,),
                    ).fetchone()
                    seen.append(row[0] if row else 0)
                    stop.wait(0.01)

        watcher = threading.Thread(target=count)
        watcher.start()
        try:
            stats = Worker(url, concurrency=8, poll=0.05).run(idle_exit=0.5)
        finally:
            stop.set()
            watcher.join()
        assert sorted(stats.finished) == sorted(info.run_id for info in ids)
        assert set(stats.finished.values()) == {RunStatus.COMPLETED.value}
        # The pool's two, and the one that opened the store (closed after its check).
        assert max(seen) <= 3, seen
        assert max(seen) >= 1


ELSEWHERE = """
from savegame import END, Workflow

wf = Workflow("elsewhere")


@wf.step(entry=True)
def once(state, ctx):
    return {"done": True}, END
"""


@contextmanager
def importable(folder: Path, name: str) -> Iterator[None]:
    """``folder`` on the import path for a while, and module ``name`` forgotten after."""
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop(name, None)


def test_a_run_whose_code_does_not_import_here_stays_queued_and_is_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    name = f"elsewhere_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(ELSEWHERE)
    store = SqliteStore(tmp_path / "q.db")
    try:
        with importable(tmp_path, name):
            run_id = submit(importlib.import_module(name).wf, store=store).run_id
        assert store.get_run(run_id).workflow_ref == f"{name}:wf"
        # This worker's process cannot import it: the run is held back and tried again
        # (its hold doubles from 10 ms), never failed for it.
        with caplog.at_level(logging.INFO, logger="savegame.worker"):
            stats = Worker(store, poll=0.01, backoff=0.01, lease_ttl=5).run(idle_exit=0.5)
        info = store.get_run(run_id)
        assert (info.status, info.error) == (RunStatus.QUEUED, None)
        assert stats.claimed >= 2 and not stats.finished
        told = [r.getMessage() for r in caplog.records if "cannot import" in r.getMessage()]
        assert len(told) == 1, told  # once, however many times it was tried
        assert f"No module named '{name}'" in told[0]
        assert "savegame worker --app-dir DIR" in told[0] and "stay queued" in told[0]
        # The worker released it as it stopped: the next one need not wait out the hold.
        assert info.lease is None
        with importable(tmp_path, name):
            again = Worker(store, poll=0.01).run(idle_exit=0.3)
        assert again.finished == {run_id: RunStatus.COMPLETED.value}
    finally:
        store.close()


def test_arun_works_beside_the_event_loop_and_stops_when_cancelled(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "q.db")
    try:
        first = submit(QUICK, store=store).run_id
        stats = asyncio.run(Worker(store, poll=0.01).arun(idle_exit=0.2))
        assert stats.finished == {first: RunStatus.COMPLETED.value}

        later = submit(QUICK, store=store).run_id
        worker = Worker(store, poll=0.01)

        async def app() -> int:
            task = asyncio.create_task(worker.arun())  # no idle_exit: until cancelled
            ticks = 0
            while later not in worker.stats.finished:
                await asyncio.sleep(0.01)  # the loop is free while the worker works
                ticks += 1
                assert ticks < 3000, "the worker did not run the run"
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return ticks

        asyncio.run(app())
        assert worker.stop_event.is_set()
        assert store.get_run(later).status is RunStatus.COMPLETED
    finally:
        store.close()
