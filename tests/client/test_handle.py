"""``savegame.connect()``: one handle, one store opened once, every operation a method.

Each group of operations goes through the handle on every backend that keeps what the
group needs (SQLite, PostgreSQL, Redis: tests/services.py), and every store savegame
opens from a URL meanwhile is counted (the ``opened`` fixture, tests/conftest.py): a
handle opens one, whatever its calls do.
"""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import savegame
import savegame.client
import savegame.inspect
import savegame.maintenance
import savegame.runtime
from savegame import (
    END,
    MemoryStore,
    RunStatus,
    Savegame,
    StepContext,
    StorageConfig,
    Store,
    Workflow,
    tool,
)
from savegame.codec.crypto import Keyring
from savegame.errors import ConfigurationError, NotFoundError
from savegame.inspect import ChangeKind
from savegame.maintenance import RetentionPolicy
from savegame.model import utcnow
from tests.services import BACKENDS

State = dict[str, Any]

COUNTER = Workflow("handle-counter")


@COUNTER.step(entry=True)
def tick(state: State, ctx: StepContext) -> tuple[State, str]:
    n = state.get("n", 0) + 1
    return {"n": n}, ("tick" if n < 3 else END)


paid: list[int] = []


@tool(effect="write", approval=True, compensate="handle_refund")
def handle_pay(amount: int) -> str:
    paid.append(amount)
    return f"paid {amount}"


@tool(effect="write", idempotent=True)
def handle_refund(amount: int, *, request_id: str) -> str:
    paid.remove(amount)
    return "refunded"


GATED = Workflow("handle-gated")


@GATED.step(entry=True)
def pay(state: State, ctx: StepContext) -> tuple[State, str]:
    try:
        return {"paid": ctx.call(handle_pay, amount=state["amount"])}, END
    except savegame.errors.ApprovalRejected as no:
        return {"paid": None, "why": no.reason}, END


ASKING = Workflow("handle-asking")


@ASKING.step(entry=True)
def ask(state: State, ctx: StepContext) -> tuple[State, str]:
    return {"answer": ctx.interrupt("which?")}, END


WAITING = Workflow("handle-waiting")


@WAITING.step(entry=True)
def wait(state: State, ctx: StepContext) -> tuple[State, str]:
    return {"got": ctx.wait_for("go")}, END


@pytest.fixture(autouse=True)
def _nothing_paid() -> None:
    paid.clear()


def _url(backend: str, tmp_path: Path) -> Iterator[str]:
    with BACKENDS[backend](tmp_path) as url:
        yield url


def _connect(url: str, storage: StorageConfig | None = None) -> Savegame:
    # The test Redis runs without AOF; the durability warning has a test of its own.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return savegame.connect(url, storage=storage)


def backends(*names: str) -> Callable[[Any], Any]:
    return pytest.mark.parametrize("backend", names)


EVERY = ("sqlite", "postgres", "redis")
SCHEDULED = ("sqlite", "postgres")  # Redis keeps no schedules, no queues


@backends(*EVERY)
def test_a_run_and_what_it_left_through_one_handle(
    backend: str, tmp_path: Path, opened: list[Store]
) -> None:
    for url in _url(backend, tmp_path):
        with _connect(url) as sg:
            done = sg.run(COUNTER, thread_id="t1", metadata={"who": "me"})
            assert (done.status, done.state) == (RunStatus.COMPLETED, {"n": 3})
            assert [r.run_id for r in sg.runs(thread_id="t1")] == [done.run_id]
            assert sg.get_run(done.run_id).metadata["who"] == "me"
            headers = sg.history(done.run_id)
            assert [h.step for h in headers] == [3, 2, 1, 0]
            assert sg.checkpoint(done.run_id).state == {"n": 3}
            change = sg.diff(headers[-1].checkpoint_id, done.run_id).changes
            assert [(c.path, c.kind, c.new) for c in change] == [(("n",), ChangeKind.ADDED, 3)]
            assert [n.run_id for n in sg.tree("t1").roots] == [done.run_id]
            assert [t.thread_id for t in sg.threads()] == ["t1"]
            assert sg.effects(done.run_id) == sg.model_calls(done.run_id) == []
            assert sg.model_usage(done.run_id).total.calls == 0
            assert sg.pending() == []
        assert sg.closed
    assert opened == [sg.store]


