"""A workflow is checked when it is loaded, before any step does its effects: an unknown
literal next step, a missing entry, a ``compensate=`` that names no tool, an ``approval``
that is neither a bool nor a function. The error names the workflow, the step and the
bad name, with the nearest known one. Real SQLite file; the outside world is a list.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from savegame import END, StepContext, Workflow, open_store, run, submit, tool
from savegame.client import list_runs
from savegame.effects import Tool
from savegame.errors import ConfigurationError

PLAN = "plann"  # a module constant with a typo, returned by a step
world: list[str] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    world.clear()


@pytest.fixture
def url(tmp_path: Path) -> str:
    made = f"sqlite:///{tmp_path / 'runs.db'}"
    open_store(made).close()  # the store exists: "no runs in it" is what is checked
    return made


@tool(effect="write", idempotent=True)
def cancel_order_refund(order_id: str, *, result: Any, request_id: str) -> None:
    world.append(f"cancel {order_id}")


@tool(effect="write", idempotent=True, compensate="cancel_order_refnd")
def refund_order(order_id: str, *, request_id: str) -> str:
    world.append(f"refund {order_id}")
    return "refunded"


def test_an_unknown_next_step_is_refused_before_the_first_step_runs(url: str) -> None:
    wf = Workflow("typo-next")

    @wf.step(entry=True)
    def charge(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        world.append("charged")
        return {}, ("notify" if state.get("ok") else "notfy")

    @wf.step()
    def notify(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {}, END

    with pytest.raises(ConfigurationError) as raised:
        run(wf, {"ok": True}, store=url)
    assert str(raised.value) == (
        "workflow 'typo-next' has no step 'notfy': step 'charge' returns it as its next "
        "step; did you mean 'notify'? (steps: charge, notify)"
    )
    assert world == [] and list_runs(store=url) == []


def test_a_next_step_held_in_a_module_constant_is_checked(url: str) -> None:
    wf = Workflow("typo-constant")

    @wf.step(entry=True)
    def start(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {}, PLAN

    @wf.step()
    def plan(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {}, END

    with pytest.raises(ConfigurationError, match=r"has no step 'plann'.*did you mean 'plan'"):
        submit(wf, {}, store=url)
    assert list_runs(store=url) == []


def test_a_missing_entry_is_refused(url: str) -> None:
    wf = Workflow("no-entry")

    @wf.step()
    def one(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {}, "two"

    @wf.step()
    def two(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {}, END

    with pytest.raises(ConfigurationError, match="workflow 'no-entry' has no entry step"):
        wf.validate()
    with pytest.raises(ConfigurationError, match="has no entry step"):
        run(wf, store=url)


def test_a_compensation_that_names_no_tool_is_refused_before_the_refund(url: str) -> None:
    wf = Workflow("refunds")

    @wf.step(entry=True)
    def refund(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"receipt": ctx.call(refund_order, order_id="A-1")}, END

    with pytest.raises(ConfigurationError) as raised:
        run(wf, store=url)
    assert str(raised.value) == (
        "workflow 'refunds', step 'refund': tool refund_order declares "
        "compensate='cancel_order_refnd', but no tool of that name is registered "
        "(did you mean 'cancel_order_refund'?)"
    )
    assert world == [] and list_runs(store=url) == []


def test_a_tool_reached_at_run_time_is_checked_before_its_intent(url: str) -> None:
    by_name = {"refund": refund_order}
    wf = Workflow("dynamic-refunds")

    @wf.step(entry=True)
    def refund(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"receipt": ctx.call(by_name[state["action"]], order_id="A-2")}, END

    wf.validate()  # nothing to see statically: the tool comes out of a dict
    with pytest.raises(ConfigurationError, match="run r-dyn, step 'refund': tool refund_order"):
        run(wf, {"action": "refund"}, run_id="r-dyn", store=url)
    assert world == []  # refused before the write, not after


def test_an_approval_that_is_not_callable_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="tool pay_out: approval must be True, False"):

        @tool(effect="write", approval="yes")  # type: ignore[arg-type]
        def pay_out(amount: int) -> None: ...

    def send(amount: int) -> None: ...

    built = Tool(send, "send", "write", False, None, "always", None)  # type: ignore[arg-type]
    wf = Workflow("approvals")

    @wf.step(entry=True)
    def go(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.call(built, 3)
        return {}, END

    with pytest.raises(
        ConfigurationError, match="workflow 'approvals', step 'go': tool send: approval must be"
    ):
        wf.validate()
