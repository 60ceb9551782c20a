"""Invariant 8: one owner per run, fencing tokens, heartbeats, takeover of dead owners."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from savegame import END, StepContext, Store, Workflow, resume, run
from savegame.client import history
from savegame.errors import LeaseHeldError, LeaseLostError
from savegame.runtime._lease import holder_is_dead, owner_id


def two_steps(
    gate: threading.Event | None = None, entered: threading.Event | None = None
) -> Workflow:
    wf = Workflow("two")

    @wf.step(entry=True)
    def a(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        if entered is not None:
            entered.set()
        if gate is not None:
            gate.wait(10)
        return {"a": 1}, "b"

    @wf.step
    def b(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"b": 2}, END

    return wf


def failed_run(store: Store, run_id: str) -> None:
    """Leave a resumable run behind (a step that fails once)."""
    wf = Workflow("two")

    @wf.step(entry=True)
    def a(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        raise RuntimeError("first attempt fails")

    with pytest.raises(Exception, match="first attempt fails"):
        run(wf, run_id=run_id, store=store)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_owner_identity_and_liveness() -> None:
    me = owner_id()
    assert me.startswith(f"{socket.gethostname()}:{os.getpid()}:")
    assert not holder_is_dead(me)
    assert holder_is_dead(owner_id(dead_pid()))
    assert not holder_is_dead("some-other-host:1:1")  # cannot tell: trust the lease expiry
    # A live pid with another start time is a recycled pid, so the owner is dead.
    assert holder_is_dead(f"{socket.gethostname()}:{os.getpid()}:12345")


def test_live_owner_on_another_host_blocks_resume(store: Store) -> None:
    failed_run(store, "r1")
    store.acquire_lease("r1", "far-away:4242:7", ttl=30)
    with pytest.raises(
        LeaseHeldError, match=r"run r1 is held by PID 4242 on host far-away; its lease expires in"
    ):
        resume("r1", store=store, workflow=two_steps())


def test_live_owner_on_this_host_blocks_resume(store: Store) -> None:
    failed_run(store, "r1")
    store.acquire_lease("r1", owner_id(), ttl=30)  # this very process: alive
    with pytest.raises(LeaseHeldError):
        resume("r1", store=store, workflow=two_steps())


def test_dead_owner_on_this_host_is_taken_over_at_once(store: Store) -> None:
    failed_run(store, "r1")
    stale = store.acquire_lease("r1", owner_id(dead_pid()), ttl=300)
    started = time.monotonic()
    result = resume("r1", store=store, workflow=two_steps())
    assert time.monotonic() - started < 5  # did not wait for the 300 s lease
    assert result.state == {"a": 1, "b": 2}
    assert store.get_run("r1").lease is None
    with pytest.raises(LeaseLostError):
        store.renew_lease("r1", stale.token, 10)


def test_expired_lease_of_another_host_can_be_taken(store: Store) -> None:
    failed_run(store, "r1")
    store.acquire_lease("r1", "far-away:1:1", ttl=0.05)
    time.sleep(0.1)
    assert resume("r1", store=store, workflow=two_steps()).state == {"a": 1, "b": 2}


def test_heartbeat_keeps_the_lease_alive_through_a_long_step(store: Store) -> None:
    gate, entered = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def go() -> None:
        try:
            run(two_steps(gate, entered), run_id="r-hb", store=store, lease_ttl=0.3)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=go)
    worker.start()
    assert entered.wait(10)
    time.sleep(0.9)  # three lease lifetimes: only renewals keep it
    with pytest.raises(LeaseHeldError):
        store.acquire_lease("r-hb", "far-away:1:1", ttl=1)
    gate.set()
    worker.join(10)
    assert not errors


def test_stale_owner_cannot_write_after_a_takeover(store: Store) -> None:
    gate, entered = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def go() -> None:
        try:
            run(two_steps(gate, entered), run_id="r-fence", store=store, lease_ttl=30)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=go)
    worker.start()
    assert entered.wait(10)
    current = store.get_run("r-fence").lease
    assert current is not None
    # Another process proves the owner dead (here: simply claims so) and takes over.
    taken = store.acquire_lease("r-fence", "far-away:9:9", ttl=30, takeover_token=current.token)
    assert taken.token == current.token + 1
    gate.set()
    worker.join(10)
    assert len(errors) == 1 and isinstance(errors[0], LeaseLostError)
    # The stale owner's step-1 checkpoint was rejected: only the input checkpoint exists.
    assert [h.step for h in history("r-fence", store=store)] == [0]
    assert store.get_run("r-fence").lease == taken