@backends(*EVERY)
def test_decisions_through_one_handle(backend: str, tmp_path: Path, opened: list[Store]) -> None:
    for url in _url(backend, tmp_path):
        with _connect(url) as sg:
            first = sg.run(GATED, {"amount": 5})
            [waiting] = sg.pending()
            assert (waiting.run_id, waiting.name) == (first.run_id, "handle_pay")
            approved = sg.approve(first.run_id, by="alice", workflow=GATED)
            assert approved.result is not None and approved.result.state["paid"] == "paid 5"

            second = sg.run(GATED, {"amount": 7})
            rejected = sg.reject(second.run_id, reason="too much", workflow=GATED)
            assert rejected.result is not None and rejected.result.state["why"] == "too much"

            asked = sg.run(ASKING)
            answered = sg.supply(asked.run_id, "blue", by="bob", workflow=ASKING)
            assert answered.result is not None and answered.result.state == {"answer": "blue"}

            undone = sg.compensate(first.run_id)
            assert undone.status is RunStatus.COMPENSATED
            assert paid == []
            with pytest.raises(NotFoundError) as missing:
                sg.resolve(first.run_id, "no-such-call", done=False)
            assert sg.store.url in str(missing.value)  # the handle names its store
    assert opened == [sg.store]


@backends(*EVERY)
def test_events_cancel_and_asyncio_through_one_handle(
    backend: str, tmp_path: Path, opened: list[Store]
) -> None:
    for url in _url(backend, tmp_path):
        with _connect(url) as sg:
            waits = sg.run(WAITING)
            assert waits.status is RunStatus.WAITING
            sent = sg.send(waits.run_id, "go", {"x": 1}, key="k1")
            assert (sent.delivered, sent.woken) == (True, True)
            assert sg.send(waits.run_id, "go", {"x": 2}, key="k1").delivered is False
            assert sg.resume(waits.run_id).state == {"got": {"x": 1}}

            stopped = sg.run(WAITING)
            assert sg.cancel(stopped.run_id, by="carol").status is RunStatus.CANCELLED

            async def twins() -> tuple[Any, Any]:
                asked = await sg.arun(ASKING)
                return asked, await sg.aresume(asked.run_id, value="red", workflow=ASKING)

            asked, ended = asyncio.run(twins())
            assert (asked.status, ended.state) == (RunStatus.INTERRUPTED, {"answer": "red"})
    assert opened == [sg.store]


@backends(*EVERY)
def test_time_travel_through_one_handle(backend: str, tmp_path: Path, opened: list[Store]) -> None:
    for url in _url(backend, tmp_path):
        with _connect(url) as sg:
            origin = sg.run(COUNTER, thread_id="t")
            first = sg.history(origin.run_id)[-1]
            assert sg.plan_fork(first.checkpoint_id).writes == ()
            forked = sg.fork(first.checkpoint_id, update={"n": 1}, run=False, reason="again")
            assert forked.result is None and forked.edited == ("n",)
            assert sg.resume(forked.run_id).state == {"n": 3}
            [root] = sg.tree("t").roots
            assert [child.run_id for child in root.children] == [forked.run_id]
    assert opened == [sg.store]


@backends(*SCHEDULED)
def test_schedules_queues_and_a_worker_share_one_handle(
    backend: str, tmp_path: Path, opened: list[Store]
) -> None:
    for url in _url(backend, tmp_path):
        with _connect(url) as sg:
            added = sg.schedules.add("nightly", COUNTER, cron="0 3 * * *", queue=None)
            assert sg.schedules.get("nightly") == added
            assert [s.name for s in sg.schedules.list()] == ["nightly"]
            assert sg.schedules.pause("nightly").paused
            assert not sg.schedules.resume("nightly").paused
            assert sg.schedules.fire(now=utcnow()) == []  # nothing due yet
            [started] = sg.schedules.fire(now=added.next_at + timedelta(seconds=1))
            sg.schedules.remove("nightly")
            assert sg.schedules.list() == []

            sg.queues.declare("mail", concurrency=1)
            queued = sg.submit(COUNTER, queue="mail", priority=2)
            [mail] = sg.queues.list()
            assert (mail.queue.name, mail.queued) == ("mail", 1)

            worker = sg.worker(poll=0.05, queues=["mail"])
            worker.run(idle_exit=0.3)
            assert worker.stats.finished == {queued.run_id: "completed"}
            assert sg.get_run(started).status is RunStatus.QUEUED  # not in the worker's queue
    assert opened == [sg.store]


