"""Events: ``savegame.send`` from outside and ``ctx.wait_for`` in a step, no process held."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from savegame import (
    END,
    MemoryStore,
    RunStatus,
    StepContext,
    Store,
    Worker,
    Workflow,
    resume,
    run,
    send,
    submit,
)
from savegame.client import cancel, list_effects, prune
from savegame.errors import (
    ConfigurationError,
    NonDeterminismError,
    NotFoundError,
    RunStateError,
    WaitTimedOutError,
)
from savegame.maintenance import RetentionPolicy
from savegame.model import EffectKind, EffectStatus
from savegame.stores.base import Capabilities

State = dict[str, Any]

PAYMENT = Workflow("payment")


@PAYMENT.step(entry=True)
def ask(state: State, ctx: StepContext) -> tuple[State, str]:
    ctx.add_usage(tool_calls=1)  # counted once per execution: shows how often it re-ran
    paid = ctx.wait_for("paid")
    return {"paid": paid}, "ship"


@PAYMENT.step()
def ship(state: State, ctx: StepContext) -> tuple[State, str]:
    return {"shipped": ctx.wait_for("shipped")}, END


TWICE = Workflow("twice")


@TWICE.step(entry=True)
def both(state: State, ctx: StepContext) -> tuple[State, str]:
    return {"got": [ctx.wait_for("tick"), ctx.wait_for("tick")]}, END


PATIENT = Workflow("patient")


@PATIENT.step(entry=True)
def patient(state: State, ctx: StepContext) -> tuple[State, str]:
    try:
        value = ctx.wait_for("reply", timeout=state["timeout"])
    except WaitTimedOutError as exc:
        value = f"timed out: {exc.topic}"
    # A person looks before it goes on: the step then runs again from its start.
    seen = ctx.interrupt({"value": value})
    return {"value": value, "seen": seen}, END


def test_a_run_waits_for_an_event_holding_nothing_and_takes_it_once_sent(store: Store) -> None:
    result = run(PAYMENT, {}, store=store)
    assert result.status is RunStatus.WAITING
    info = store.get_run(result.run_id)
    assert (info.status, info.lease, info.wake_at) == (RunStatus.WAITING, None, None)
    head = store.latest_checkpoint(result.run_id).header
    assert head.next == "ask" and head.metadata["waiting"]["topics"] == ["paid"]
    with pytest.raises(RunStateError, match="waits for event 'paid'"):
        resume(result.run_id, store=store)

    sent = send(result.run_id, "paid", {"amount": 30}, store=store)
    assert (sent.delivered, sent.woken) == (True, True)
    waiting = resume(result.run_id, store=store)
    assert waiting.status is RunStatus.WAITING  # now for "shipped"
    assert waiting.state["paid"] == {"amount": 30}
    send(result.run_id, "shipped", "by boat", store=store)
    done = resume(result.run_id, store=store)
    assert done.status is RunStatus.COMPLETED
    assert done.state == {"paid": {"amount": 30}, "shipped": "by boat"}
    assert done.usage.tool_calls == 1  # ask ran twice; only its finished execution counts
    kinds = [(e.kind, e.name, e.status) for e in list_effects(result.run_id, store=store)]
    assert sorted(kinds) == sorted(
        [
            (EffectKind.WAIT, "paid", EffectStatus.DONE),
            (EffectKind.EVENT, "paid", EffectStatus.DONE),
            (EffectKind.WAIT, "shipped", EffectStatus.DONE),
            (EffectKind.EVENT, "shipped", EffectStatus.DONE),
        ]
    )


def test_an_event_sent_before_the_run_waits_is_kept_for_it(store: Store) -> None:
    result = run(PAYMENT, {}, store=store)
    # "shipped" comes first, while the run still waits for "paid": it is kept.
    early = send(result.run_id, "shipped", "early", store=store)
    assert (early.delivered, early.woken) == (True, False)
    send(result.run_id, "paid", 1, store=store)
    done = resume(result.run_id, store=store)
    assert done.status is RunStatus.COMPLETED
    assert done.state == {"paid": 1, "shipped": "early"}


def test_an_event_sent_twice_with_one_key_is_taken_once(store: Store) -> None:
    result = run(TWICE, {}, store=store)
    first = send(result.run_id, "tick", "one", key="webhook-7", store=store)
    again = send(result.run_id, "tick", "one again", key="webhook-7", store=store)
    assert (first.delivered, again.delivered) == (True, False)
    assert again.request_id == first.request_id
    # The first wait takes the event; the second waits: the duplicate was dropped.
    middle = resume(result.run_id, store=store)
    assert middle.status is RunStatus.WAITING
    send(result.run_id, "tick", "two", key="webhook-8", store=store)
    assert resume(result.run_id, store=store).state["got"] == ["one", "two"]
    events = [e for e in list_effects(result.run_id, store=store) if e.kind is EffectKind.EVENT]
    assert sorted(e.arguments for e in events) == ["one", "two"]


def test_events_on_one_topic_are_taken_oldest_first(store: Store) -> None:
    result = run(TWICE, {}, store=store)
    for value in ("a", "b", "c"):
        send(result.run_id, "tick", value, store=store)
    assert resume(result.run_id, store=store).state["got"] == ["a", "b"]


def test_a_timeout_is_recorded_and_replayed_whatever_comes_later(store: Store) -> None:
    # A due time already past: the wait times out at once (nothing was sent).
    result = run(PATIENT, {"timeout": -1}, store=store)
    assert result.status is RunStatus.INTERRUPTED
    assert result.state == {"timeout": -1}
    (wait,) = [e for e in list_effects(result.run_id, store=store) if e.kind is EffectKind.WAIT]
    assert (wait.status, wait.error) == (EffectStatus.FAILED, "timed out")
    # A reply now is too late for that wait: the step runs again and times out again.
    send(result.run_id, "reply", "late", store=store)
    done = resume(result.run_id, store=store, value="ok")
    assert done.state["value"] == "timed out: reply"
    event = next(e for e in list_effects(result.run_id, store=store) if e.kind is EffectKind.EVENT)
    assert event.status is EffectStatus.PENDING  # left for a later wait


def test_an_event_that_comes_in_time_beats_the_timeout(store: Store) -> None:
    result = run(PATIENT, {"timeout": timedelta(days=2)}, store=store)
    assert result.status is RunStatus.WAITING
    info = store.get_run(result.run_id)
    assert info.wake_at is not None and info.wake_at > info.updated_at + timedelta(days=1)
    send(result.run_id, "reply", "in time", store=store)
    paused = resume(result.run_id, store=store)
    assert paused.status is RunStatus.INTERRUPTED
    assert resume(result.run_id, store=store, value="ok").state["value"] == "in time"


def _waiting_for(topic: str) -> Workflow:
    wf = Workflow("changed")

    @wf.step(entry=True)
    def changed(state: State, ctx: StepContext) -> tuple[State, str]:
        return {"got": ctx.wait_for(topic)}, END

    return wf


def test_a_step_that_waits_for_another_topic_on_replay_is_refused(store: Store) -> None:
    result = run(_waiting_for("a"), {}, store=store)
    send(result.run_id, "a", 1, store=store)
    # The step's position 0 waited for "a"; a redeploy makes it wait for "b" there.
    with pytest.raises(NonDeterminismError):
        resume(result.run_id, store=store, workflow=_waiting_for("b"))


def test_send_refuses_what_nobody_could_take(store: Store) -> None:
    with pytest.raises(NotFoundError):
        send("no-such-run", "paid", 1, store=store)
    result = run(PAYMENT, {}, store=store)
    for topic in ("", "$child:x", "two\nlines", 7):
        with pytest.raises(ConfigurationError):
            send(result.run_id, topic, 1, store=store)  # type: ignore[arg-type]
    cancelled = cancel(result.run_id, store=store)
    assert cancelled.status is RunStatus.CANCELLED
    with pytest.raises(RunStateError):
        send(result.run_id, "paid", 1, store=store)


def test_a_waiting_run_is_kept_by_prune_unless_asked(store: Store) -> None:
    result = run(PAYMENT, {}, store=store)
    policy = RetentionPolicy(finished_for=timedelta(0), keep_last=1)
    prune(policy, store=store)
    assert store.get_run(result.run_id).status is RunStatus.WAITING
    send(result.run_id, "paid", 2, store=store)
    assert resume(result.run_id, store=store).status is RunStatus.WAITING


class NoWaits(MemoryStore):
    """A store that keeps no waiting runs (a third-party backend without the capability)."""

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(persistent=False, multi_process=False)


def test_a_store_without_the_capability_refuses_clearly() -> None:
    store = NoWaits()
    with pytest.raises(ConfigurationError, match="cannot keep a run waiting"):
        run(PAYMENT, {}, store=store)
    info = store.list_runs()[0]
    assert info.status is RunStatus.FAILED
    with pytest.raises(ConfigurationError, match="cannot keep a run waiting"):
        send(info.run_id, "paid", 1, store=store)


def test_a_worker_continues_a_run_once_its_event_arrives(sqlite_url: str) -> None:
    run_id = submit(PAYMENT, {}, store=sqlite_url).run_id
    worker = Worker(sqlite_url, poll=0.02, lease_ttl=5)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        with _open(sqlite_url) as store:
            _eventually(lambda: store.get_run(run_id).status is RunStatus.WAITING)
            send(run_id, "paid", "card", store=store)
            _eventually(lambda: store.latest_checkpoint(run_id).header.next == "ship")
            send(run_id, "shipped", "van", store=store)
            _eventually(lambda: store.get_run(run_id).status is RunStatus.COMPLETED)
    finally:
        worker.stop()
        thread.join()
    assert worker.stats.claimed == 3  # submitted, then woken twice


def test_a_run_that_wants_to_block_waits_here_holding_its_lease(sqlite_url: str) -> None:
    outcome: list[Any] = []
    thread = threading.Thread(
        target=lambda: outcome.append(
            run(PAYMENT, {}, store=sqlite_url, run_id="blocking", wait=True)
        )
    )
    thread.start()
    with _open(sqlite_url) as store:
        _eventually(
            lambda: (
                _exists(store, "blocking") and store.get_run("blocking").status is RunStatus.WAITING
            )
        )
        lease = store.get_run("blocking").lease
        assert lease is not None  # still this process's: no worker takes it meanwhile
        send("blocking", "paid", 5, store=store)
        send("blocking", "shipped", 6, store=store)
        thread.join()
    (result,) = outcome
    assert (result.status, result.state) == (RunStatus.COMPLETED, {"paid": 5, "shipped": 6})


def _open(url: str) -> Store:
    from savegame import open_store

    return open_store(url)


def _exists(store: Store, run_id: str) -> bool:
    try:
        store.get_run(run_id)
    except NotFoundError:
        return False
    return True


def _eventually(check: Any, seconds: float = 30.0) -> None:
    """Wait until ``check()`` holds (another thread or process gets there); fail after ``seconds``."""
    import time

    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("the condition never held")
        time.sleep(0.01)
