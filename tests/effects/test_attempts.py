"""@tool(retries=..., backoff=..., timeout=...): attempts journaled with their errors, the
run failed with the last one, and the in-doubt rules kept: a raised write whose outcome
is unknown is never retried. On a real SQLite file; counts, never durations.

The kill -9 in the middle of a wait is in tests/crash/test_retry_crash.py.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from savegame import END, Backoff, RunStatus, StepContext, Workflow, run, tool
from savegame.client import get_run, list_effects
from savegame.errors import ConfigurationError, InDoubtEffectError, StepError, TimedOutError
from savegame.model import EffectKind, EffectStatus

TINY = Backoff(initial=0.001, maximum=0.001, jitter=0)
calls: Counter[str] = Counter()
seen_ids: list[str] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    calls.clear()
    seen_ids.clear()


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


class Declined(Exception):
    """The payment provider refused before charging: proof nothing happened."""


@tool(retries=3, backoff=TINY)
def flaky_lookup(order_id: str) -> dict[str, Any]:
    calls["lookup"] += 1
    if calls["lookup"] < 3:
        raise ConnectionError(f"lookup attempt {calls['lookup']} dropped")
    return {"id": order_id}


@tool(retries=2, backoff=TINY)
def always_down(order_id: str) -> None:
    calls["down"] += 1
    raise ConnectionError(f"down, attempt {calls['down']}")


@tool(retries=3, backoff=TINY, retry_on=ConnectionError)
def picky(order_id: str) -> None:
    calls["picky"] += 1
    raise ValueError("bad order id")


@tool(effect="write", idempotent=True, retries=2, backoff=TINY)
def charge_retried(amount: int, *, request_id: str) -> str:
    calls["charge"] += 1
    seen_ids.append(request_id)
    if calls["charge"] < 3:
        raise ConnectionError("gateway reset")
    return f"ch-{amount}"


@tool(effect="write", safe_errors=(Declined,), retries=3, backoff=TINY)
def pay_bank(amount: int) -> str:
    calls["pay"] += 1
    if calls["pay"] == 1:
        raise Declined("card declined before charging")
    raise TimeoutError("no answer from the bank")  # may have charged: in doubt


def one_call(name: str, fn: Any, *args: Any) -> Workflow:
    wf = Workflow(name)

    @wf.step(entry=True)
    def step(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"out": ctx.call(fn, *args)}, END

    return wf


def attempts_of(url: str, run_id: str) -> list[tuple[int, str | None]]:
    entries = [e for e in list_effects(run_id, store=url) if ":attempt:" in e.request_id]
    assert all(e.status is EffectStatus.FAILED for e in entries)
    return [(e.metadata["attempt"], e.error) for e in entries]


def test_each_failed_attempt_is_journaled_with_its_error(url: str) -> None:
    result = run(one_call("lookup", flaky_lookup, "A-1"), store=url)
    assert result.status is RunStatus.COMPLETED
    assert result.state["out"] == {"id": "A-1"}
    assert calls["lookup"] == 3
    assert attempts_of(url, result.run_id) == [
        (1, "ConnectionError: lookup attempt 1 dropped"),
        (2, "ConnectionError: lookup attempt 2 dropped"),
    ]
    done = [e for e in list_effects(result.run_id, store=url) if e.request_id.endswith(":1:0")]
    assert [(e.kind, e.status, e.result) for e in done] == [
        (EffectKind.READ, EffectStatus.DONE, {"id": "A-1"})
    ]


def test_the_run_fails_with_the_last_error_after_the_last_attempt(url: str) -> None:
    with pytest.raises(StepError, match="down, attempt 3") as raised:
        run(one_call("down", always_down, "A-1"), run_id="r-down", store=url)
    assert isinstance(raised.value.cause, ConnectionError)
    assert calls["down"] == 3  # retries=2: three attempts, no more
    info = get_run("r-down", store=url)
    assert info.status is RunStatus.FAILED
    assert "down, attempt 3" in (info.error or "")
    assert [n for n, _ in attempts_of(url, "r-down")] == [1, 2, 3]


def test_only_the_exceptions_in_retry_on_are_retried(url: str) -> None:
    with pytest.raises(StepError, match="bad order id"):
        run(one_call("picky", picky, "A-1"), store=url)
    assert calls["picky"] == 1


def test_an_idempotent_write_is_retried_with_the_same_request_id(url: str) -> None:
    result = run(one_call("charge", charge_retried, 30), store=url)
    assert result.state["out"] == "ch-30"
    assert calls["charge"] == 3
    assert len(set(seen_ids)) == 1  # the outside system deduplicates on it
    assert len(attempts_of(url, result.run_id)) == 2


def test_a_raised_write_whose_outcome_is_unknown_is_not_retried(url: str) -> None:
    """A safe error is retried; the timeout that follows may have charged: the run stops."""
    with pytest.raises(InDoubtEffectError, match="no answer from the bank"):
        run(one_call("pay", pay_bank, 30), run_id="r-pay", store=url)
    assert calls["pay"] == 2  # the Declined attempt, then one that may have happened
    assert get_run("r-pay", store=url).status is RunStatus.NEEDS_ATTENTION
    assert attempts_of(url, "r-pay") == [(1, "Declined: card declined before charging")]
    (write,) = [e for e in list_effects("r-pay", store=url) if e.request_id == "r-pay:1:0"]
    assert write.status is EffectStatus.PENDING
    assert write.error == "TimeoutError: no answer from the bank"


def test_retries_on_a_write_with_no_safe_way_to_retry_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="tool send_money: retries on a write"):

        @tool(effect="write", retries=3)
        def send_money(amount: int) -> None: ...


def test_a_timed_out_async_tool_names_the_tool_the_run_and_the_step(url: str) -> None:
    @tool(timeout=0.05)
    async def slow_search(query: str) -> str:
        await asyncio.sleep(30)
        return "never"

    wf = Workflow("slow-async")

    @wf.step(entry=True)
    async def search(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"hits": await ctx.acall(slow_search, "x")}, END

    with pytest.raises(TimedOutError) as raised:
        run(wf, run_id="r-slow", store=url)
    message = str(raised.value)
    assert "run r-slow" in message and "step 'search'" in message
    assert "tool slow_search timed out after 0.05s" in message
    assert raised.value.tool == "slow_search" and not raised.value.abandoned
    assert get_run("r-slow", store=url).status is RunStatus.FAILED


def test_a_timed_out_sync_write_is_left_running_and_in_doubt(url: str) -> None:
    """A thread cannot be stopped: the call may still land, so it is not retried and its
    reconcile is not asked (it could say "not done" just before the call lands)."""
    release = threading.Event()
    asked: list[str] = []

    def check(request_id: str) -> None:
        asked.append(request_id)

    @tool(effect="write", timeout=0.05, reconcile=check, retries=2, backoff=TINY)
    def transfer(amount: int) -> str:
        calls["transfer"] += 1
        release.wait(30)
        return "sent"

    wf = Workflow("slow-sync")

    @wf.step(entry=True)
    def send(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"out": ctx.call(transfer, 5)}, END

    try:
        with pytest.raises(InDoubtEffectError) as raised:
            run(wf, run_id="r-sync", store=url)
    finally:
        release.set()
    assert isinstance(raised.value.cause, TimedOutError)
    assert raised.value.cause.abandoned
    assert "step 'send': tool transfer timed out" in str(raised.value.cause)
    assert "left running" in str(raised.value.cause)
    assert calls["transfer"] == 1 and asked == []
    assert get_run("r-sync", store=url).status is RunStatus.NEEDS_ATTENTION


def test_a_timed_out_sync_read_is_retried(url: str) -> None:
    @tool(timeout=0.05, retries=1, backoff=TINY)
    def sometimes_hangs() -> str:
        calls["hang"] += 1
        if calls["hang"] == 1:
            time.sleep(0.5)  # left behind in its daemon thread
        return "answer"

    result = run(one_call("hangs", sometimes_hangs), store=url)
    assert result.state["out"] == "answer"
    ((number, error),) = attempts_of(url, result.run_id)
    assert number == 1 and error is not None and "timed out after 0.05s" in error
