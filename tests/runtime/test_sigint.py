"""Ctrl-C inside this process (runtime/_sigint.py): the handler a run holds SIGINT with, put
back after it, and real SIGINTs sent to this process from inside a step or while it waits.

Every run that expects a SIGINT is called through :func:`caught`: a KeyboardInterrupt that
reached pytest would end the whole session, not fail one test. The same behaviour in
processes of their own, the CLI's included and the signal sent to the process group as a
terminal does, is in test_sigint_process.py and tests/cli/test_ctrlc.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import pytest

import savegame
from savegame import END, Backoff, RunResult, RunStatus, StepContext, Workflow, resume, run, tool
from savegame.client import get_checkpoint, list_effects
from savegame.runtime import stopped_at
from savegame.runtime._sigint import CtrlC

T = TypeVar("T")


@pytest.fixture(autouse=True)
def _python_s_own_handler() -> Iterator[None]:
    """Python's default SIGINT handler during each test (a shell sets SIG_IGN for a job it
    starts in the background, and pytest may have been started as one), put back after."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


def caught(fn: Callable[[], T]) -> T | KeyboardInterrupt:
    try:
        return fn()
    except KeyboardInterrupt as exc:
        return exc


def ctrl_c() -> None:
    """A real SIGINT to this process; its handler runs in the main thread before this returns."""
    signal.raise_signal(signal.SIGINT)


