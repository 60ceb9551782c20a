"""A parent and a child run whose tool counts itself in ``$ATTACK_LEDGER``, importable
(a child's workflow must be), for tests/adversarial/test_replay_attacks.py."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from savegame import END, StepContext, Workflow, tool


@tool(name="child_weigh")
def child_weigh(item: str) -> int:
    with Path(os.environ["ATTACK_LEDGER"]).open("a") as out:
        out.write(f"child_weigh {item}\n")
    return len(item)


CHILD = Workflow("atk-child")


@CHILD.step(entry=True)
def weigh(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"weight": ctx.call(child_weigh, state["item"])}, END


def parent(item: str) -> Workflow:
    wf = Workflow("atk-parent")

    @wf.step(entry=True)
    def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"child": ctx.run_child(CHILD, {"item": item})}, END

    return wf
