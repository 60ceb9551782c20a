"""The demo's worker process: run or resume the refund agent, reporting on stdout.

Each event is one JSON line (``step``, ``checkpoint``, ``paused``, ``done``).
With ``--pause-after K`` the process stops dead right after checkpoint K is
committed and waits there, so the parent's SIGKILL lands at a known step
boundary instead of wherever the scheduler happens to be.

    python -m savegame.demo.child start --store URL --pause-after 4
    python -m savegame.demo.child resume --store URL RUN_ID
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import orjson

import savegame
from savegame.model import CheckpointHeader

#: How long a paused child waits for its SIGKILL before giving up on its own.
PAUSE_LIMIT = 30.0
#: Exit code of a paused child that was never killed.
EXIT_NOT_KILLED = 3


def emit(event: str, **fields: Any) -> None:
    line = orjson.dumps({"event": event, "pid": os.getpid(), **fields})
    sys.stdout.write(line.decode() + "\n")
    sys.stdout.flush()


def observer(pause_after: int | None) -> savegame.Observer:
    def on_step(run_id: str, step: int, node: str) -> None:
        emit("step", run_id=run_id, step=step, node=node)

    def on_checkpoint(header: CheckpointHeader, seconds: float) -> None:
        emit(
            "checkpoint",
            run_id=header.run_id,
            step=header.step,
            node=header.node,
            checkpoint_id=header.checkpoint_id,
            size=header.size,
            ms=seconds * 1000,
            status=header.status.value,
            next=header.next,
        )
        if pause_after is not None and header.step == pause_after:
            emit("paused", run_id=header.run_id, step=header.step)
            time.sleep(PAUSE_LIMIT)
            os._exit(EXIT_NOT_KILLED)

    return savegame.Observer(on_step=on_step, on_checkpoint=on_checkpoint)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m savegame.demo.child")
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("start", help="start a new run of the refund agent")
    start.add_argument("--store", required=True)
    start.add_argument("--pause-after", type=int, default=None)
    again = commands.add_parser("resume", help="resume a run from its latest checkpoint")
    again.add_argument("--store", required=True)
    again.add_argument("run_id")
    args = parser.parse_args(argv)
    if args.command == "start":
        from savegame.demo.refund import QUESTION, agent

        result = savegame.run(
            agent, {"input": QUESTION}, store=args.store, observer=observer(args.pause_after)
        )
    else:
        # No workflow passed: resume imports it from the reference stored with the run.
        result = savegame.resume(args.run_id, store=args.store, observer=observer(None))
    emit(
        "done",
        run_id=result.run_id,
        status=result.status.value,
        step=result.step,
        checkpoint_id=result.checkpoint_id,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
