"""A worker fleet never spins on a bad run: one whose step leaves an unsaveable state
ends failed, claimed once; one it cannot start or whose failure cannot be recorded is
held back with a growing delay, across slots and workers, instead of claimed at once."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from savegame import END, RunStatus, StepContext, Worker, Workflow, submit
from savegame.client import get_checkpoint
from savegame.stores import SqliteStore

CYCLIC = Workflow("adversarial-cyclic")


@CYCLIC.step(entry=True)
def loop_back(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    loop: dict[str, Any] = {"n": 1}
    loop["again"] = [loop]
    return {"loop": loop}, END


DEEP = Workflow("adversarial-deep")


@DEEP.step(entry=True)
def dig(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    hole: Any = []
    for _ in range(10_000):
        hole = [hole]
    return {"hole": hole}, END


QUICK = Workflow("adversarial-quick")


@QUICK.step(entry=True)
def once(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"done": True}, END


ODD_MESSAGE = Workflow("adversarial-odd-message")


@ODD_MESSAGE.step(entry=True)
def fail_oddly(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    # A lone surrogate in the error's message: no store takes it as it is, so the
    # failure checkpoint stores it escaped.
    raise ValueError("upstream said \ud800")


def work_for(seconds: float, *workers: Worker) -> None:
    threads = [threading.Thread(target=worker.run, daemon=True) for worker in workers]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    for worker in workers:
        worker.stop()
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()


def token(path: Path, run_id: str) -> int:
    with sqlite3.connect(path) as conn:
        (value,) = conn.execute(
            "SELECT lease_token FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
    return int(value)


def test_a_step_that_leaves_a_cycle_or_a_deep_state_fails_the_run_once(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    store = SqliteStore(path)
    try:
        cyclic = submit(CYCLIC, store=store).run_id
        deep = submit(DEEP, store=store).run_id
        worker = Worker(f"sqlite:///{path}", poll=0.01, lease_ttl=5)
        work_for(3, worker)
        for run_id, where, reason, step in [
            (cyclic, "state.loop", "contains itself", "loop_back"),
            (deep, "state.hole" + "[0]" * 199, "nests deeper than 200 levels", "dig"),
        ]:
            failed = store.get_run(run_id)
            assert failed.status is RunStatus.FAILED
            assert (failed.error or "").startswith(f"{where}: {reason}")
            head = get_checkpoint(run_id, store=store)
            assert head.metadata["error"].startswith(f"SerializationError: {where}: {reason}")
            assert head.next == step  # resumable there once the step is fixed
        assert worker.stats.claimed == 2  # each once: it failed, with its reason
        assert token(path, cyclic) <= 2 and token(path, deep) <= 2
    finally:
        store.close()


def test_a_run_whose_head_is_damaged_is_held_back_not_claimed_in_a_loop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "q.db"
    store = SqliteStore(path)
    try:
        broken = submit(QUICK, store=store)
        with sqlite3.connect(path) as conn:  # damage the head: the worker can neither
            conn.execute(  # load it nor write a failed marker on top of it
                "UPDATE checkpoints SET payload = zeroblob(length(payload)) WHERE checkpoint_id = ?",
                (broken.head_checkpoint_id,),
            )
        before = token(path, broken.run_id)
        worker = Worker(f"sqlite:///{path}", poll=0.01, lease_ttl=5, concurrency=2)
        with caplog.at_level(logging.WARNING, logger="savegame.worker"):
            work_for(3.5, worker)
        # Claimed at 0, 1 and 3 s (held back 1 s, then 2 s): not hundreds of times.
        assert 2 <= worker.stats.claimed <= 4
        # A hold renews the lease the claim took: no token of its own.
        assert token(path, broken.run_id) - before == worker.stats.claimed
        assert worker.stats.held[broken.run_id] >= 2.0  # it grows
        assert store.get_run(broken.run_id).status is RunStatus.QUEUED
        assert "could not mark run" in caplog.text
        assert f"run {broken.run_id} is still queued" in caplog.text
        assert "no worker claims it for 1.0 s" in caplog.text
    finally:
        store.close()


def test_a_run_that_cannot_start_is_held_back_across_workers(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    store = SqliteStore(path)
    try:
        stuck = submit(QUICK, store=store)
        with sqlite3.connect(path) as conn:  # neither loadable nor markable as failed
            conn.execute(
                "UPDATE checkpoints SET payload = zeroblob(length(payload)) WHERE checkpoint_id = ?",
                (stuck.head_checkpoint_id,),
            )
        good = submit(QUICK, store=store).run_id
        url = f"sqlite:///{path}"
        first = Worker(url, poll=0.01, lease_ttl=5, concurrency=2)
        second = Worker(url, poll=0.01, lease_ttl=5, concurrency=2)
        work_for(3.5, first, second)
        assert store.get_run(good).status is RunStatus.COMPLETED
        assert store.get_run(stuck.run_id).status is RunStatus.QUEUED
        attempts = first.stats.claimed + second.stats.claimed - 1  # less the good run
        # Each worker holds it back 1 s, then 2 s...: a few attempts, not a tight loop.
        assert 2 <= attempts <= 7, attempts
    finally:
        store.close()


def test_an_error_no_store_takes_as_it_is_fails_the_run_once(tmp_path: Path) -> None:
    """A lone surrogate in a step's error used to keep the failure from being recorded,
    so the run stayed runnable; it is stored escaped, and the run ends failed at once."""
    path = tmp_path / "q.db"
    store = SqliteStore(path)
    try:
        odd = submit(ODD_MESSAGE, store=store).run_id
        worker = Worker(f"sqlite:///{path}", poll=0.01, lease_ttl=5, concurrency=2)
        work_for(1.5, worker)
        info = store.get_run(odd)
        assert info.status is RunStatus.FAILED and "\\ud800" in (info.error or "")
        assert worker.stats.claimed == 1
    finally:
        store.close()


EXITS = Workflow("adversarial-exits")


@EXITS.step(entry=True)
def exit_now(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    raise SystemExit("a library called sys.exit")


CANCELS = Workflow("adversarial-cancels")


@CANCELS.step(entry=True)
async def cancel_itself(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    import asyncio

    raise asyncio.CancelledError("an inner timeout, not the caller")


def test_a_step_raising_systemexit_or_its_own_cancellation_fails_its_run_not_the_slot(
    tmp_path: Path,
) -> None:
    path = tmp_path / "q.db"
    store = SqliteStore(path)
    try:
        exiting = submit(EXITS, store=store).run_id
        cancelling = submit(CANCELS, store=store).run_id
        fine = [submit(QUICK, store=store).run_id for _ in range(3)]
        worker = Worker(f"sqlite:///{path}", poll=0.01, lease_ttl=5, concurrency=2)
        work_for(2.5, worker)
        assert store.get_run(exiting).status is RunStatus.FAILED
        assert store.get_run(cancelling).status is RunStatus.FAILED
        assert "sys.exit" in (get_checkpoint(exiting, store=store).metadata["error"] or "")
        assert {store.get_run(r).status for r in fine} == {RunStatus.COMPLETED}
        assert worker.stats.claimed == 5  # each once: the slots lived on
    finally:
        store.close()
