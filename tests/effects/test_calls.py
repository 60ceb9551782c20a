"""Invariant 4: tools, the journal, in-doubt calls, non-determinism, and LLM results that are never paid twice."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from savegame import (
    END,
    Agent,
    RunStatus,
    ScriptedModel,
    StepContext,
    Store,
    Workflow,
    resolve,
    resume,
    run,
    tool,
)
from savegame.client import list_effects
from savegame.errors import ConfigurationError, InDoubtEffectError, NonDeterminismError, StepError
from savegame.model import EffectKind, EffectStatus


class Crash(BaseException):
    """Stands in for the process dying inside a tool call: nothing after it runs."""


calls: Counter[str] = Counter()
fail_after: dict[str, bool] = {}
crash_in: dict[str, bool] = {}


@pytest.fixture(autouse=True)
def reset() -> None:
    calls.clear()
    fail_after.clear()
    crash_in.clear()


@tool(effect="read")
def lookup(order_id: str) -> dict[str, Any]:
    calls["lookup"] += 1
    return {"id": order_id, "total": 150}


@tool(effect="write", idempotent=True)
def charge(order_id: str, amount: int, *, request_id: str) -> dict[str, Any]:
    calls["charge"] += 1
    calls[f"charge:{request_id}"] += 1
    if crash_in.pop("charge", False):
        raise Crash()
    return {"receipt": f"R-{order_id}", "amount": amount, "request_id": request_id}


@tool(effect="write")
def send_email(to: str, body: str) -> str:
    calls["email"] += 1
    if crash_in.pop("email", False):
        raise Crash()
    return f"sent to {to}"


sent_ids: set[str] = set()


def email_reconcile(request_id: str) -> Any:
    return {"sent": True} if request_id in sent_ids else None


@tool(effect="write", reconcile=email_reconcile)
def send_tracked(to: str, *, request_id: str) -> dict[str, Any]:
    calls["tracked"] += 1
    sent_ids.add(request_id)
    if crash_in.pop("tracked", False):
        raise Crash()
    return {"sent": True}


def flow(second_amount: int = 150) -> Workflow:
    wf = Workflow("effects")

    @wf.step(entry=True)
    def work(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        order = ctx.call(lookup, state["order_id"])
        receipt = ctx.call(charge, order_id=order["id"], amount=second_amount)
        note = ctx.call(send_email, "ann@example.com", body=f"refund {receipt['receipt']}")
        if fail_after.pop("work", False):
            raise RuntimeError("downstream timeout")
        return {"receipt": receipt, "note": note}, END

    return wf


def test_journal_records_each_call_with_a_stable_request_id(store: Store) -> None:
    result = run(flow(), {"order_id": "A1"}, run_id="r", store=store)
    assert result.state["receipt"] == {"receipt": "R-A1", "amount": 150, "request_id": "r:1:1"}
    effects = list_effects("r", store=store)
    assert [(e.request_id, e.kind, e.name, e.status) for e in effects] == [
        ("r:1:0", EffectKind.READ, "lookup", EffectStatus.DONE),
        ("r:1:1", EffectKind.WRITE, "charge", EffectStatus.DONE),
        ("r:1:2", EffectKind.WRITE, "send_email", EffectStatus.DONE),
    ]
    assert effects[1].arguments == {"order_id": "A1", "amount": 150}
    assert effects[2].arguments == {"to": "ann@example.com", "body": "refund R-A1"}
    assert effects[2].result == "sent to ann@example.com"
    assert result.usage.tool_calls == 3


def test_recorded_results_are_reused_when_a_step_is_re_executed(store: Store) -> None:
    fail_after["work"] = True
    with pytest.raises(StepError, match="downstream timeout"):
        run(flow(), {"order_id": "A1"}, run_id="r", store=store)
    assert calls["charge"] == 1 and calls["email"] == 1
    result = resume("r", store=store, workflow=flow())
    # Re-executed step: the journal answered every call, nothing ran twice.
    assert calls["charge"] == 1 and calls["email"] == 1 and calls["lookup"] == 1
    assert (
        result.status is RunStatus.COMPLETED and result.state["note"] == "sent to ann@example.com"
    )
    assert result.usage.tool_calls == 3  # replayed calls still count once


def test_in_doubt_idempotent_write_is_retried_with_the_same_request_id(store: Store) -> None:
    crash_in["charge"] = True
    with pytest.raises(Crash):
        run(flow(), {"order_id": "A1"}, run_id="r", store=store)
    [intent] = [e for e in list_effects("r", store=store) if e.name == "charge"]
    assert intent.status is EffectStatus.PENDING and intent.result is None
    result = resume("r", store=store, workflow=flow())
    assert result.status is RunStatus.COMPLETED
    assert calls["charge:r:1:1"] == 2  # same id both times: the payment system deduplicates
    assert calls["email"] == 1


def test_in_doubt_write_without_idempotency_stops_for_a_person(store: Store) -> None:
    crash_in["email"] = True
    with pytest.raises(Crash):
        run(flow(), {"order_id": "A1"}, run_id="r", store=store)
    with pytest.raises(InDoubtEffectError) as info:
        resume("r", store=store, workflow=flow())
    err = info.value
    assert err.tool == "send_email" and err.request_id == "r:1:2"
    assert err.arguments == {"to": "ann@example.com", "body": "refund R-A1"}
    assert "savegame resolve r --effect r:1:2" in str(err)
    assert store.get_run("r").status is RunStatus.NEEDS_ATTENTION
    assert calls["email"] == 1  # never a blind retry
    # A person checks the mail server: it was sent.
    resolve("r", "r:1:2", done=True, result="sent (checked by hand)", store=store)
    result = resume("r", store=store, workflow=flow())
    assert result.state["note"] == "sent (checked by hand)" and calls["email"] == 1
    entry = next(e for e in list_effects("r", store=store) if e.request_id == "r:1:2")
    assert entry.metadata["resolved"] == "done" and "by" in entry.metadata


def test_resolved_as_not_done_calls_again(store: Store) -> None:
    crash_in["email"] = True
    with pytest.raises(Crash):
        run(flow(), {"order_id": "A1"}, run_id="r", store=store)
    with pytest.raises(InDoubtEffectError):
        resume("r", store=store, workflow=flow())
    resolve("r", "r:1:2", done=False, store=store)
    assert resume("r", store=store, workflow=flow()).status is RunStatus.COMPLETED
    assert calls["email"] == 2


def test_in_doubt_write_with_reconcile_asks_the_outside_world(store: Store) -> None:
    wf = Workflow("tracked")

    @wf.step(entry=True)
    def go(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"r": ctx.call(send_tracked, "bob")}, END

    crash_in["tracked"] = True
    with pytest.raises(Crash):
        run(wf, run_id="t1", store=store)
    result = resume("t1", store=store, workflow=wf)
    assert result.state["r"] == {"sent": True} and calls["tracked"] == 1  # found, not re-sent
    assert next(iter(list_effects("t1", store=store))).metadata["reconciled"] is True
    # And when reconcile finds nothing, the call happens (once).
    sent_ids.clear()
    crash_in["tracked"] = True
    with pytest.raises(Crash):
        run(wf, run_id="t2", store=store)
    sent_ids.clear()
    resume("t2", store=store, workflow=wf)
    assert calls["tracked"] == 3


def test_a_different_call_at_a_journaled_position_is_non_determinism(store: Store) -> None:
    fail_after["work"] = True
    with pytest.raises(StepError):
        run(flow(), {"order_id": "A1"}, run_id="r", store=store)
    with pytest.raises(NonDeterminismError) as info:
        resume("r", store=store, workflow=flow(second_amount=99))
    message = str(info.value)
    assert "r:1:1" in message
    assert (
        "charge(amount=150, order_id='A1')" in message
        and "charge(amount=99, order_id='A1')" in message
    )
    assert calls["charge"] == 1


def _raising_write(**flags: Any) -> tuple[Any, Workflow, dict[str, bool]]:
    """A write that charges, then raises a timeout (the charge went through), and its workflow."""
    boom = {"on": True}

    @tool(effect="write", name="charge_card", **flags)
    def charge_card(x: int, **extra: Any) -> int:
        calls["charge_card"] += 1
        if boom["on"]:
            raise TimeoutError("no answer after 30 s")
        return x * 2

    wf = Workflow("raising-write")

    @wf.step(entry=True)
    def go(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"y": ctx.call(charge_card, 21)}, END

    return charge_card, wf, boom


def test_a_write_that_raised_is_in_doubt_not_retried(store: Store) -> None:
    """An exception does not prove the call did not happen: the card may be charged."""
    _, wf, boom = _raising_write()
    with pytest.raises(InDoubtEffectError, match="raised TimeoutError: no answer") as caught:
        run(wf, run_id="f", store=store)
    assert caught.value.request_id == "f:1:0" and isinstance(caught.value.cause, TimeoutError)
    assert store.get_run("f").status is RunStatus.NEEDS_ATTENTION
    [entry] = list_effects("f", store=store)
    assert entry.status is EffectStatus.PENDING and "TimeoutError" in (entry.error or "")
    boom["on"] = False
    with pytest.raises(InDoubtEffectError):  # a resume does not charge again either
        resume("f", store=store, workflow=wf)
    assert calls["charge_card"] == 1
    # A person checked: the charge never reached the bank. Then it is called again.
    resolve("f", "f:1:0", done=False, store=store)
    assert resume("f", store=store, workflow=wf).state == {"y": 42}
    assert calls["charge_card"] == 2


def test_a_write_that_raised_a_safe_error_is_called_again(store: Store) -> None:
    _, wf, boom = _raising_write(safe_errors=(TimeoutError,))
    with pytest.raises(StepError, match="no answer"):
        run(wf, run_id="f", store=store)
    [entry] = list_effects("f", store=store)
    assert entry.status is EffectStatus.NOT_DONE and "TimeoutError: no answer" in (
        entry.error or ""
    )
    boom["on"] = False
    assert resume("f", store=store, workflow=wf).state == {"y": 42}
    assert calls["charge_card"] == 2


def test_an_idempotent_write_that_raised_is_retried_with_its_request_id(store: Store) -> None:
    seen: list[str] = []
    boom = {"on": True}

    @tool(effect="write", idempotent=True)
    def ship(x: int, *, request_id: str) -> int:
        seen.append(request_id)
        if boom["on"]:
            raise ConnectionError("reset by peer")
        return x

    wf = Workflow("raising-idempotent")

    @wf.step(entry=True)
    def go(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"y": ctx.call(ship, 7)}, END

    with pytest.raises(StepError, match="reset by peer"):
        run(wf, run_id="i", store=store)
    boom["on"] = False
    assert resume("i", store=store, workflow=wf).state == {"y": 7}
    assert seen == ["i:1:0", "i:1:0"]


def test_a_reconcilable_write_that_raised_asks_the_tool_at_once(store: Store) -> None:
    """A timeout after the charge went through: the tool's own check finds it, and the
    step goes on with the result, without charging twice."""
    charged: dict[str, int] = {}

    def lookup_charge(request_id: str) -> int | None:
        return charged.get(request_id)

    @tool(effect="write", reconcile=lookup_charge)
    def pay(x: int, *, request_id: str) -> int:
        charged[request_id] = x * 2
        raise TimeoutError("gateway timeout")

    wf = Workflow("raising-reconciled")

    @wf.step(entry=True)
    def go(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"y": ctx.call(pay, 21)}, END

    assert run(wf, run_id="r", store=store).state == {"y": 42}
    [entry] = list_effects("r", store=store)
    assert entry.status is EffectStatus.DONE and entry.metadata.get("reconciled") is True

    @tool(effect="write", reconcile=lambda request_id: None, name="pay")
    def pay_refused(x: int, *, request_id: str) -> int:
        raise TimeoutError("gateway timeout")

    wf2 = Workflow("raising-not-happened")

    @wf2.step(entry=True)
    def go2(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"y": ctx.call(pay_refused, 21)}, END

    with pytest.raises(StepError, match="gateway timeout"):
        run(wf2, run_id="n", store=store)
    [entry] = list_effects("n", store=store)
    assert entry.status is EffectStatus.NOT_DONE


def test_tool_declarations_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="idempotent but takes no request_id"):

        @tool(effect="write", idempotent=True)
        def bad(x: int) -> None: ...

    with pytest.raises(ConfigurationError, match="must be 'read' or 'write'"):
        tool(effect="delete")  # type: ignore[arg-type]


class CountingModel(ScriptedModel):
    def complete(self, messages: Any, tools: Any) -> Any:
        calls["llm"] += 1
        return super().complete(messages, tools)


def test_llm_results_are_journaled_and_never_paid_twice(store: Store) -> None:
    @tool(effect="write")
    def book(flight: str) -> str:
        calls["book"] += 1
        if crash_in.pop("book", False):
            raise Crash()
        return f"booked {flight}"

    model = CountingModel(
        [
            {"tool_calls": [{"id": "1", "name": "lookup", "arguments": {"order_id": "Z"}}]},
            {"tool_calls": [{"id": "2", "name": "book", "arguments": {"flight": "LH123"}}]},
            "done",
        ]
    )
    agent = Agent("travel", model, [lookup, book])
    crash_in["book"] = True
    with pytest.raises(Crash):
        run(agent, {"input": "book it"}, run_id="a", store=store)
    assert calls["llm"] == 2
    with pytest.raises(InDoubtEffectError):
        resume("a", store=store, workflow=agent)
    resolve(
        "a",
        next(e.request_id for e in list_effects("a", store=store) if e.name == "book"),
        done=False,
        store=store,
    )
    result = resume("a", store=store, workflow=agent)
    assert result.state["answer"] == "done"
    assert calls["llm"] == 3 and calls["book"] == 2
    kinds = Counter(e.kind for e in list_effects("a", store=store))
    assert kinds[EffectKind.LLM] == 3


def test_reads_a_write_depended_on_are_kept_when_the_step_dies(store: Store) -> None:
    price = {"now": 100}

    @tool(effect="read")
    def quote(item: str) -> int:
        return price["now"]

    wf = Workflow("buy")

    @wf.step(entry=True)
    def buy(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        amount = ctx.call(quote, "book")
        ctx.call(charge, order_id="B", amount=amount)
        if crash_in.pop("after_charge", False):
            raise Crash()  # dies after the charge, before the step's checkpoint
        return {"paid": amount}, END

    crash_in["after_charge"] = True
    with pytest.raises(Crash):
        run(wf, run_id="b", store=store)
    price["now"] = 105  # the quote moved while the run was down
    result = resume("b", store=store, workflow=wf)
    # The re-executed step saw the recorded quote, so the charge replayed as recorded.
    assert result.state["paid"] == 100 and calls["charge"] == 1


def test_the_whole_journal_is_loaded_however_long(store: Store) -> None:
    @tool(effect="read")
    def tick(i: int) -> int:
        return i

    wf = Workflow("long-journal")

    @wf.step(entry=True)
    def many(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        for i in range(10_050):  # more than a store's default listing limit
            ctx.call(tick, i)
        return {}, "pay"

    @wf.step
    def pay(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.call(charge, order_id="L", amount=1)
        if fail_after.pop("pay", False):
            raise RuntimeError("after the charge")
        return {}, END

    fail_after["pay"] = True
    with pytest.raises(StepError):
        run(wf, run_id="long", store=store)
    resume("long", store=store, workflow=wf)
    assert calls["charge"] == 1


def test_a_result_that_is_not_pure_data_fails_the_same_way_on_replay(store: Store) -> None:
    from savegame.errors import SerializationError

    @tool(effect="write")
    def open_session(user: str) -> object:
        calls["session"] += 1
        return object()  # not pure data: cannot be journaled

    wf = Workflow("session")

    @wf.step(entry=True)
    def go(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.call(open_session, "ann")
        return {}, END

    with pytest.raises(SerializationError, match=r"result\.open_session"):
        run(wf, run_id="s", store=store)
    with pytest.raises(SerializationError, match="recorded at first call"):
        resume("s", store=store, workflow=wf)
    assert calls["session"] == 1  # never called twice
