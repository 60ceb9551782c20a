"""One workflow in the versions a team ships while runs are in flight: ``refund`` pays an
order, asks a person (``ctx.interrupt``), and v2 adds a manager's check (``ask``) behind
``ctx.patched("ask-first")``, before the payment or after the person's answer.

Every tool execution is a line in a ledger file (``SAVEGAME_LEDGER``), outside the
store: what a replay reuses never shows there twice.

Run as a script (``python patch_flows.py URL RUN_ID``) it starts a v2 run that SIGKILLs
itself right after the patched call, before any checkpoint: the crash test resumes it.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from savegame import END, StepContext, Workflow, tool

ASK_FIRST = "ask-first"


def ledger(line: str) -> None:
    with open(os.environ["SAVEGAME_LEDGER"], "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def lines() -> list[str]:
    path = os.environ["SAVEGAME_LEDGER"]
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


@tool(effect="write", idempotent=True)
def patch_pay(order: str, *, request_id: str) -> str:
    ledger(f"pay {order}")
    return f"paid {order}"


@tool(effect="write", idempotent=True)
def patch_ask(order: str, *, request_id: str) -> str:
    ledger(f"ask {order}")
    if os.environ.get("PATCH_KILL_AFTER_ASK"):
        os.kill(os.getpid(), signal.SIGKILL)  # the intent and this call happened; no result
    return "approved"


@tool(effect="write", idempotent=True, approval=True)
def patch_wire(order: str, *, request_id: str) -> str:
    ledger(f"wire {order}")
    return "wired"


def gated(patched: bool) -> Workflow:
    """A payment a person approves; the next release checks with a manager before it."""
    wf = Workflow("wire", version="v2" if patched else "v1")

    @wf.step(entry=True)
    def wire(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        took = patched and ctx.patched(ASK_FIRST)
        if took:
            ctx.call(patch_ask, state["order"])
        ctx.call(patch_wire, state["order"])
        return {"took": took}, END

    return wf


@tool(effect="write")
def patch_charge(order: str) -> str:
    ledger(f"charge {order}")
    raise ConnectionError("the line dropped: did the charge go through?")


def charging(patched: bool) -> Workflow:
    """A charge that may have happened (it raised after sending); the next release
    checks with a manager first."""
    wf = Workflow("charge", version="v2" if patched else "v1")

    @wf.step(entry=True)
    def charge(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        if patched and ctx.patched(ASK_FIRST):
            ctx.call(patch_ask, state["order"])
        ctx.call(patch_charge, state["order"])
        return {}, END

    return wf


def old() -> Workflow:
    """v1: pay, then ask a person."""
    wf = Workflow("refund", version="v1")

    @wf.step(entry=True)
    def refund(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.call(patch_pay, state["order"])
        answer = ctx.interrupt("done?")
        if answer == "again":
            ctx.interrupt("really?")
        return {"answer": answer}, END

    return wf


def new(where: str = "before") -> Workflow:
    """v2: a manager's check behind the patch, ``before`` the payment or ``after`` the answer."""
    wf = Workflow("refund", version="v2")

    @wf.step(entry=True)
    def refund(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        took = None
        if where == "before":
            took = ctx.patched(ASK_FIRST)
            if took:
                ctx.call(patch_ask, state["order"])
        ctx.call(patch_pay, state["order"])
        answer = ctx.interrupt("done?")
        if answer == "again":
            ctx.interrupt("really?")
        if where == "after":
            took = ctx.patched(ASK_FIRST)
            if took:
                ctx.call(patch_ask, state["order"])
        return {"answer": answer, "took": took}, END

    return wf


def deprecated() -> Workflow:
    """v3: the old path gone, the patch deprecated."""
    wf = Workflow("refund", version="v3")

    @wf.step(entry=True)
    def refund(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.deprecate_patch(ASK_FIRST)
        ctx.call(patch_ask, state["order"])
        ctx.call(patch_pay, state["order"])
        answer = ctx.interrupt("done?")
        return {"answer": answer, "took": True}, END

    return wf


if __name__ == "__main__":
    import savegame

    url, run_id = sys.argv[1], sys.argv[2]
    os.environ["PATCH_KILL_AFTER_ASK"] = "1"
    savegame.run(new("before"), {"order": "o-1"}, store=url, run_id=run_id)
    sys.exit("not killed")
