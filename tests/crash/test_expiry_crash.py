"""An approval expiring while the worker that should apply it is SIGKILLed: rejected
once, by the expiry, and the compensation it triggers applied once (issue 33, point 4).

Real worker processes on a real SQLite file and a real PostgreSQL server; the seat's
booking and release land in an outside ledger (tests/crash/expiry_workload.py), counted
after every kill.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from savegame import RunStatus, submit
from savegame.model import EffectKind, EffectStatus
from savegame.stores import Store, open_store
from tests import services
from tests.crash import expiry_workload
from tests.crash.harness import _env

pytestmark = [pytest.mark.slow, pytest.mark.crash]

WORKLOAD = expiry_workload.__file__
ROOT = Path(__file__).resolve().parents[2]
DONE = {RunStatus.COMPENSATED, RunStatus.COMPENSATION_FAILED, RunStatus.COMPLETED}


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with services.BACKENDS[request.param](tmp_path) as store_url:
        yield store_url


def worker(url: str, world: Path, *, idle_exit: float, hook: str = "") -> subprocess.Popen[str]:
    env = {**_env(), "SAVEGAME_WORLD": str(world), "SAVEGAME_HOOK": hook}
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env['PYTHONPATH']}"
    return subprocess.Popen(
        [sys.executable, WORKLOAD, url, str(idle_exit)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)


def until_hook(proc: subprocess.Popen[str], name: str) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == f"HOOK {name}":
            return
    raise AssertionError(f"the worker ended before {name}: {proc.communicate()[1]}")


def until_status(store: Store, run_id: str, status: RunStatus) -> None:
    deadline = time.monotonic() + 30
    while store.get_run(run_id).status is not status:
        assert time.monotonic() < deadline, f"run {run_id} never became {status.value}"
        time.sleep(0.02)


def finish(url: str, world: Path) -> None:
    """A fresh worker, after the killed one's lease (1 s) and the deadline have passed."""
    proc = worker(url, world, idle_exit=4)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err


def in_world(world: Path) -> tuple[dict[str, int], dict[str, int]]:
    """(executions per tool, requests applied per tool) in the outside ledger."""
    conn = sqlite3.connect(world)
    try:
        executed = dict(conn.execute("SELECT tool, count(*) FROM executions GROUP BY tool"))
        applied = dict(conn.execute("SELECT tool, count(*) FROM applied GROUP BY tool"))
    finally:
        conn.close()
    return executed, applied


def assert_rejected_once_and_released_once(store: Store, run_id: str, world: Path) -> None:
    assert store.get_run(run_id).status is RunStatus.COMPENSATED
    [gate] = store.list_effects(run_id, kinds=[EffectKind.APPROVAL])
    assert gate.status is EffectStatus.REJECTED and gate.metadata["by"] == "expiry"
    [compensation] = store.list_effects(run_id, kinds=[EffectKind.COMPENSATION])
    assert compensation.status is EffectStatus.DONE
    executed, applied = in_world(world)
    assert applied == {"book": 1, "release": 1}, (executed, applied)
    assert "pay" not in executed


def start(url: str) -> tuple[Store, str]:
    store = open_store(url)
    run_id = submit(expiry_workload.wf, {"seat": "12A", "amount": 40}, store=store).run_id
    return store, run_id


def test_killed_while_the_run_waits_for_its_deadline(url: str, tmp_path: Path) -> None:
    world = tmp_path / "world.db"
    store, run_id = start(url)
    first = worker(url, world, idle_exit=30)
    until_status(store, run_id, RunStatus.WAITING)
    kill(first)
    finish(url, world)
    assert_rejected_once_and_released_once(store, run_id, world)


@pytest.mark.parametrize("hook", ["rejected", "release:after_call"])
def test_killed_after_the_expiry_applied(url: str, tmp_path: Path, hook: str) -> None:
    world = tmp_path / "world.db"
    store, run_id = start(url)
    first = worker(url, world, idle_exit=30, hook=hook)
    until_hook(first, hook)
    kill(first)
    finish(url, world)
    assert_rejected_once_and_released_once(store, run_id, world)
    executed, _ = in_world(world)
    # Killed right after the release ran: retried under the same request id, which the
    # provider applied once.
    assert executed["release"] == (2 if hook == "release:after_call" else 1)


def test_killed_at_random_moments(url: str, tmp_path: Path) -> None:
    rng = random.Random(33)
    kills = 0
    for trial in range(4):
        world = tmp_path / f"world-{trial}.db"
        store, run_id = start(url)
        while store.get_run(run_id).status not in DONE and kills < 40:
            proc = worker(url, world, idle_exit=4)
            # The deadline is 1 s after the gate is asked; the lease 1 s: kills land
            # while waiting, while applying the expiry and inside the compensation.
            time.sleep(rng.uniform(0.3, 2.5))
            if proc.poll() is None:
                kill(proc)
                kills += 1
            else:
                proc.communicate(timeout=30)
        if store.get_run(run_id).status not in DONE:
            finish(url, world)
        assert_rejected_once_and_released_once(store, run_id, world)
    assert kills >= 4
