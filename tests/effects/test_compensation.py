"""Sagas: completed writes undone in reverse order, each exactly once, on failure, cancel or request."""

from __future__ import annotations

from typing import Any

import pytest

from savegame import END, RunStatus, StepContext, Store, Workflow, resolve, run, tool
from savegame.client import cancel, compensate, list_effects
from savegame.errors import CompensationError, InDoubtEffectError, RunStateError, StepError
from savegame.model import EffectKind, EffectStatus

log: list[str] = []
broken: dict[str, bool] = {}


@pytest.fixture(autouse=True)
def clear() -> None:
    log.clear()
    broken.clear()


@tool(effect="write", idempotent=True, compensate="release_seat")
def reserve_seat(flight: str, *, request_id: str) -> dict[str, str]:
    log.append(f"reserve {flight}")
    return {"seat": f"{flight}-12A"}


@tool(effect="write", idempotent=True)
def release_seat(flight: str, *, result: dict[str, str], request_id: str) -> str:
    if broken.get("release"):
        raise RuntimeError("airline API down")
    log.append(f"release {result['seat']}")
    return "released"


@tool(effect="write", compensate="refund_card")
def charge_card(amount: int) -> str:
    log.append(f"charge {amount}")
    return "ch_1"


@tool(effect="write", idempotent=True)
def refund_card(amount: int, *, request_id: str) -> str:
    log.append(f"refund {amount}")
    return "re_1"


@tool(effect="write")
def send_receipt(to: str) -> str:
    log.append("receipt")
    return "ok"


def trip(*, fail: bool = True, **options: Any) -> Workflow:
    wf = Workflow("trip", **options)

    @wf.step(entry=True)
    def book(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.call(reserve_seat, "LH1")
        ctx.call(reserve_seat, "LH2")
        return {}, "pay"

    @wf.step
    def pay(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.call(charge_card, 300)
        ctx.call(send_receipt, "ann@example.com")  # no compensation declared: stays
        if fail:
            raise RuntimeError("hotel sold out")
        return {}, END

    return wf


def test_person_compensates_a_failed_run_in_reverse_order_once(store: Store) -> None:
    with pytest.raises(StepError):
        run(trip(), run_id="t", store=store)
    log.clear()
    result = compensate("t", store=store)
    assert result.status is RunStatus.COMPENSATED
    assert log == ["refund 300", "release LH2-12A", "release LH1-12A"]
    comps = [e for e in list_effects("t", store=store) if e.kind is EffectKind.COMPENSATION]
    assert [c.metadata["compensates"] for c in comps] == ["t:2:0", "t:1:1", "t:1:0"]
    assert all(c.status is EffectStatus.DONE for c in comps)
    with pytest.raises(RunStateError, match="compensated"):
        compensate("t", store=store)
    assert store.get_run("t").status is RunStatus.COMPENSATED


def test_failure_compensates_automatically_when_asked(store: Store) -> None:
    with pytest.raises(StepError):
        run(trip(compensate_on_failure=True), run_id="t", store=store)
    assert log[-3:] == ["refund 300", "release LH2-12A", "release LH1-12A"]
    statuses = [h.status for h in store.list_checkpoints("t")]
    # The failure checkpoint itself says compensating, so a crash here is continued, not retried.
    assert statuses[:2] == [RunStatus.COMPENSATED, RunStatus.COMPENSATING]
    assert RunStatus.FAILED not in statuses


def test_a_failing_compensation_is_named_and_can_be_continued(store: Store) -> None:
    with pytest.raises(StepError):
        run(trip(), run_id="t", store=store)
    broken["release"] = True
    log.clear()
    with pytest.raises(
        CompensationError, match=r"compensation release_seat for t:1:1 failed: airline API down"
    ):
        compensate("t", store=store)
    assert store.get_run("t").status is RunStatus.COMPENSATION_FAILED
    head = store.list_checkpoints("t", limit=1)[0]
    assert head.metadata["failed"] == "t:1:1:compensate" and head.metadata["tool"] == "release_seat"
    assert log == ["refund 300"]
    broken["release"] = False
    assert compensate("t", store=store).status is RunStatus.COMPENSATED
    assert log == [
        "refund 300",
        "release LH2-12A",
        "release LH1-12A",
    ]  # the refund did not run twice


def test_cancel_with_compensation(store: Store) -> None:
    wf = Workflow("wait")

    @wf.step(entry=True)
    def book(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.call(reserve_seat, "LH9")
        return {"answer": ctx.interrupt("ok to pay?")}, END

    assert run(wf, run_id="w", store=store).status is RunStatus.INTERRUPTED
    info = cancel("w", store=store, compensate_effects=True)
    assert info.status is RunStatus.COMPENSATED
    assert log == ["reserve LH9", "release LH9-12A"]


def test_completed_run_with_nothing_to_undo(store: Store) -> None:
    run(trip(fail=False), run_id="ok", store=store)
    log.clear()
    assert compensate("ok", store=store).status is RunStatus.COMPENSATED
    assert log == ["refund 300", "release LH2-12A", "release LH1-12A"]


def test_a_compensation_that_raised_and_may_have_happened_is_in_doubt(store: Store) -> None:
    """An undo is a write: a timeout after the refund went through must not refund twice."""
    refunds: list[int] = []
    timeout = {"on": True}

    @tool(effect="write", compensate="refund_once")
    def charge(amount: int) -> str:
        return "ch_9"

    @tool(effect="write", name="refund_once")
    def refund_once(amount: int) -> str:
        refunds.append(amount)
        if timeout["on"]:
            raise TimeoutError("gateway timeout")
        return "re_9"

    wf = Workflow("doubtful-undo")

    @wf.step(entry=True)
    def go(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.call(charge, 40)
        raise RuntimeError("sold out")

    with pytest.raises(StepError):
        run(wf, run_id="u", store=store)
    with pytest.raises(InDoubtEffectError, match="raised TimeoutError: gateway timeout"):
        compensate("u", store=store)
    assert store.get_run("u").status is RunStatus.NEEDS_ATTENTION
    timeout["on"] = False
    with pytest.raises(InDoubtEffectError):  # run again: still in doubt, not refunded again
        compensate("u", store=store)
    assert refunds == [40]
    resolve("u", "u:1:0:compensate", done=True, result="re_9", store=store)
    assert compensate("u", store=store).status is RunStatus.COMPENSATED
    assert refunds == [40]
