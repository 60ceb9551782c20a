"""Workloads for the orchestration fleet tests: a scheduled tick and a durable nap.

Each writes what it did to the outside SQLite file ``SAVEGAME_WORLD`` (shared by every
test host through the filesystem), so the test counts executions outside the store.
"""

from __future__ import annotations

import os
import sqlite3
import time
from datetime import datetime, timezone
from typing import Any

from savegame import END, StepContext, Workflow


def world() -> sqlite3.Connection:
    conn = sqlite3.connect(os.environ["SAVEGAME_WORLD"], timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS ticks (run_id TEXT, host TEXT, pid INTEGER)")
    conn.execute("CREATE TABLE IF NOT EXISTS wakes (run_id TEXT, due REAL, woke REAL, host TEXT)")
    return conn


def _note(sql: str, row: tuple[Any, ...]) -> None:
    conn = world()
    try:
        conn.execute(sql, row)
    finally:
        conn.close()


tick = Workflow("fleet-tick")


@tick.step(entry=True)
def once(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    _note(
        "INSERT INTO ticks VALUES (?, ?, ?)",
        (ctx.run_id, os.environ.get("SAVEGAME_HOST", ""), os.getpid()),
    )
    return {"ticked": True}, END


nap = Workflow("fleet-nap")


@nap.step(entry=True)
def sleep(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    due = float(state["due"])
    ctx.sleep_until(datetime.fromtimestamp(due, timezone.utc))
    woke = time.time()
    _note(
        "INSERT INTO wakes VALUES (?, ?, ?, ?)",
        (ctx.run_id, due, woke, os.environ.get("SAVEGAME_HOST", "")),
    )
    return {"late": woke - due}, END
