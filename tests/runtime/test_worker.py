"""The worker fleet in one process: claims, graceful stop, and runs it cannot start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from savegame import END, RunStatus, StepContext, Worker, Workflow, submit
from savegame.stores import SqliteStore

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
