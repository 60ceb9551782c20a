"""The workflow tests/adversarial/test_resume_race.py resumes from two processes.

Its second step SIGKILLs the process that runs it while ``SG_RACE_KILL`` is set, so the
run is left running with a dead owner's lease. While ``SG_RACE_HOLD`` is set, importing
this module (which ``resume`` does between reading the run and taking its lease: a slow
import) says so on stdout and waits for a line on stdin: the test decides when it ends.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from savegame import END, Workflow

if os.environ.get("SG_RACE_HOLD"):
    print("importing the workflow", flush=True)
    sys.stdin.readline()

wf = Workflow("resume_race")


@wf.step(entry=True)
def tick(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], Any]:
    n = state.get("n", 0) + 1
    if n == 2 and os.environ.get("SG_RACE_KILL"):
        os.kill(os.getpid(), signal.SIGKILL)
    return {"n": n}, ("tick" if n < 3 else END)
