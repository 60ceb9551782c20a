"""Workloads for the orchestration fleet tests: a scheduled tick, a durable nap, a planner
with three children that each pay once.

Each writes what it did to the outside SQLite file ``SAVEGAME_WORLD`` (shared by every
test host through the filesystem), so the test counts executions outside the store.
"""

from __future__ import annotations

import os
import sqlite3
import time
from datetime import datetime, timezone
from typing import Any

from savegame import END, StepContext, Workflow, tool


def world() -> sqlite3.Connection:
    conn = sqlite3.connect(os.environ["SAVEGAME_WORLD"], timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS ticks (run_id TEXT, host TEXT, pid INTEGER)")
    conn.execute("CREATE TABLE IF NOT EXISTS wakes (run_id TEXT, due REAL, woke REAL, host TEXT)")
    conn.execute("CREATE TABLE IF NOT EXISTS child_steps (run_id TEXT, step INTEGER, host TEXT)")
    conn.execute("CREATE TABLE IF NOT EXISTS attempts (request_id TEXT, child TEXT)")
    conn.execute("CREATE TABLE IF NOT EXISTS payments (request_id TEXT PRIMARY KEY, child TEXT)")
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


@tool(effect="write", idempotent=True)
def pay(child: str, *, request_id: str) -> str:
    """The provider deduplicates on request_id; every attempt is noted, and each real payment."""
    _note("INSERT INTO attempts VALUES (?, ?)", (request_id, child))
    _note("INSERT OR IGNORE INTO payments VALUES (?, ?)", (request_id, child))
    return request_id


child = Workflow("fleet-child")


@child.step(entry=True)
def part(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    _note(
        "INSERT INTO child_steps VALUES (?, ?, ?)",
        (ctx.run_id, ctx.step, os.environ.get("SAVEGAME_HOST", "")),
    )
    time.sleep(0.2)
    done = state.get("done", 0) + 1
    update: dict[str, Any] = {"done": done}
    if done == 2:
        update["paid"] = ctx.call(pay, ctx.run_id)
    return update, ("part" if done < 5 else END)


planner = Workflow("fleet-planner")


@planner.step(entry=True)
def plan(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"kids": [ctx.start_child(child, {"n": i}) for i in range(3)]}, "collect"


@planner.step()
def collect(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    ends = ctx.wait_children(state["kids"])
    return {"total": sum(e["done"] for e in ends), "paid": sorted(e["paid"] for e in ends)}, END
