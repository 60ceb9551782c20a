"""Human approval, interrupts and cancellation: pauses that hold no process."""

from __future__ import annotations

import threading
from collections import Counter
from functools import partial
from typing import Any

import pytest

from savegame import (
    END,
    RunStatus,
    StepContext,
    Store,
    Workflow,
    approve,
    reject,
    resume,
    run,
    tool,
)
from savegame.client import cancel, list_effects, pending_interrupts
from savegame.errors import (
    ApprovalRejected,
    EffectSettledError,
    NonDeterminismError,
    NotFoundError,
    RunStateError,
)
from savegame.model import EffectKind, EffectStatus
from savegame.testing.together import together

refunds: Counter[str] = Counter()


@tool(effect="write", idempotent=True, approval=lambda a: a["amount"] > 100)
def issue_refund(order_id: str, amount: int, *, request_id: str) -> dict[str, Any]:
    refunds[order_id] += 1
    return {"order_id": order_id, "amount": amount, "request_id": request_id}


def refund_flow() -> Workflow:
    wf = Workflow("refund")

    @wf.step(entry=True)
    def refund(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        try:
            receipt = ctx.call(issue_refund, order_id=state["order_id"], amount=state["amount"])
        except ApprovalRejected as rejected:
            return {"receipt": None, "rejected": rejected.reason, "by": rejected.by}, END
        return {"receipt": receipt}, END

    return wf


@pytest.fixture(autouse=True)
def clear() -> None:
    refunds.clear()


def test_small_refund_needs_no_approval(store: Store) -> None:
    result = run(refund_flow(), {"order_id": "A", "amount": 50}, store=store)
    assert result.status is RunStatus.COMPLETED and refunds["A"] == 1


def test_large_refund_waits_for_approval_without_holding_a_process(store: Store) -> None:
    result = run(refund_flow(), {"order_id": "A", "amount": 500}, run_id="r", store=store)
    assert result.status is RunStatus.INTERRUPTED and refunds["A"] == 0
    assert result.interrupt_id == "r:1:0:approval"
    info = store.get_run("r")
    assert info.status is RunStatus.INTERRUPTED and info.lease is None  # nobody holds it
    [waiting] = pending_interrupts(store=store)
    assert (waiting.run_id, waiting.kind, waiting.name) == (
        "r",
        EffectKind.APPROVAL,
        "issue_refund",
    )
    assert waiting.payload == {"order_id": "A", "amount": 500}
    with pytest.raises(RunStateError, match="waits for approval of issue_refund"):
        resume("r", store=store, workflow=refund_flow())
    approve("r", by="alice", store=store)
    done = resume("r", store=store, workflow=refund_flow())
    assert done.status is RunStatus.COMPLETED and refunds["A"] == 1
    assert done.state["receipt"]["amount"] == 500
    decision = next(e for e in list_effects("r", store=store) if e.kind is EffectKind.APPROVAL)
    assert (
        decision.status is EffectStatus.DONE
        and decision.metadata["by"] == "alice"
        and "at" in decision.metadata
    )
    assert pending_interrupts(store=store) == []


def test_an_edit_replaces_the_arguments(store: Store) -> None:
    run(refund_flow(), {"order_id": "A", "amount": 500}, run_id="r", store=store)
    approve("r", edit={"order_id": "A", "amount": 120}, store=store)
    done = resume("r", store=store, workflow=refund_flow())
    assert done.state["receipt"]["amount"] == 120 and refunds["A"] == 1
    write = next(e for e in list_effects("r", store=store) if e.kind is EffectKind.WRITE)
    assert write.arguments == {"order_id": "A", "amount": 120}


def test_a_rejection_reaches_the_step(store: Store) -> None:
    run(refund_flow(), {"order_id": "A", "amount": 500}, run_id="r", store=store)
    reject("r", reason="over the limit", by="bob", store=store)
    done = resume("r", store=store, workflow=refund_flow())
    assert done.state == {
        "order_id": "A",
        "amount": 500,
        "receipt": None,
        "rejected": "over the limit",
        "by": "bob",
    }
    assert refunds["A"] == 0


def test_approve_needs_a_pending_approval(store: Store) -> None:
    run(refund_flow(), {"order_id": "A", "amount": 5}, run_id="r", store=store)
    with pytest.raises(RunStateError):
        approve("r", store=store)
    run(refund_flow(), {"order_id": "B", "amount": 500}, run_id="r2", store=store)
    with pytest.raises(NotFoundError):
        approve("r2", interrupt_id="nope", store=store)


def test_an_approve_racing_a_reject_has_one_winner_and_the_run_follows_it(store: Store) -> None:
    """Two people decide one gate at the same moment: one decision stands, the other
    gets an error instead of believing it applied, and the resumed run does what the
    winner decided."""
    for attempt in range(8):
        run_id = f"race-{attempt}"
        run(refund_flow(), {"order_id": run_id, "amount": 500}, run_id=run_id, store=store)
        approved, rejected = together([
            partial(approve, run_id, by="approver", store=store),
            partial(reject, run_id, reason="no", by="rejecter", store=store),
        ])  # fmt: skip
        outcomes = {"approver": approved, "rejecter": rejected}
        winners = [who for who, o in outcomes.items() if not isinstance(o, BaseException)]
        assert len(winners) == 1, outcomes
        # The loser found the gate settled first, or no longer pending: nothing else.
        [loser] = [o for o in outcomes.values() if isinstance(o, BaseException)]
        assert isinstance(loser, (EffectSettledError, RunStateError)), loser
        done = resume(run_id, store=store, workflow=refund_flow())
        assert refunds[run_id] == (1 if winners == ["approver"] else 0)
        assert done.state.get("by") == (None if winners == ["approver"] else "rejecter")


def test_interrupt_returns_the_value_given_on_resume(store: Store) -> None:
    wf = Workflow("ask")

    @wf.step(entry=True)
    def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        answer = ctx.interrupt({"question": "Which plan?"})
        return {"plan": answer}, "confirm"

    @wf.step
    def confirm(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ok = ctx.interrupt({"question": f"Confirm {state['plan']}?"}, name="confirm")
        return {"confirmed": ok}, END

    first = run(wf, run_id="q", store=store)
    assert first.status is RunStatus.INTERRUPTED
    [waiting] = pending_interrupts("q", store=store)
    assert waiting.payload == {"question": "Which plan?"}
    with pytest.raises(RunStateError, match="waits for a value"):
        resume("q", store=store, workflow=wf)
    second = resume("q", value="gold", store=store, workflow=wf)
    assert second.status is RunStatus.INTERRUPTED and second.state["plan"] == "gold"
    final = resume("q", value=True, store=store, workflow=wf)
    assert final.status is RunStatus.COMPLETED and final.state == {
        "plan": "gold",
        "confirmed": True,
    }


def cancel_during_step(
    store: Store, wf: Workflow, run_id: str, entered: threading.Event, gate: threading.Event
) -> dict[str, Any]:
    """Run ``wf`` on a thread; once its step has ``entered``, call cancel from another
    thread, open the ``gate`` when the request is stored, and return what each thread got
    (RunResult, RunInfo or RunStateError) by type name."""
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(run(wf, run_id=run_id, store=store)))
    worker.start()
    assert entered.wait(10)

    def ask() -> None:
        try:
            results.append(cancel(run_id, store=store, wait=10))
        except RunStateError as exc:
            results.append(exc)

    canceller = threading.Thread(target=ask)
    canceller.start()
    while not store.get_run(run_id).cancel_requested:
        pass
    gate.set()
    worker.join(10)
    canceller.join(10)
    return {type(r).__name__: r for r in results}


def test_cancel_a_waiting_run_and_a_running_one(store: Store) -> None:
    run(refund_flow(), {"order_id": "A", "amount": 500}, run_id="r", store=store)
    info = cancel("r", store=store)
    assert info.status is RunStatus.CANCELLED
    with pytest.raises(RunStateError, match="cancelled"):
        resume("r", store=store, workflow=refund_flow())

    entered, gate = threading.Event(), threading.Event()
    wf = Workflow("long")

    @wf.step(entry=True)
    def tick(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        n = state.get("n", 0) + 1
        if n == 3:
            entered.set()
            gate.wait(10)
        return {"n": n}, "tick" if n < 100 else END

    by_type = cancel_during_step(store, wf, "long", entered, gate)
    assert by_type["RunResult"].status is RunStatus.CANCELLED
    assert by_type["RunResult"].state["n"] == 3  # stopped at the boundary after the running step
    assert by_type["RunInfo"].status is RunStatus.CANCELLED
    with pytest.raises(RunStateError):
        cancel(run(refund_flow(), {"order_id": "C", "amount": 1}, store=store).run_id, store=store)


def test_a_run_that_ends_while_cancel_waits_keeps_its_ending(store: Store) -> None:
    """The request lands during the last step: no boundary follows, the run completes,
    and cancel must not write a cancelled marker over it."""
    entered, gate = threading.Event(), threading.Event()
    wf = Workflow("short")

    @wf.step(entry=True)
    def last(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        entered.set()
        gate.wait(10)
        return {"done": True}, END

    by_type = cancel_during_step(store, wf, "ends", entered, gate)
    assert by_type["RunResult"].status is RunStatus.COMPLETED
    assert "completed" in str(by_type["RunStateError"])
    info = store.get_run("ends")
    assert info.status is RunStatus.COMPLETED
    assert store.latest_checkpoint("ends").header.status is RunStatus.COMPLETED


# -- an approval is bound to the call a person saw ------------------------------------
paid: list[dict[str, Any]] = []


@tool(effect="write", idempotent=True, approval=lambda a: a["amount"] > 100)
def pay(to: str, amount: int, *, request_id: str) -> str:
    paid.append({"to": to, "amount": amount})
    return f"paid {amount} to {to}"


@tool(effect="write", idempotent=True, approval=True)
def delete_account(to: str, amount: int, *, request_id: str) -> str:
    paid.append({"deleted": to})
    return f"deleted {to}"


def payout_flow(config: dict[str, Any]) -> Workflow:
    """What the step computes comes from ``config``: a redeploy may change it."""
    wf = Workflow("payout")

    @wf.step(entry=True)
    def payout(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        try:
            done = ctx.call(config["tool"], to="bob", amount=config["amount"])
        except ApprovalRejected as rejected:
            return {"rejected": rejected.reason}, END
        return {"done": done}, END

    return wf


@pytest.fixture
def payouts() -> Any:
    paid.clear()
    yield paid
    paid.clear()


@pytest.mark.parametrize(
    ("changed", "shown"),
    [
        ({"tool": pay, "amount": 1_000_000}, "pay(amount=1000000, to='bob')"),
        ({"tool": delete_account, "amount": 150}, "delete_account(amount=150, to='bob')"),
    ],
)
def test_an_approval_runs_only_the_call_that_was_approved(
    store: Store, payouts: list[Any], changed: dict[str, Any], shown: str
) -> None:
    config: dict[str, Any] = {"tool": pay, "amount": 150}
    wf = payout_flow(config)
    assert run(wf, run_id="p", store=store).status is RunStatus.INTERRUPTED
    approve("p", store=store)
    config.update(changed)  # before the resume, what the step computes changes
    with pytest.raises(NonDeterminismError) as caught:
        resume("p", store=store, workflow=wf)
    message = str(caught.value)
    assert "an approval of pay(amount=150, to='bob')" in message and shown in message
    assert payouts == []  # neither the changed call nor anything else ran
    assert store.get_run("p").status is RunStatus.FAILED
    config.update({"tool": pay, "amount": 150})  # the approved call still runs as approved
    assert resume("p", store=store, workflow=wf).state["done"] == "paid 150 to bob"
    assert payouts == [{"to": "bob", "amount": 150}]


def test_a_pending_approval_is_bound_too(store: Store, payouts: list[Any]) -> None:
    config: dict[str, Any] = {"tool": pay, "amount": 150}
    wf = payout_flow(config)
    run(wf, run_id="p", store=store)
    config["amount"] = 9_999  # changed while the approval waited
    approve("p", store=store)  # the person approved what they saw: 150
    with pytest.raises(NonDeterminismError, match="amount=9999"):
        resume("p", store=store, workflow=wf)
    assert payouts == []


def test_an_edit_is_what_runs_and_the_step_must_still_ask_for_the_same_call(
    store: Store, payouts: list[Any]
) -> None:
    config: dict[str, Any] = {"tool": pay, "amount": 150}
    wf = payout_flow(config)
    run(wf, run_id="p", store=store)
    approve("p", store=store, edit={"to": "bob", "amount": 120})
    assert resume("p", store=store, workflow=wf).state["done"] == "paid 120 to bob"
    assert payouts == [{"to": "bob", "amount": 120}]


def test_a_decision_stands_when_the_gate_no_longer_applies(
    store: Store, payouts: list[Any]
) -> None:
    """A rejection on record is not skipped because a redeploy raised the threshold."""

    @tool(effect="write", idempotent=True, approval=lambda a: a["amount"] > 10_000, name="pay")
    def lenient_pay(to: str, amount: int, *, request_id: str) -> str:
        paid.append({"to": to, "amount": amount})
        return "paid"

    config: dict[str, Any] = {"tool": pay, "amount": 150}
    wf = payout_flow(config)
    run(wf, run_id="p", store=store)
    reject("p", reason="not this week", store=store)
    config["tool"] = lenient_pay
    assert resume("p", store=store, workflow=wf).state == {"rejected": "not this week"}
    assert payouts == []


def test_a_done_call_is_not_put_to_a_person_when_the_gate_now_applies(
    store: Store, payouts: list[Any]
) -> None:
    """A call that ran ungated is handed back on a resume whose predicate now gates it:
    a person asked about it could reject a payment that was made."""

    @tool(effect="write", idempotent=True, approval=lambda a: a["amount"] > 10_000, name="pay")
    def lenient_pay(to: str, amount: int, *, request_id: str) -> str:
        paid.append({"to": to, "amount": amount})
        return f"paid {amount} to {to}"

    config: dict[str, Any] = {"first": lenient_pay}
    wf = Workflow("payouts")

    @wf.step(entry=True)
    def payout(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        first = ctx.call(config["first"], to="bob", amount=150)
        return {"done": [first, ctx.call(pay, to="eve", amount=150)]}, END

    assert run(wf, run_id="p", store=store).status is RunStatus.INTERRUPTED
    config["first"] = pay  # a redeploy lowered the threshold: bob's 150 is gated now
    approve("p", store=store)
    done = resume("p", store=store, workflow=wf)
    assert done.status is RunStatus.COMPLETED
    assert done.state["done"] == ["paid 150 to bob", "paid 150 to eve"]
    assert payouts == [{"to": "bob", "amount": 150}, {"to": "eve", "amount": 150}]
