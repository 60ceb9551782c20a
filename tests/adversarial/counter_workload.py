"""A workflow whose every step rewrites ``counter.txt`` in place at the same size, for a
kill -9 on a coarse-timestamp filesystem (``test_workspace_same_tick.py``).

The workspace is ``$WS_WORLD/ws``; ``$WS_WORLD/read.jsonl`` (outside it) logs the
counter each step found. With ``SAVEGAME_HOOK=midstep`` step ``KILL_AT`` prints ``HOOK
midstep`` after its write and blocks on stdin, to be killed there.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from savegame import END, StepContext, Workflow

STEPS = 30
KILL_AT = 20


def world() -> Path:
    return Path(os.environ["WS_WORLD"])


wf = Workflow("same-tick-counter", workspace=lambda run_id: world() / "ws")


@wf.step(entry=True)
def count(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    n = state.get("n", 0) + 1
    counter = world() / "ws" / "counter.txt"
    read = int(counter.read_text())
    with (world() / "read.jsonl").open("a") as log:
        log.write(json.dumps({"step": n, "read": read}) + "\n")
    counter.write_text(f"{n:08d}")
    if n == KILL_AT and os.environ.get("SAVEGAME_HOOK") == "midstep":
        sys.stdout.write("HOOK midstep\n")
        sys.stdout.flush()
        sys.stdin.readline()
    return {"n": n}, ("count" if n < STEPS else END)