def counting(log: list[str], *, interrupt_at: int | None = None) -> Workflow:
    """Four steps, each a write of its own; a Ctrl-C in the middle of call ``interrupt_at``."""

    @tool(effect="write", idempotent=True, name="work")
    def work(n: int, *, request_id: str) -> int:
        log.append(f"start {n}")
        if n == interrupt_at:
            ctrl_c()
        log.append(f"end {n}")
        return n * 10

    wf = Workflow("counting")

    @wf.step(entry=True)
    def tick(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        n = state.get("n", 0) + 1
        return {"n": n, "seen": [*state.get("seen", []), ctx.call(work, n)]}, (
            "tick" if n < 4 else END
        )

    return wf


def test_a_run_holds_sigint_while_it_executes_and_puts_python_s_handler_back() -> None:
    seen: list[Any] = []
    wf = Workflow("look")

    @wf.step(entry=True)
    def look(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        seen.append(signal.getsignal(signal.SIGINT))
        return {}, END

    run(wf, {}, store="memory://")
    assert seen[0] is not signal.default_int_handler and callable(seen[0])
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_program_s_own_handler_is_put_back_and_gets_the_ctrl_c_once_the_run_stopped(
    url: str,
) -> None:
    got: list[int] = []

    def mine(signum: int, frame: FrameType | None) -> None:
        got.append(signum)

    signal.signal(signal.SIGINT, mine)
    log: list[str] = []
    result = caught(lambda: run(counting(log, interrupt_at=2), {}, store=url))
    assert isinstance(result, RunResult), result
    assert (result.status, result.step) == (RunStatus.INTERRUPTED, 2)
    assert got == [signal.SIGINT]  # handed on late, once
    assert signal.getsignal(signal.SIGINT) is mine


def test_sigint_ignored_is_left_alone() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with CtrlC() as ctrl:
        assert ctrl.request is None
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_runs_inside_runs_share_the_hold_and_the_last_out_puts_the_handler_back() -> None:
    with CtrlC() as outer:
        held = signal.getsignal(signal.SIGINT)
        with CtrlC() as inner:
            assert inner.request is outer.request
        assert signal.getsignal(signal.SIGINT) is held
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_run_in_another_thread_leaves_sigint_to_the_main_thread() -> None:
    requests: list[Any] = []

    def elsewhere() -> None:
        with CtrlC() as ctrl:
            requests.append(ctrl.request)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert requests == [None]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_first_ctrl_c_lets_the_call_finish_and_stops_at_the_boundary(url: str) -> None:
    log: list[str] = []
    stopped = caught(lambda: run(counting(log, interrupt_at=2), {}, store=url))
    assert isinstance(stopped, KeyboardInterrupt) and type(stopped) is KeyboardInterrupt
    at = stopped_at(stopped)
    assert at is not None and (at.status, at.step) == (RunStatus.INTERRUPTED, 2)
    assert str(stopped) == (
        f"run {at.run_id} stopped at step 2: savegame resume {at.run_id} continues it"
    )
    assert log == ["start 1", "end 1", "start 2", "end 2"]  # no call after the Ctrl-C
    assert len(list_effects(at.run_id, store=url)) == 2
    head = get_checkpoint(at.run_id, store=url)
    assert (head.header.step, head.header.status, head.header.next) == (
        2,
        RunStatus.INTERRUPTED,
        "tick",
    )
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

    done = resume(at.run_id, store=url, workflow=counting(log))
    assert done.status is RunStatus.COMPLETED
    assert log[4:] == ["start 3", "end 3", "start 4", "end 4"]
    assert done.state == run(counting([]), {}, store="memory://").state


def test_a_ctrl_c_in_the_last_step_lets_the_run_end_and_returns_its_result(url: str) -> None:
    log: list[str] = []
    result = caught(lambda: run(counting(log, interrupt_at=4), {}, store=url))
    assert isinstance(result, RunResult), result
    assert (result.status, result.step) == (RunStatus.COMPLETED, 4)


def test_a_ctrl_c_under_asyncio_run_stops_the_run_and_leaves_asyncio_its_handler(
    url: str,
) -> None:
    log: list[str] = []
    wf = counting(log, interrupt_at=1)
    handlers: list[Any] = []

    async def main() -> RunResult:
        handlers.append(signal.getsignal(signal.SIGINT))  # asyncio.run's own
        try:
            return await savegame.arun(wf, {}, store=url)
        finally:
            handlers.append(signal.getsignal(signal.SIGINT))

    stopped = caught(lambda: asyncio.run(main()))
    at = stopped_at(stopped) if isinstance(stopped, KeyboardInterrupt) else None
    assert at is not None, stopped
    assert (at.status, at.step) == (RunStatus.INTERRUPTED, 1)
    assert log == ["start 1", "end 1"]
    assert handlers[0] is handlers[1] and handlers[0] is not signal.default_int_handler


def test_the_step_in_flight_stops_before_its_next_call_and_replays_the_first(url: str) -> None:
    calls: list[str] = []

    @tool(effect="write", idempotent=True, name="part")
    def part(n: int, *, request_id: str) -> int:
        calls.append(f"part {n}")
        if n == 3 and len(calls) == 3:
            ctrl_c()
        return n

    wf = Workflow("pairs")

    @wf.step(entry=True)
    def both(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        n = state.get("n", 0) + 1
        got = [ctx.call(part, 2 * n - 1), ctx.call(part, 2 * n)]
        return {"n": n, "got": [*state.get("got", []), *got]}, ("both" if n < 2 else END)

    stopped = caught(lambda: run(wf, {}, store=url))
    at = stopped_at(stopped) if isinstance(stopped, KeyboardInterrupt) else None
    assert at is not None, stopped
    # Step 2's first call finished; its second never started; the state is step 1's.
    assert calls == ["part 1", "part 2", "part 3"]
    assert (at.status, at.step, at.state["got"]) == (RunStatus.INTERRUPTED, 1, [1, 2])
    assert len(list_effects(at.run_id, store=url)) == 3
    done = resume(at.run_id, store=url, workflow=wf)
    assert calls[3:] == ["part 4"]  # part 3 came back from the journal
    assert (done.status, done.state["got"]) == (RunStatus.COMPLETED, [1, 2, 3, 4])


def test_a_ctrl_c_ends_the_wait_between_a_step_s_attempts(url: str) -> None:
    """The wait (600 s: past the test's timeout) ends at the Ctrl-C, the failed attempt
    already checkpointed; resume tries the step again."""
    attempts: list[int] = []
    wf = Workflow("flaky")

    @wf.step(entry=True, retries=2, backoff=Backoff(initial=600, maximum=600, jitter=0))
    def flaky(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        attempts.append(1)
        if len(attempts) == 1:
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
            raise ConnectionError("down")
        return {"ok": True}, END

    stopped = caught(lambda: run(wf, {}, store=url))
    at = stopped_at(stopped) if isinstance(stopped, KeyboardInterrupt) else None
    assert at is not None, stopped
    assert (at.status, at.step, len(attempts)) == (RunStatus.INTERRUPTED, 0, 1)
    assert resume(at.run_id, store=url, workflow=wf).state == {"ok": True}


def test_a_ctrl_c_ends_a_blocking_wait_and_the_run_stays_waiting(url: str) -> None:
    wf = Workflow("sleeper")

    @wf.step(entry=True)
    def nap(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        ctx.sleep(timedelta(hours=1))
        return {"woke": True}, END

    stopped = caught(lambda: run(wf, {}, store=url, wait=True))
    at = stopped_at(stopped) if isinstance(stopped, KeyboardInterrupt) else None
    assert at is not None, stopped
    assert at.status is RunStatus.WAITING
    assert savegame.client.get_run(at.run_id, store=url).lease is None
