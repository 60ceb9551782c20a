"""The workflow tests/adversarial/test_url_secrets.py drives through every command: two
steps, a gated write that pauses the run for approval, so every command finds data."""

from __future__ import annotations

from typing import Any

from savegame import END, Workflow, tool

wf = Workflow("secret_flow")


@tool(effect="write", approval=True, idempotent=True)
def pay_planted(amount: int, *, request_id: str) -> dict[str, Any]:
    return {"paid": amount, "request_id": request_id}


@wf.step(entry=True)
def plan(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
    return {"amount": state.get("amount", 5), "items": [1, 2, 3]}, "charge"


@wf.step
def charge(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], Any]:
    return {"receipt": ctx.call(pay_planted, amount=state["amount"])}, END
