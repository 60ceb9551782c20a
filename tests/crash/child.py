"""Runs or resumes the crash workload in a child process, reporting each committed checkpoint.

Usage: child.py start|resume STORE_URL RUN_ID [--block-after STEP]

Prints ``CP <step> <checkpoint_id>`` (flushed) once each checkpoint is committed,
and ``DONE <status>`` at the end. With ``--block-after K`` it stops and waits on
stdin right after checkpoint K is committed, so the parent's SIGKILL lands at
exactly that boundary.
"""

from __future__ import annotations

import os
import sys

from savegame import resume, run
from savegame.client import Observer
from savegame.model import CheckpointHeader
from savegame.runtime import load

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    mode, url, run_id = sys.argv[1:4]
    block_after = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == "--block-after" else None

    def committed(header: CheckpointHeader, seconds: float) -> None:
        sys.stdout.write(f"CP {header.step} {header.checkpoint_id}\n")
        sys.stdout.flush()
        if block_after is not None and header.step == block_after:
            sys.stdin.readline()

    observer = Observer(on_checkpoint=committed)
    if mode == "start":
        wf = load(os.path.join(HERE, "workload.py") + ":wf")
        result = run(wf, {}, run_id=run_id, store=url, observer=observer)
    else:
        result = resume(run_id, store=url, observer=observer)
    sys.stdout.write(f"DONE {result.status.value}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
