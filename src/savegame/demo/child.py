"""The demo's worker process: run or resume the refund agent, reporting on stdout.

Each event is one JSON line (``step``, ``checkpoint``, ``hang``, ``done``).
With ``--hang-in TOOL`` the process stops dead inside that tool, right after
the tool has acted on the outside world and before savegame records its
result, and waits there: the parent's SIGKILL lands at that exact point
instead of wherever the scheduler happens to be.

    python -m savegame.demo.child start --store URL --world PATH
    python -m savegame.demo.child resume --store URL --world PATH [--hang-in TOOL] RUN_ID
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

#: How long a hanging child waits for its SIGKILL before giving up on its own.
HANG_LIMIT = 30.0
#: Exit code of a hanging child that was never killed.
EXIT_NOT_KILLED = 3


def emit(event: str, **fields: Any) -> None:
    line = orjson.dumps({"event": event, "pid": os.getpid(), **fields})
    sys.stdout.write(line.decode() + "\n")
    sys.stdout.flush()


def observer() -> savegame.client.Observer:
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

    return savegame.client.Observer(on_step=on_step, on_checkpoint=on_checkpoint)


def hang_in(name: str) -> None:
    """Make tool ``name`` stop dead once it has acted, before its result is journaled."""
    from savegame.demo import refund

    def hang(tool: str, request_id: str) -> None:
        if tool == name:
            emit("hang", tool=tool, request_id=request_id)
            time.sleep(HANG_LIMIT)
            os._exit(EXIT_NOT_KILLED)

    refund.after_effect = hang


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m savegame.demo.child")
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("start", help="start a new run of the refund agent")
    again = commands.add_parser("resume", help="resume a run from its latest checkpoint")
    again.add_argument("run_id")
    again.add_argument("--hang-in", metavar="TOOL", default=None)
    for sub in (start, again):
        sub.add_argument("--store", required=True)
        sub.add_argument("--world", required=True, help="the outside-world SQLite file")
    args = parser.parse_args(argv)
    from savegame.demo import refund

    refund.use_world(args.world)
    if args.command == "start":
        result = savegame.run(
            refund.agent, {"input": refund.QUESTION}, store=args.store, observer=observer()
        )
    else:
        if args.hang_in:
            hang_in(args.hang_in)
        # No workflow passed: resume imports it from the reference stored with the run.
        result = savegame.resume(args.run_id, store=args.store, observer=observer())
    emit(
        "done",
        run_id=result.run_id,
        status=result.status.value,
        step=result.step,
        checkpoint_id=result.checkpoint_id,
        interrupt_id=result.interrupt_id,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
