"""The workload the fleet test runs on several workers: slow steps and one paid side effect.

Every step execution and every real charge is written to an outside SQLite file
(``SAVEGAME_WORLD``, shared by all test hosts through the filesystem) so the test
can see which process ran what, and that each charge happened exactly once.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

from savegame import END, StepContext, Workflow, tool

STEP_SECONDS = float(os.environ.get("SAVEGAME_FLEET_STEP", "0.15"))


def world() -> sqlite3.Connection:
    conn = sqlite3.connect(os.environ["SAVEGAME_WORLD"], timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS steps (run_id TEXT, step INTEGER, pid INTEGER, host TEXT)"
    )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS charges (request_id TEXT PRIMARY KEY, run_id TEXT, pid INTEGER)"
    )
    conn.execute("CREATE TABLE IF NOT EXISTS attempts (request_id TEXT, pid INTEGER)")
    return conn


def note_step(ctx: StepContext) -> None:
    conn = world()
    try:
        conn.execute(
            "INSERT INTO steps VALUES (?, ?, ?, ?)",
            (ctx.run_id, ctx.step, os.getpid(), os.environ.get("SAVEGAME_HOST", "")),
        )
    finally:
        conn.close()


@tool(effect="write", idempotent=True)
def charge(order: str, amount: int, *, request_id: str) -> dict[str, Any]:
    """The payment provider deduplicates on request_id, as real ones do."""
    conn = world()
    try:
        conn.execute("INSERT INTO attempts VALUES (?, ?)", (request_id, os.getpid()))
        conn.execute(
            "INSERT OR IGNORE INTO charges VALUES (?, ?, ?)", (request_id, order, os.getpid())
        )
    finally:
        conn.close()
    return {"order": order, "amount": amount, "request_id": request_id}


wf = Workflow("fleet-order")


@wf.step(entry=True)
def work(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    note_step(ctx)
    time.sleep(STEP_SECONDS)
    done = state.get("done", 0) + 1
    update: dict[str, Any] = {"done": done, "trail": [*state.get("trail", []), done]}
    if done == 3:
        update["receipt"] = ctx.call(charge, state["order"], amount=100 + done)
    return update, ("work" if done < 6 else END)
