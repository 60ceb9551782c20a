"""A run whose owner is gone looks dead (``owner_gone``), and a worker on the owner's host
frees it at once (``free_dead``), as ``savegame resume`` takes it over, instead of after
the lease. The holders are real processes, SIGKILLed; the leases are long (120 s), so a
run claimed at all was not waited for."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from savegame import END, RunStatus, StepContext, Store, Workflow, submit
from savegame.client import owner_gone
from savegame.runtime._lease import free_dead, owner_id

LONG = 120.0

QUICK = Workflow("quick-dead-owner")


@QUICK.step(entry=True)
def once(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"done": True}, END


@contextmanager
def holder() -> Iterator[subprocess.Popen[bytes]]:
    """A live process of this host, to hold a lease; SIGKILL it to make it a dead one."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield child
    finally:
        child.kill()
        child.wait()


def killed(child: subprocess.Popen[bytes]) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait()


def test_a_run_held_by_a_killed_process_is_shown_dead_and_freed_at_once(store: Store) -> None:
    run_id = submit(QUICK, store=store).run_id
    with holder() as child:
        owner = owner_id(child.pid)
        store.acquire_lease(run_id, owner, LONG)
        assert owner_gone(store.get_run(run_id)) is None  # alive: in hand
        assert free_dead(store, store.list_runs()) == []
        assert store.claim_run(owner_id(), LONG) is None
        killed(child)
        gone = owner_gone(store.get_run(run_id))
        assert gone is not None
        assert (gone.run_id, gone.owner) == (run_id, owner)
        assert gone.reason == f"PID {child.pid} on host {socket.gethostname()} is not running"
        assert free_dead(store, store.list_runs(status=RunStatus.QUEUED)) == [run_id]
    info = store.get_run(run_id)
    assert (info.status, info.lease) == (RunStatus.QUEUED, None)
    assert owner_gone(info) is None  # queued for a claim again, as when submitted
    claimed = store.claim_run(owner_id(), LONG)
    assert claimed is not None and claimed.run_id == run_id


def test_a_lease_of_another_host_is_gone_only_once_it_expired(store: Store) -> None:
    live, expired = (submit(QUICK, store=store).run_id for _ in range(2))
    store.acquire_lease(live, "far-away:4242:7", LONG)
    store.acquire_lease(expired, "far-away:4243:7", 0.05)
    time.sleep(0.1)
    assert owner_gone(store.get_run(live)) is None
    gone = owner_gone(store.get_run(expired))
    assert gone is not None and gone.owner == "far-away:4243:7"
    assert gone.reason.startswith("the lease of PID 4243 on host far-away expired ")
    # Not this host's to free: its process may well be running.
    assert free_dead(store, store.list_runs()) == []
    assert store.get_run(live).lease is not None


def test_runs_nobody_holds_or_that_ended_are_not_dead(store: Store) -> None:
    queued = submit(QUICK, store=store)
    assert queued.lease is None and owner_gone(queued) is None
    with holder() as child:
        store.acquire_lease(queued.run_id, owner_id(child.pid), LONG)
        killed(child)
        ended = store.get_run(queued.run_id).with_status(RunStatus.COMPLETED)
        assert ended.lease is not None and owner_gone(ended) is None
