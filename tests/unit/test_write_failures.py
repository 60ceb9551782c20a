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
    RunStatus,
    StepContext,
    Workflow,
    get_checkpoint,
    history,
    resume,
    run,
)
from savegame.stores import SqliteStore


class FailingStore(SqliteStore):
    """A real SQLite store whose checkpoint writes fail after ``allowed`` of them."""

    def __init__(self, path: Path, allowed: int) -> None:
        super().__init__(path)
        self.allowed = allowed

    def put_checkpoint(self, *args: Any, **kwargs: Any) -> None:
        if self.allowed <= 0:
            raise OSError(28, "No space left on device")
        self.allowed -= 1
        super().put_checkpoint(*args, **kwargs)


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
