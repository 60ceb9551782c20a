"""The workload the crash tests kill: ten steps over a state that grows each step.

Deterministic: every value is a function of the state, so a resumed run must end
byte for byte where an uninterrupted one does. Each step sleeps a little and the
state carries a few hundred KB so that random kills land inside steps and inside
checkpoint writes alike.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any

from savegame import END, StepContext, Workflow

STEPS = 10
SLEEP = float(os.environ.get("SAVEGAME_CRASH_SLEEP", "0.004"))

wf = Workflow("crash-workload")


def _digest(*parts: Any) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()


@wf.step(entry=True)
def plan(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    time.sleep(SLEEP)
    return {
        "plan": [f"task-{i}" for i in range(STEPS - 1)],
        "cursor": 0,
        "log": [],
        "acc": "0",
    }, "work"


@wf.step
def work(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    time.sleep(SLEEP)
    cursor = state["cursor"]
    task = state["plan"][cursor]
    acc = _digest(state["acc"], task, len(state["log"]))
    # ~24 KB per step: the state reaches a few hundred KB by the end.
    entry = {"task": task, "acc": acc, "blob": acc * 384, "step": ctx.step}
    update = {"cursor": cursor + 1, "log": [*state["log"], entry], "acc": acc}
    return update, ("work" if cursor + 1 < len(state["plan"]) else END)
