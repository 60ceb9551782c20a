"""A small shop for the UI's tests: a plan, a charge that waits for approval, a receipt.

Importable by name (``tests.ui.shop:wf``), so a UI server started in the repository
finds the workflow again and continues a run after a decision, like a real one.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from savegame import END, StepContext, Workflow, tool

HOSTILE = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"

charges: list[dict[str, Any]] = []


@tool(effect="write", idempotent=True, approval=True)
def charge(order_id: str, amount: int, *, request_id: str) -> dict[str, Any]:
    charges.append({"order_id": order_id, "amount": amount})
    return {"charge_id": f"ch_{order_id}", "amount": amount}


wf = Workflow("shop")


@wf.step(entry=True)
def plan(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    order = {"id": state.get("order_id", "o1"), "amount": state.get("amount", 42)}
    return {"order": order, "note": state.get("note", "ok"), "log": ["planned"]}, "pay"


@wf.step
def pay(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    receipt = ctx.call(charge, order_id=state["order"]["id"], amount=state["order"]["amount"])
    return {"receipt": receipt, "log": [*state["log"], "paid"]}, "done"


@wf.step
def done(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"log": [*state["log"], "done"]}, END


class Timeout(Exception):
    """The payment provider did not answer: the charge may or may not have happened."""


@tool(effect="write")
def flaky_charge(order_id: str, amount: int) -> dict[str, Any]:
    raise Timeout(f"no answer about {order_id}")


flaky = Workflow("flaky-shop")


@flaky.step(entry=True)
def pay_flaky(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    receipt = ctx.call(flaky_charge, order_id="o9", amount=9)
    return {"receipt": receipt}, END


asks = Workflow("asks-shop")


@asks.step(entry=True)
def ask_size(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    # A question for a person: ctx.interrupt returns what they answer.
    answer = ctx.interrupt({"question": "which size?", "choices": ["S", "M", "L"]}, name="size")
    return {"size": answer}, "ship"


@asks.step
def ship(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"shipped": state["size"]}, END


gated = Workflow("gated-shop")


@gated.step(entry=True)
def wait_for_gate(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    """Says it has started (``state["entered"]``, a file), then waits for ``state["gate"]``:
    a test kills the process that runs it in between."""
    Path(state["entered"]).touch()
    while not Path(state["gate"]).exists():
        time.sleep(0.02)
    return {"passed": True}, END
