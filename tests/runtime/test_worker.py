"""The worker fleet in one process: claims, graceful stop, and runs it cannot start."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

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
