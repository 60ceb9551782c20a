"""A workflow with real side effects for the crash tests.

The "outside world" is a SQLite file the test owns (``SAVEGAME_WORLD``): the
payment provider, the mail server and the audit log write to it, so the test
can count real executions across process deaths. Tools sleep briefly so random
kills land inside calls as well as between them.

``SAVEGAME_HOOK=<name>`` makes the process print ``HOOK <name>`` and block on
stdin at that point, so the parent's SIGKILL lands exactly there:
``charge:after_call`` (the charge happened, its result is not journaled yet),
``charge:after_result`` (journaled, the step's checkpoint not written yet),
``refund:after_call`` (a compensation happened, its result not journaled),
``audit:after_call`` (a plain write happened: in doubt, a person must settle it).
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from typing import Any

from savegame import END, StepContext, Workflow, tool

PAUSE = 0.003


def hook(name: str) -> None:
    if os.environ.get("SAVEGAME_HOOK") == name:
        sys.stdout.write(f"HOOK {name}\n")
        sys.stdout.flush()
        sys.stdin.readline()


def world() -> sqlite3.Connection:
    conn = sqlite3.connect(os.environ["SAVEGAME_WORLD"], timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS executions (tool TEXT, request_id TEXT, applied INTEGER, at REAL)"
    )
    conn.execute("CREATE TABLE IF NOT EXISTS ledger (request_id TEXT PRIMARY KEY, body TEXT)")
    return conn


def execute(tool_name: str, request_id: str, body: str, *, dedupe: bool) -> bool:
    """Do the outside effect; an idempotent provider ignores a request id it has seen."""
    conn = world()
    try:
        conn.execute("BEGIN IMMEDIATE")
        seen = conn.execute("SELECT 1 FROM ledger WHERE request_id = ?", (request_id,)).fetchone()
        applied = not (dedupe and seen)
        if applied:
            conn.execute("INSERT OR REPLACE INTO ledger VALUES (?, ?)", (request_id, body))
        conn.execute(
            "INSERT INTO executions VALUES (?, ?, ?, ?)",
            (tool_name, request_id, int(applied), time.time()),
        )
        conn.execute("COMMIT")
        return applied
    finally:
        conn.close()


@tool(effect="read")
def lookup_order(order_id: str) -> dict[str, Any]:
    time.sleep(PAUSE)
    return {"id": order_id, "total": 240, "email": "dana@example.com"}


@tool(effect="write", idempotent=True, compensate="refund", approval=lambda a: a["amount"] > 100)
def charge(order_id: str, amount: int, *, request_id: str) -> dict[str, Any]:
    time.sleep(PAUSE)
    execute("charge", request_id, f"{order_id}:{amount}", dedupe=True)
    time.sleep(PAUSE)
    hook("charge:after_call")
    return {"receipt": f"ch-{order_id}", "amount": amount, "request_id": request_id}


@tool(effect="write", idempotent=True)
def refund(order_id: str, amount: int, *, result: dict[str, Any], request_id: str) -> str:
    time.sleep(PAUSE)
    execute("refund", request_id, result["receipt"], dedupe=True)
    hook("refund:after_call")
    return f"refunded {result['receipt']}"


def mail_sent(request_id: str) -> Any:
    conn = world()
    try:
        row = conn.execute("SELECT body FROM ledger WHERE request_id = ?", (request_id,)).fetchone()
    finally:
        conn.close()
    return None if row is None else {"sent": row[0]}


@tool(effect="write", reconcile=mail_sent)
def send_email(to: str, body: str, *, request_id: str) -> dict[str, Any]:
    time.sleep(PAUSE)
    execute("email", request_id, f"{to}:{body}", dedupe=False)
    time.sleep(PAUSE)
    return {"sent": f"{to}:{body}"}


@tool(effect="write")
def append_audit(entry: str, *, request_id: str) -> str:
    # Neither idempotent nor reconcilable: an in-doubt call needs a person.
    time.sleep(PAUSE)
    execute("audit", request_id, entry, dedupe=False)
    hook("audit:after_call")
    time.sleep(PAUSE)
    return f"audited {entry}"


wf = Workflow("effects-crash")


@wf.step(entry=True)
def plan(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    order = ctx.call(lookup_order, state["order_id"])
    return {"order": order}, "pay"


@wf.step
def pay(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    order = state["order"]
    receipt = ctx.call(charge, order_id=order["id"], amount=order["total"])
    hook("charge:after_result")
    return {"receipt": receipt}, "notify"


@wf.step
def notify(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    mail = ctx.call(
        send_email, state["order"]["email"], body=f"receipt {state['receipt']['receipt']}"
    )
    audit = ctx.call(append_audit, f"paid {state['order']['id']}")
    return {"mail": mail, "audit": audit}, "finish"


@wf.step
def finish(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    time.sleep(PAUSE)
    if os.environ.get("SAVEGAME_FAIL_FINISH"):
        raise RuntimeError("warehouse rejected the order")
    return {"done": True}, END
