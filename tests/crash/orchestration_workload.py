"""Workflows that wait (events, timers, child runs) for the crash tests, and their world.

The outside world is a SQLite file the test owns (``SAVEGAME_WORLD``): ``record`` writes
a row per real execution, so the test counts what happened across process deaths.

``SAVEGAME_HOOK=<name>`` makes the process print ``HOOK <name>`` and block on stdin at
that point, so the parent's SIGKILL lands exactly there:
``event-taken`` (an event is settled taken by a wait, the wait not settled yet: between
the two writes), ``after-wait`` (the wait answered, the step's checkpoint not written),
``sleep-recorded`` (a sleep's wake-up time journaled, the run not yet checkpointed waiting),
``child-intent`` (a child's id journaled, the child not created), ``child-created`` (the
child created, its entry in the parent not settled), ``child-recorded`` (a child's write
happened, its step not checkpointed), ``mid-gather`` (three of a gather's calls made).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import time
from typing import Any

from savegame import END, StepContext, Workflow, tool
from savegame.effects import Journal
from savegame.model import EffectKind, EffectStatus
from savegame.runtime import _children

State = dict[str, Any]


def hook(name: str) -> None:
    if os.environ.get("SAVEGAME_HOOK") == name:
        sys.stdout.write(f"HOOK {name}\n")
        sys.stdout.flush()
        sys.stdin.readline()


def _stop_after(
    method: str, kind: EffectKind, name: str, status: EffectStatus | None = None
) -> None:
    """Make ``Journal.<method>`` of an entry of ``kind`` (settled to ``status``) stop at hook ``name``."""
    original = getattr(Journal, method)

    def hooked(self: Journal, effect: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(self, effect, *args, **kwargs)
        if effect.kind is kind and (status is None or args[:1] == (status,)):
            hook(name)
        return out

    setattr(Journal, method, hooked)


def _stop_after_child_created() -> None:
    start_run = _children.start_run

    def created(*args: Any, **kwargs: Any) -> Any:
        out = start_run(*args, **kwargs)
        hook("child-created")
        return out

    _children.start_run = created  # type: ignore[assignment]


# A wait took an event (the first of its two writes); a sleep's wake-up time was
# committed; a child's id was journaled; a child was created.
_stop_after("settle", EffectKind.EVENT, "event-taken", EffectStatus.DONE)
_stop_after("intent", EffectKind.SLEEP, "sleep-recorded")
_stop_after("intent", EffectKind.CHILD, "child-intent")
_stop_after_child_created()


def world() -> sqlite3.Connection:
    conn = sqlite3.connect(os.environ["SAVEGAME_WORLD"], timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS records (request_id TEXT, body TEXT, at REAL)")
    return conn


def records(path: str) -> list[tuple[str, str]]:
    if not os.path.exists(path):
        return []
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT request_id, body FROM records ORDER BY at").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


@tool(effect="write", idempotent=True)
def record(body: str, *, request_id: str) -> str:
    """A write to the outside world; idempotent by request id, as a provider would be."""
    return _record(body, request_id)


orders = Workflow("orders")


@orders.step(entry=True)
def first_order(state: State, ctx: StepContext) -> tuple[State, str]:
    order = ctx.wait_for("order")
    hook("after-wait")
    return {"first": ctx.call(record, f"first {order}")}, "second_order"


@orders.step()
def second_order(state: State, ctx: StepContext) -> tuple[State, str]:
    order = ctx.wait_for("order")
    hook("after-wait")
    return {"second": ctx.call(record, f"second {order}")}, END


naps = Workflow("naps")


@naps.step(entry=True)
def nap(state: State, ctx: StepContext) -> tuple[State, str]:
    ctx.sleep(state["nap"])
    return {"woke": ctx.call(record, "woke")}, END


sub = Workflow("sub")


@sub.step(entry=True)
def sub_work(state: State, ctx: StepContext) -> tuple[State, str]:
    done = ctx.call(record, f"child {state['n']}")
    hook("child-recorded")
    return {"done": done}, END


boss = Workflow("boss")


@boss.step(entry=True)
def boss_plan(state: State, ctx: StepContext) -> tuple[State, str]:
    return {"kids": [ctx.start_child(sub, {"n": n}) for n in range(3)]}, "boss_gather"


@boss.step()
def boss_gather(state: State, ctx: StepContext) -> tuple[State, str]:
    results = ctx.wait_children(state["kids"])
    return {"result": ctx.call(record, "boss " + ",".join(r["done"] for r in results))}, END


def executions(path: str) -> dict[str, int]:
    """How often each request id was really executed (not deduplicated)."""
    if not os.path.exists(path):
        return {}
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT request_id, count(*) FROM executions GROUP BY request_id")
        return dict(rows.fetchall())
    except sqlite3.OperationalError:
        return {}
    finally:
        conn.close()


@tool(effect="write", idempotent=True)
async def record_slowly(body: str, delay: float, *, request_id: str) -> str:
    """``record``, after a wait, every execution counted (the idempotent provider keeps one)."""
    await asyncio.sleep(delay)
    conn = world()
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS executions (request_id TEXT, at REAL)")
        conn.execute("INSERT INTO executions VALUES (?, ?)", (request_id, time.time()))
    finally:
        conn.close()
    recorded = _record(body, request_id)
    if len(executions(os.environ["SAVEGAME_WORLD"])) == 3:
        hook("mid-gather")  # three of the eight calls made, the others in flight or not begun
    return recorded


def _record(body: str, request_id: str) -> str:
    conn = world()
    try:
        conn.execute("BEGIN IMMEDIATE")
        if not conn.execute("SELECT 1 FROM records WHERE request_id = ?", (request_id,)).fetchone():
            conn.execute("INSERT INTO records VALUES (?, ?, ?)", (request_id, body, time.time()))
        conn.execute("COMMIT")
    finally:
        conn.close()
    return body


fanout = Workflow("fanout")


@fanout.step(entry=True)
async def fan(state: State, ctx: StepContext) -> tuple[State, str]:
    async def branch(c: StepContext, k: int) -> list[str]:
        first = await c.acall(record_slowly, f"{k}a", 0.05 * (4 - k))
        return [first, await c.acall(record_slowly, f"{k}b", 0.05 * k)]

    return {"got": await ctx.map(branch, range(4))}, END
