"""Invariant 5: a checkpoint that cannot be written stops the run; the last good one stays the resume point.

The failure is injected by a store that delegates to a real SQLite store and
refuses ``put_checkpoint`` from a given call on (a full disk, a dropped
connection): the store is real, only its refusal is staged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from savegame import (
    END,
    CheckpointWriteError,
    Observer,
    RunStatus,
    StepContext,
    Workflow,
    get_checkpoint,
    history,
    resume,
    run,
)
from savegame.stores import SqliteStore, Written


class FailingStore(SqliteStore):
    """A real SQLite store whose checkpoint writes fail after ``allowed`` of them."""

    def __init__(self, path: Path, allowed: int) -> None:
        super().__init__(path)
        self.allowed = allowed

    def put_checkpoint(self, *args: Any, **kwargs: Any) -> Written:
        if self.allowed <= 0:
            raise OSError(28, "No space left on device")
        self.allowed -= 1
        return super().put_checkpoint(*args, **kwargs)


def counting(executed: list[int]) -> Workflow:
    wf = Workflow("counting")

    @wf.step(entry=True)
    def tick(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        n = state.get("n", 0) + 1
        executed.append(n)
        return {"n": n}, ("tick" if n < 6 else END)

    return wf


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_failed_write_stops_the_run_and_keeps_the_last_good_checkpoint(
    tmp_path: Path, durability: str
) -> None:
    executed: list[int] = []
    store = FailingStore(tmp_path / "f.db", allowed=3)  # steps 1..3 commit, step 4's write fails
    try:
        with pytest.raises(CheckpointWriteError, match="No space left on device") as info:
            run(counting(executed), run_id="r", store=store, durability=durability)  # type: ignore[arg-type]
        assert info.value.run_id == "r"
        # Sync: nothing ran past the failed write. Async: at most the queue's worth more.
        assert executed[:4] == [1, 2, 3, 4]
        if durability == "sync":
            assert executed == [1, 2, 3, 4]
        assert [h.step for h in history("r", store=store)] == [3, 2, 1, 0]
        assert get_checkpoint("r", store=store).state == {"n": 3}
        assert store.get_run("r").lease is None  # released: resumable at once
        store.allowed = 100
        executed.clear()
        result = resume("r", store=store, workflow=counting(executed))
        assert result.status is RunStatus.COMPLETED and result.state == {"n": 6}
        assert executed == [4, 5, 6]  # continued from the last good checkpoint
    finally:
        store.close()


@pytest.mark.parametrize("durability", ["sync", "async"])
@pytest.mark.timeout(30)  # the failure this guards against was a hang
def test_an_observer_that_raises_after_a_commit_stops_the_run(
    tmp_path: Path, durability: str
) -> None:
    """With durability="async" the commit callback runs on the writer's thread: an error
    there used to kill that thread, and the run then waited on it forever."""
    store = SqliteStore(tmp_path / "o.db")
    seen: list[int] = []

    def on_checkpoint(header: Any, seconds: float) -> None:
        seen.append(header.step)
        if header.step == 2:
            raise RuntimeError("dashboard is down")

    try:
        with pytest.raises(CheckpointWriteError, match="dashboard is down") as info:
            run(
                counting([]), run_id="r", store=store, durability=durability,  # type: ignore[arg-type]
                observer=Observer(on_checkpoint=on_checkpoint),
            )  # fmt: skip
        # The step whose checkpoint it was, wrapped once (not again by a later write).
        assert info.value.step == 2 and isinstance(info.value.cause, RuntimeError)
        assert 2 in seen
        assert get_checkpoint("r", store=store).state["n"] >= 2  # what committed stays
    finally:
        store.close()
