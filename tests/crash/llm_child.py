"""Start or resume a run of llm_workload in a child process.

Usage: SAVEGAME_WORKFLOW=ask|search llm_child.py start|resume STORE_URL RUN_ID
Prints ``DONE <status>`` at the end, or ``ERROR <ClassName>`` for a savegame error.
"""

from __future__ import annotations

import os
import sys

from savegame import SavegameError, resume, run
from savegame.runtime import load

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    mode, url, run_id = sys.argv[1:4]
    name = os.environ["SAVEGAME_WORKFLOW"]
    try:
        if mode == "start":
            wf = load(os.path.join(HERE, "llm_workload.py") + ":" + name)
            result = run(wf, {"question": "what is 6 x 7?"}, run_id=run_id, store=url)
        else:
            result = resume(run_id, store=url)
    except SavegameError as exc:
        sys.stdout.write(f"ERROR {type(exc).__name__} {exc}\n")
        sys.stdout.flush()
        return
    sys.stdout.write(f"DONE {result.status.value}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
