"""The group-commit crash workload: each step appends its number; 12 steps (sync and async)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from savegame import END, Workflow

STEPS = 12

wf = Workflow("group-crash")


@wf.step(entry=True)
def tick(state: dict[str, Any], ctx: object) -> tuple[dict[str, Any], str]:
    n = state.get("n", 0) + 1
    time.sleep(0.002)  # a little work: the runs' boundaries drift in and out of step
    return {"n": n, "log": [*state.get("log", []), n]}, ("tick" if n < STEPS else END)


awf = Workflow("group-crash")
"""The same workflow with an async step, for runs on one event loop (``arun``)."""


@awf.step(entry=True, name="tick")
async def atick(state: dict[str, Any], ctx: object) -> tuple[dict[str, Any], str]:
    n = state.get("n", 0) + 1
    await asyncio.sleep(0.002)
    return {"n": n, "log": [*state.get("log", []), n]}, ("tick" if n < STEPS else END)


EXPECTED = {"n": STEPS, "log": list(range(1, STEPS + 1))}
