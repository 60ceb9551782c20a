"""@wf.step(retries=..., timeout=...): a failed execution is checkpointed with its error and
tried again; its completed calls replay from the journal (a write is never made twice);
after the last attempt the run is failed with the last error. Real SQLite file; the
outside world is a counter file; counts, never durations.

The kill -9 in the middle of a wait is in tests/crash/test_retry_crash.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from savegame import END, Backoff, RunStatus, StepContext, Workflow, run, tool
from savegame.client import get_run, history
from savegame.errors import ConfigurationError, NonDeterminismError, StepError, TimedOutError

TINY = Backoff(initial=0.001, maximum=0.001, jitter=0)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def ledger_workflow(ledger: Path, executions: Path, fail_times: int, retries: int) -> Workflow:
    @tool(effect="write", name="book_seat")  # not idempotent: a second call books twice
    def book_seat(seat: str) -> str:
        with ledger.open("a") as fh:
            fh.write(f"booked {seat}\n")
        return f"booking-{seat}"

    wf = Workflow("bookings")

    @wf.step(entry=True, retries=retries, backoff=TINY)
    def book(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        booking = ctx.call(book_seat, state["seat"])
        with executions.open("a") as fh:
            fh.write("ran\n")
        if len(lines(executions)) <= fail_times:
            raise ConnectionError(f"mailer down (execution {len(lines(executions))})")
        return {"booking": booking}, END

    return wf


def test_a_step_retry_does_not_repeat_a_completed_write(url: str, tmp_path: Path) -> None:
    ledger, executions = tmp_path / "ledger.txt", tmp_path / "executions.txt"
    wf = ledger_workflow(ledger, executions, fail_times=2, retries=2)
    result = run(wf, {"seat": "12A"}, run_id="r-book", store=url)
    assert result.status is RunStatus.COMPLETED
    assert result.state["booking"] == "booking-12A"
    assert len(lines(executions)) == 3  # the step's body ran three times
    assert lines(ledger) == ["booked 12A"]  # its write once: replayed from the journal
    retried = [h for h in history("r-book", store=url) if h.metadata.get("retrying")]
    assert sorted(h.metadata["attempt"] for h in retried) == [1, 2]
    assert all(h.status is RunStatus.RUNNING and h.next == "book" for h in retried)
    errors = sorted(h.metadata["error"] for h in retried)
    assert errors == [
        "ConnectionError: mailer down (execution 1)",
        "ConnectionError: mailer down (execution 2)",
    ]


def test_after_the_last_attempt_the_run_fails_with_the_last_error(url: str, tmp_path: Path) -> None:
    ledger, executions = tmp_path / "ledger.txt", tmp_path / "executions.txt"
    wf = ledger_workflow(ledger, executions, fail_times=10, retries=1)
    with pytest.raises(StepError, match=r"mailer down \(execution 2\)"):
        run(wf, {"seat": "3C"}, run_id="r-fail", store=url)
    assert len(lines(executions)) == 2 and lines(ledger) == ["booked 3C"]
    info = get_run("r-fail", store=url)
    assert info.status is RunStatus.FAILED
    assert "mailer down (execution 2)" in (info.error or "")
    (failed,) = [h for h in history("r-fail", store=url) if h.status is RunStatus.FAILED]
    assert (failed.metadata["attempt"], failed.metadata["of"]) == (2, 2)


def test_savegame_errors_are_not_retried(url: str) -> None:
    """Another execution gets the same answer (here: a call other than the journal's)."""
    executions: list[int] = []

    @tool(effect="write", name="note_a")
    def note_a() -> str:
        return "a"

    @tool(effect="write", name="note_b")
    def note_b() -> str:
        return "b"

    wf = Workflow("drifting")

    @wf.step(entry=True, retries=3, backoff=TINY)
    def drift(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        executions.append(1)
        ctx.call(note_a if len(executions) == 1 else note_b)
        raise ConnectionError("try again")

    with pytest.raises(NonDeterminismError):
        run(wf, store=url)
    assert len(executions) == 2


def test_a_step_that_runs_past_its_timeout_names_the_run_and_the_step(url: str) -> None:
    executions: list[int] = []
    wf = Workflow("slow-step")

    @wf.step(entry=True, timeout=0.05, retries=1, backoff=TINY)
    async def think(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        executions.append(1)
        await asyncio.sleep(30)
        return {}, END

    with pytest.raises(TimedOutError) as raised:
        run(wf, run_id="r-think", store=url)
    assert str(raised.value).startswith("run r-think: step 'think' timed out after 0.05s")
    assert raised.value.tool is None
    assert len(executions) == 2  # a timeout is retried like any transient error
    assert get_run("r-think", store=url).status is RunStatus.FAILED


def test_a_timeout_on_a_sync_step_is_refused_when_it_is_defined() -> None:
    wf = Workflow("sync-timeout")
    with pytest.raises(ConfigurationError, match="step 'plan': timeout= needs an async step"):

        @wf.step(entry=True, timeout=5)
        def plan(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
            return {}, END
