"""Start, resume or compensate the effects workload in a child process.

Usage: effects_child.py start|resume|compensate STORE_URL RUN_ID
Prints ``DONE <status>`` at the end, or ``ERROR <ClassName>`` for a savegame error.
"""

from __future__ import annotations

import os
import sys

from savegame import SavegameError, compensate, resume, run
from savegame.runtime import load

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    mode, url, run_id = sys.argv[1:4]
    try:
        if mode == "start":
            wf = load(os.path.join(HERE, "effects_workload.py") + ":wf")
            result = run(wf, {"order_id": "A-7"}, run_id=run_id, store=url)
        elif mode == "resume":
            result = resume(run_id, store=url)
        else:
            load(os.path.join(HERE, "effects_workload.py") + ":wf")  # registers the tools
            result = compensate(run_id, store=url)
    except SavegameError as exc:
        sys.stdout.write(f"ERROR {type(exc).__name__} {exc}\n")
        sys.stdout.flush()
        return
    sys.stdout.write(f"DONE {result.status.value}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
