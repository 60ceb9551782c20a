"""Start, resume or compensate a workload of this folder in a child process.

Usage: [SAVEGAME_WORKLOAD=file.py:name] [SAVEGAME_INPUT=json] [SAVEGAME_WAIT=1] effects_child.py
start|resume|compensate STORE_URL RUN_ID (the effects workload and its order by default).
Prints ``DONE <status>`` at the end, or ``ERROR <ClassName>`` for a savegame error.
"""

from __future__ import annotations

import json
import os
import sys

from savegame import SavegameError, resume, run
from savegame.client import compensate
from savegame.runtime import load

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    mode, url, run_id = sys.argv[1:4]
    workload = os.path.join(HERE, os.environ.get("SAVEGAME_WORKLOAD", "effects_workload.py:wf"))
    given = json.loads(os.environ.get("SAVEGAME_INPUT", '{"order_id": "A-7"}'))
    wait = os.environ.get("SAVEGAME_WAIT") == "1"  # block while the run waits (a sleep ...)
    try:
        if mode == "start":
            result = run(load(workload), given, run_id=run_id, store=url, wait=wait)
        elif mode == "resume":
            result = resume(run_id, store=url, wait=wait)
        else:
            load(workload)  # registers the tools
            result = compensate(run_id, store=url)
    except SavegameError as exc:
        sys.stdout.write(f"ERROR {type(exc).__name__} {exc}\n")
        sys.stdout.flush()
        return
    sys.stdout.write(f"DONE {result.status.value}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
