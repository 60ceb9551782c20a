"""An approval that expires while the worker that should apply it is SIGKILLed.

A run books a seat (a write with a compensation), then asks a person to approve a
payment that expires at once (``on_expiry="reject"``); the rejection fails the run and
``compensate_on_failure`` releases the seat. The seat's booking and release write to an
outside ledger the test owns (``SAVEGAME_WORLD``, a SQLite file), so the test counts
what happened in the world across process deaths.

``python expiry_workload.py URL`` runs a worker until the store has nothing left to do.
``SAVEGAME_HOOK=<name>`` makes it print ``HOOK <name>`` and block at that point, so the
test's SIGKILL lands exactly there: ``rejected`` (the expiry is committed, the step has
not failed yet), ``release:after_call`` (the compensation happened, its result is not
journaled).
"""

from __future__ import annotations

import os
import sqlite3
import sys
from datetime import timedelta
from typing import Any

from savegame import END, StepContext, Workflow, tool
from savegame.errors import ApprovalRejected

EXPIRES = timedelta(seconds=1)


def hook(name: str) -> None:
    if os.environ.get("SAVEGAME_HOOK") == name:
        sys.stdout.write(f"HOOK {name}\n")
        sys.stdout.flush()
        sys.stdin.readline()


def world() -> sqlite3.Connection:
    conn = sqlite3.connect(os.environ["SAVEGAME_WORLD"], timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS executions (tool TEXT, request_id TEXT)")
    conn.execute("CREATE TABLE IF NOT EXISTS applied (request_id TEXT PRIMARY KEY, tool TEXT)")
    return conn


def execute(tool_name: str, request_id: str) -> None:
    """The outside effect: every execution is logged, applied once per request id (the
    provider deduplicates, as an idempotent tool's provider does)."""
    conn = world()
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO executions VALUES (?, ?)", (tool_name, request_id))
        conn.execute("INSERT OR IGNORE INTO applied VALUES (?, ?)", (request_id, tool_name))
        conn.execute("COMMIT")
    finally:
        conn.close()


@tool(effect="write", idempotent=True, compensate="release_seat_x", name="book_seat_x")
def book_seat(seat: str, *, request_id: str) -> str:
    execute("book", request_id)
    return seat


@tool(effect="write", idempotent=True, name="release_seat_x")
def release_seat(seat: str, *, result: str, request_id: str) -> str:
    execute("release", request_id)
    hook("release:after_call")
    return f"released {result}"


@tool(effect="write", approval=True, expires=EXPIRES, name="pay_fare_x")
def pay_fare(amount: int, *, request_id: str) -> int:
    execute("pay", request_id)
    return amount


wf = Workflow("expiry-crash", compensate_on_failure=True)


@wf.step(entry=True)
def book(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"seat": ctx.call(book_seat, state["seat"])}, "pay"


@wf.step
def pay(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    try:
        return {"paid": ctx.call(pay_fare, amount=state["amount"])}, END
    except ApprovalRejected:
        hook("rejected")
        raise


if __name__ == "__main__":
    from savegame import Worker

    # A short lease: the next worker takes a killed one's run over within a second.
    Worker(sys.argv[1], poll=0.02, lease_ttl=1).run(idle_exit=float(sys.argv[2]))