@backends(*EVERY)
def test_upkeep_through_one_handle(backend: str, tmp_path: Path, opened: list[Store]) -> None:
    keys = StorageConfig(keyring=Keyring({"k1": os.urandom(32)}, active="k1"))
    for url in _url(backend, tmp_path):
        with _connect(url, keys) as sg:
            done = sg.run(COUNTER)
            with pytest.raises(
                savegame.errors.EncryptionKeyError
            ):  # written under the handle's keys
                savegame.client.get_checkpoint(done.run_id, store=sg.store, storage=StorageConfig())
            assert sg.verify().damaged == []
            rekeyed = sg.rekey()
            assert (rekeyed.key_id, rekeyed.skipped) == ("k1", [])
            assert sg.stats().totals.checkpoints == 4
            pruned = sg.prune(RetentionPolicy(keep_last=1))
            assert len(pruned.checkpoints) == 3
            assert [h.step for h in sg.history(done.run_id)] == [3]
            exported = sg.export(done.run_id, tmp_path / "run.sgx")
            assert exported.run_ids == (done.run_id,)
        with savegame.connect(f"sqlite:///{tmp_path / 'other.db'}", storage=keys) as other:
            assert other.import_run(tmp_path / "run.sgx").run_ids == (done.run_id,)
            assert other.checkpoint(done.run_id).state == {"n": 3}
    assert opened == [sg.store, other.store]


def test_a_store_given_stays_open_and_one_opened_is_closed(tmp_path: Path) -> None:
    given = MemoryStore()
    with savegame.connect(given) as sg:
        assert sg.store is given
        sg.run(COUNTER, run_id="r")
    assert given.get_run("r").status is RunStatus.COMPLETED  # still open for its owner

    url = f"sqlite:///{tmp_path / 'mine.db'}"
    sg = savegame.connect(url)
    sg.run(COUNTER, run_id="r")
    sg.close()
    sg.close()  # a second close does nothing
    with pytest.raises(Exception, match="closed"):
        sg.store.get_run("r")  # the handle closed the store it opened


def test_a_closed_handle_refuses_every_operation_naming_its_store(tmp_path: Path) -> None:
    sg = savegame.connect(f"sqlite:///{tmp_path / 'gone.db'}")
    sg.close()
    for call in (
        lambda: sg.run(COUNTER),
        lambda: sg.history("r"),
        lambda: sg.schedules.list(),
        lambda: sg.queues.list(),
        lambda: sg.worker(),
    ):
        with pytest.raises(ConfigurationError, match=r"handle on sqlite:///.*gone\.db is closed"):
            call()


def test_async_with_closes_the_handle_and_a_missing_store_is_refused(tmp_path: Path) -> None:
    async def use() -> Savegame:
        async with savegame.connect(f"sqlite:///{tmp_path / 'a.db'}") as sg:
            assert (await sg.arun(COUNTER)).state == {"n": 3}
        return sg

    assert asyncio.run(use()).closed
    with pytest.raises(savegame.errors.StoreNotFoundError, match="does not exist"):
        savegame.connect(f"sqlite:///{tmp_path / 'none.db'}", create=False)
    assert not (tmp_path / "none.db").exists()


def test_a_handle_given_as_a_store_is_refused_saying_what_to_pass() -> None:
    with savegame.connect("memory://") as sg:
        with pytest.raises(ConfigurationError, match=r"pass its store \(store=sg.store\)"):
            savegame.client.list_runs(store=sg)  # type: ignore[arg-type]
        assert savegame.client.list_runs(store=sg.store) == []


def test_the_handle_says_where_it_is() -> None:
    sg = savegame.connect("memory://")
    assert repr(sg) == "<Savegame memory://>"
    sg.close()
    assert repr(sg) == "<Savegame memory:// closed>"
