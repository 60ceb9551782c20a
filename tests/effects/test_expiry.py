"""Approvals that expire (effects/_expiry.py): the deadline decides once, journaled by "expiry"."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from savegame import (
    END,
    RunStatus,
    StepContext,
    Store,
    Worker,
    Workflow,
    approve,
    resume,
    run,
    submit,
    tool,
)
from savegame.client import pending_interrupts
from savegame.effects import ESCALATED
from savegame.errors import ApprovalRejected, ConfigurationError, EffectSettledError
from savegame.model import EffectKind, EffectStatus
from savegame.stores import open_store
from savegame.testing.together import together
from tests import services

sent: Counter[str] = Counter()
SHORT = timedelta(milliseconds=300)


@pytest.fixture(autouse=True)
def clear() -> None:
    sent.clear()


def flow(expires: timedelta, on_expiry: str = "reject") -> Workflow:
    @tool(effect="write", approval=True, expires=expires, on_expiry=on_expiry, name="expiring_pay")  # type: ignore[call-overload]
    def pay(amount: int) -> int:
        sent["pay"] += 1
        return amount

    wf = Workflow("pay")

    @wf.step(entry=True)
    def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        try:
            return {"paid": ctx.call(pay, amount=state["amount"])}, END
        except ApprovalRejected as no:
            return {"paid": None, "by": no.by, "reason": no.reason}, END

    return wf


def sqlite(tmp_path: Path) -> Store:
    return open_store(f"sqlite:///{tmp_path / 'runs.db'}")


def past(deadline: Any) -> None:
    from savegame.model import utcnow

    while utcnow() < deadline:
        time.sleep(0.05)


def test_no_decision_before_the_deadline_rejects_by_expiry(tmp_path: Path) -> None:
    store = sqlite(tmp_path)
    first = run(flow(SHORT), {"amount": 5}, run_id="r", store=store)
    assert first.status is RunStatus.WAITING and sent["pay"] == 0
    [waiting] = pending_interrupts(store=store)
    assert waiting.expires_at is not None and waiting.on_expiry == "reject"
    past(waiting.expires_at)
    done = resume("r", store=store, workflow=flow(SHORT))
    assert done.status is RunStatus.COMPLETED and sent["pay"] == 0
    assert done.state["by"] == "expiry"
    [gate] = store.list_effects("r", kinds=[EffectKind.APPROVAL])
    assert gate.status is EffectStatus.REJECTED and gate.metadata["by"] == "expiry"
    assert pending_interrupts(store=store) == []


def test_an_approval_before_the_deadline_stands_and_the_expiry_never_fires(
    tmp_path: Path,
) -> None:
    store = sqlite(tmp_path)
    wf = flow(timedelta(hours=1))
    run(wf, {"amount": 5}, run_id="r", store=store)
    decided = approve("r", store=store, by="ada", workflow=wf)
    assert decided.result is not None and decided.result.status is RunStatus.COMPLETED
    assert decided.result.state["paid"] == 5 and sent["pay"] == 1
    [gate] = store.list_effects("r", kinds=[EffectKind.APPROVAL])
    assert gate.status is EffectStatus.DONE and gate.metadata["by"] == "ada"


def test_a_restart_past_the_deadline_applies_it_at_once(tmp_path: Path) -> None:
    run(flow(SHORT), {"amount": 5}, run_id="r", store=sqlite(tmp_path))
    [waiting] = pending_interrupts(store=sqlite(tmp_path))
    past(waiting.expires_at)
    # A fresh store handle: the deadline comes from the file, not from this process.
    done = resume("r", store=sqlite(tmp_path), workflow=flow(timedelta(days=9)))
    assert done.state["by"] == "expiry" and sent["pay"] == 0


def test_a_person_racing_the_expiry_finds_it_decided(tmp_path: Path) -> None:
    store = sqlite(tmp_path)
    run(flow(SHORT), {"amount": 5}, run_id="r", store=store)
    [waiting] = pending_interrupts(store=store)
    stale = store.get_effect("r", waiting.interrupt_id)
    past(waiting.expires_at)
    resume("r", store=store, workflow=flow(SHORT))
    from savegame.effects.decisions import _settle

    with pytest.raises(EffectSettledError):
        _settle(store, stale, EffectStatus.DONE, result={"approved": True}, by="ada")
    [gate] = store.list_effects("r", kinds=[EffectKind.APPROVAL])
    assert gate.metadata["by"] == "expiry" and sent["pay"] == 0


def test_escalate_keeps_it_open_for_a_person_and_sends_the_event(tmp_path: Path) -> None:
    store = sqlite(tmp_path)
    wf = flow(SHORT, "escalate")
    run(wf, {"amount": 5}, run_id="r", store=store)
    [waiting] = pending_interrupts(store=store)
    past(waiting.expires_at)
    again = resume("r", store=store, workflow=wf)
    assert again.status is RunStatus.INTERRUPTED and sent["pay"] == 0
    [still] = pending_interrupts(store=store)
    assert still.on_expiry == "escalated"
    events = store.list_effects("r", kinds=[EffectKind.EVENT])
    assert [e.name for e in events] == [ESCALATED]
    assert events[0].metadata["by"] == "expiry"
    decided = approve("r", store=store, by="ada", workflow=wf)
    assert decided.result is not None and decided.result.state["paid"] == 5


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"expires": timedelta(0)}, "expires must be a positive timedelta"),
        ({"expires": -1}, "expires must be a positive timedelta"),
        ({"expires": timedelta(hours=1), "on_expiry": "shrug"}, "on_expiry must be"),
        (
            {"expires": timedelta(hours=1), "approval": False},
            "expires= is given but the tool needs no approval",
        ),
    ],
)
def test_bad_expiry_input_is_refused_naming_the_tool(options: dict[str, Any], says: str) -> None:
    options = {"approval": True, **options}

    def wire() -> None: ...

    with pytest.raises(ConfigurationError, match=f"tool wire: {says}"):
        tool(effect="write", **options)(wire)


@pytest.fixture(params=["sqlite", "postgres"])
def fleet_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fleet.db'}"
        return
    with services.postgres_schema() as schema:
        yield services.postgres_url(schema)


def test_two_resumers_race_past_the_deadline_one_decision_stands(fleet_url: str) -> None:
    run(flow(SHORT), {"amount": 5}, run_id="r", store=open_store(fleet_url))
    [waiting] = pending_interrupts(store=open_store(fleet_url))
    past(waiting.expires_at)

    def one() -> Any:
        return resume("r", store=open_store(fleet_url), workflow=flow(SHORT))

    outcomes = together([one, one])
    store = open_store(fleet_url)
    [gate] = store.list_effects("r", kinds=[EffectKind.APPROVAL])
    assert gate.status is EffectStatus.REJECTED and gate.metadata["by"] == "expiry"
    assert store.get_run("r").status is RunStatus.COMPLETED and sent["pay"] == 0
    assert any(not isinstance(o, BaseException) for o in outcomes)


# Module-level: a worker imports a run's workflow by its stored reference.
SOON = flow(SHORT)
LATER = flow(timedelta(hours=1))


def work(url: str) -> Worker:
    worker = Worker(url, poll=0.02, lease_ttl=5)
    thread = threading.Thread(target=worker.run, kwargs={"idle_exit": 1.5})
    thread.start()
    thread.join()
    return worker


def test_a_worker_claims_the_run_when_the_deadline_comes_and_rejects_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    run_id = submit(SOON, {"amount": 5}, store=url).run_id
    worker = work(url)
    store = open_store(url)
    assert store.get_run(run_id).status is RunStatus.COMPLETED and sent["pay"] == 0
    [gate] = store.list_effects(run_id, kinds=[EffectKind.APPROVAL])
    assert gate.status is EffectStatus.REJECTED and gate.metadata["by"] == "expiry"
    assert worker.stats.claimed == 2  # submitted, then woken by its deadline


def test_a_decision_wakes_the_waiting_run_for_a_worker_before_the_deadline(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    run_id = run(LATER, {"amount": 7}, store=url).run_id
    decided = approve(run_id, store=url, by="ada", resume=False)
    assert decided.queued or decided.not_continued
    work(url)
    store = open_store(url)
    assert store.get_run(run_id).status is RunStatus.COMPLETED and sent["pay"] == 1
    [gate] = store.list_effects(run_id, kinds=[EffectKind.APPROVAL])
    assert gate.status is EffectStatus.DONE and gate.metadata["by"] == "ada"


def test_a_person_s_approve_racing_the_expiry_one_decision_stands(fleet_url: str) -> None:
    run(flow(SHORT), {"amount": 5}, run_id="r", store=open_store(fleet_url))
    [waiting] = pending_interrupts(store=open_store(fleet_url))
    past(waiting.expires_at)

    def expire() -> Any:
        return resume("r", store=open_store(fleet_url), workflow=flow(SHORT))

    def person() -> Any:
        return approve("r", store=fleet_url, by="ada", resume=False)

    together([expire, person])
    store = open_store(fleet_url)
    [gate] = store.list_effects("r", kinds=[EffectKind.APPROVAL])
    if gate.status is EffectStatus.REJECTED:
        assert gate.metadata["by"] == "expiry" and sent["pay"] == 0
        assert store.get_run("r").status is RunStatus.COMPLETED
    else:  # the person committed first: the expiry found it decided and the call ran
        assert gate.status is EffectStatus.DONE and gate.metadata["by"] == "ada"
        final = resume("r", store=store, workflow=flow(SHORT)) if sent["pay"] == 0 else None
        assert sent["pay"] == 1 and (final is None or final.state["paid"] == 5)
