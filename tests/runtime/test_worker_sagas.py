"""A worker finishes the compensations a stopped process left half done (fleet/_sagas.py),
and leaves alone one that a live process is compensating."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from savegame import RunStatus, StepContext, Worker, Workflow, run, tool
from savegame.model import EffectKind, EffectStatus
from savegame.runtime import acquire_lease
from savegame.stores import SqliteStore

done: Counter[str] = Counter()
stop_in_release = {"on": False}


class ProcessStopped(BaseException):
    """Stands for the process dying inside the compensation: nothing below catches it."""


@tool(effect="write", idempotent=True, compensate="sagas_release", name="sagas_book")
def book(seat: str, *, request_id: str) -> str:
    done["book"] += 1
    return seat


@tool(effect="write", idempotent=True, name="sagas_release")
def release(seat: str, *, result: str, request_id: str) -> str:
    done[f"release:{request_id}"] += 1
    if stop_in_release["on"]:
        stop_in_release["on"] = False
        raise ProcessStopped
    return f"released {result}"


SAGA = Workflow("sagas", compensate_on_failure=True)


@SAGA.step(entry=True)
def reserve(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"seat": ctx.call(book, "12A")}, "charge"


@SAGA.step
def charge(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    raise RuntimeError("card declined")


@pytest.fixture
def store(tmp_path: Path) -> Any:
    done.clear()
    opened = SqliteStore(tmp_path / "runs.db")
    yield opened
    opened.close()


def half_compensated(store: SqliteStore) -> str:
    stop_in_release["on"] = True
    with pytest.raises(ProcessStopped):
        run(SAGA, {}, run_id="r", store=store)
    info = store.get_run("r")
    # The stopped process's own lease was given back on the way out, as a dead one's expires.
    assert info.status is RunStatus.COMPENSATING and info.lease is None
    return "r"


def test_a_worker_finishes_a_compensation_a_stopped_process_left(store: SqliteStore) -> None:
    run_id = half_compensated(store)
    stats = Worker(store, poll=0.01, lease_ttl=5).run(idle_exit=0.3)
    assert store.get_run(run_id).status is RunStatus.COMPENSATED
    assert stats.finished == {run_id: "compensated"}
    [undo] = store.list_effects(run_id, kinds=[EffectKind.COMPENSATION])
    assert undo.status is EffectStatus.DONE
    # In doubt after the stop, retried under the same request id: the provider sees it twice.
    assert done == {"book": 1, f"release:{undo.request_id}": 2}


def test_a_worker_leaves_a_compensation_a_live_process_holds(store: SqliteStore) -> None:
    run_id = half_compensated(store)
    lease = acquire_lease(store, run_id, ttl=30)  # `savegame compensate` running now
    stats = Worker(store, poll=0.01, lease_ttl=5, schedules=False).run(idle_exit=0.3)
    assert store.get_run(run_id).status is RunStatus.COMPENSATING
    assert stats.claimed == 0 and stats.finished == {}
    store.release_lease(run_id, lease.token)


def test_a_worker_of_other_workflows_leaves_it(store: SqliteStore) -> None:
    run_id = half_compensated(store)
    Worker(store, poll=0.01, workflows=["another"]).run(idle_exit=0.3)
    assert store.get_run(run_id).status is RunStatus.COMPENSATING


def test_a_worker_of_another_code_version_leaves_it(store: SqliteStore) -> None:
    run_id = half_compensated(store)
    Worker(store, poll=0.01, version="some-other-release").run(idle_exit=0.3)
    assert store.get_run(run_id).status is RunStatus.COMPENSATING
    Worker(store, poll=0.01, version=store.get_run(run_id).version).run(idle_exit=0.3)
    assert store.get_run(run_id).status is RunStatus.COMPENSATED
