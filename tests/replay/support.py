"""The README's support agent (examples/support_agent.py), and the three ways the tests change it.

Its tools are the example's, each counted in an outside ledger (``$REPLAY_TOOL_LOG``, a
line per call) so a test can prove a replay called none; its model is the example's
(``savegame.models.OpenAI``, ``temperature=0``) on the local provider (tests/provider.py),
which counts the requests it gets.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from savegame import Agent, tool
from savegame.models import OpenAI
from savegame.runtime import StepContext, load

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support_agent.py"
SYSTEM: str = load(f"{EXAMPLE}:SYSTEM")
_lookup = load(f"{EXAMPLE}:lookup_order")
_refund = load(f"{EXAMPLE}:issue_refund")

ASK = "Order A-1 arrived broken, I want my money back"


def _count(name: str) -> None:
    with Path(os.environ["REPLAY_TOOL_LOG"]).open("a") as out:
        out.write(name + "\n")


def tool_calls() -> list[str]:
    log = Path(os.environ["REPLAY_TOOL_LOG"])
    return log.read_text().splitlines() if log.exists() else []


@tool(effect="read", name="lookup_order")
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up by its id (like A-1)."""
    _count("lookup_order")
    result: dict[str, Any] = _lookup.fn(order_id)
    return result


@tool(effect="write", idempotent=True, approval=True, name="issue_refund")
def issue_refund(order_id: str, amount: int, *, request_id: str) -> dict[str, Any]:
    """Refund an amount of an order to the customer."""
    _count("issue_refund")
    result: dict[str, Any] = _refund.fn(order_id, amount, request_id=request_id)
    return result


def refund_in_currency() -> Any:
    """Change (b): the refund tool takes a currency now (the code passes its default)."""

    @tool(effect="write", idempotent=True, approval=True, name="issue_refund")
    def issue_refund(
        order_id: str, amount: int, currency: str = "EUR", *, request_id: str
    ) -> dict[str, Any]:
        """Refund an amount of an order to the customer."""
        _count("issue_refund")
        return {"request_id": request_id, "amount": amount, "currency": currency}

    return issue_refund


class Triaged(Agent):
    """Change (c): a step added between receiving the message and the model's first turn."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.workflow.add_step(self._triage, name="triage")

    def _receive(self, state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        update, _ = super()._receive(state, ctx)
        return update, "triage"

    def _triage(self, state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        urgent = "broken" in (state["messages"][-1].get("content") or "")
        return {"priority": "high" if urgent else "normal"}, "llm"


def support(
    base_url: str,
    *,
    system: str = SYSTEM,
    refund: Any = issue_refund,
    kind: type[Agent] = Agent,
) -> Agent:
    """The example's agent (``support(model)`` there), its model on ``base_url``."""
    model = OpenAI("gpt-4o-mini", base_url=base_url, api_key="local", temperature=0)
    return kind("support", model, [lookup_order, refund], system=system)
