"""The sync API over the async loop: what a caller of ``run``/``resume`` sees of it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from savegame import END, Workflow, resume, run
from savegame.errors import StepError


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and everything Python prints with it (causes and contexts)."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _failing() -> Workflow:
    wf = Workflow("failing")

    @wf.step(entry=True)
    def boom(state: dict, ctx: object) -> tuple[dict, str]:
        raise ValueError("the API said no")

    return wf


def test_a_step_error_from_sync_run_carries_no_event_loop_noise(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    with pytest.raises(StepError) as info:
        run(_failing(), {}, run_id="b1", store=url)
    chain = _chain(info.value)
    # The step's own error is the cause; nothing about how the loop was started.
    assert [type(e) for e in chain] == [StepError, ValueError]
    assert not any("no running event loop" in str(e) for e in chain)

    with pytest.raises(StepError) as again:
        resume("b1", store=url, workflow=_failing())
    assert [type(e) for e in _chain(again.value)] == [StepError, ValueError]


def test_sync_run_inside_an_event_loop_still_works(tmp_path: Path) -> None:
    wf = Workflow("one")

    @wf.step(entry=True)
    def only(state: dict, ctx: object) -> tuple[dict, str]:
        return {"x": 1}, END

    async def caller() -> dict:
        return run(wf, {}, store=f"sqlite:///{tmp_path / 'c.db'}").state

    assert asyncio.run(caller()) == {"x": 1}
