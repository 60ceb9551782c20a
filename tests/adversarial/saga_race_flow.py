"""A saga whose compensations count themselves in an outside ledger (``$SAGA_LEDGER``, a
line per call) and can kill their own process (``$SAGA_KILL_IN_RELEASE``: SIGKILL after
the first release's line is written), for tests/adversarial/test_saga_race.py."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from savegame import StepContext, Worker, Workflow, open_store, run, tool


def _line(text: str) -> None:
    with Path(os.environ["SAGA_LEDGER"]).open("a") as out:
        out.write(text + "\n")
        out.flush()
        os.fsync(out.fileno())


@tool(effect="write", idempotent=True, compensate="race_release", name="race_book")
def race_book(seat: str, *, request_id: str) -> str:
    _line(f"book {seat}")
    return seat


@tool(effect="write", idempotent=True, name="race_release")
def race_release(seat: str, *, result: str, request_id: str) -> str:
    _line(f"release {request_id}")
    if os.environ.pop("SAGA_KILL_IN_RELEASE", None):
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.05)  # a window for another process to try the same compensation
    return f"released {result}"


SAGA = Workflow("race-saga", compensate_on_failure=True)


@SAGA.step(entry=True)
def reserve(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"seats": [ctx.call(race_book, s) for s in ("1A", "1B", "1C", "1D")]}, "charge"


@SAGA.step
def charge(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    raise RuntimeError("card declined")


if __name__ == "__main__":
    url, what = sys.argv[1], sys.argv[2]
    with open_store(url) as store:
        if what == "start":
            run(SAGA, {}, run_id="saga", store=store, lease_ttl=2.0)
        else:
            Worker(store, poll=0.01, lease_ttl=5.0, schedules=False).run(idle_exit=1.5)
