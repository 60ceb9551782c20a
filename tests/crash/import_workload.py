"""A run that charges, then waits for an approval: what an import must bring whole.

Its ``SAVEGAME_LEDGER`` file is the outside world: one line per charge or credit.
"""

from __future__ import annotations

import os
from typing import Any

from savegame import END, StepContext, Workflow, tool


def _note(line: str) -> None:
    with open(os.environ["SAVEGAME_LEDGER"], "a") as f:
        f.write(line + "\n")


@tool(effect="write")
def import_charge(card: str, amount: int, *, request_id: str) -> dict[str, bool]:
    _note(f"charge {card} {amount}")
    return {"ok": True}


@tool(effect="write", approval=True)
def import_credit(account: str, amount: int, *, request_id: str) -> dict[str, bool]:
    _note(f"credit {account} {amount}")
    return {"ok": True}


wf = Workflow("import-crash")


@wf.step(entry=True)
def prepare(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"card": "4242"}, "settle"


@wf.step
def settle(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    charged = ctx.call(import_charge, card=state["card"], amount=5)
    credited = ctx.call(import_credit, account="acc", amount=7)
    return {"charged": charged, "credited": credited}, END
