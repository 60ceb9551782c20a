"""Start or resume the ADK bank agent's run (``bank.py``) in a child process.

Usage: SAVEGAME_MODEL_URL=... SAVEGAME_LEDGER=... child.py start|resume STORE_URL RUN_ID
Prints ``READY`` once the agent is loaded (ADK imported: most of the process's life),
then ``DONE <status>``, or ``ERROR <ClassName>`` for a savegame error.
"""

from __future__ import annotations

import json
import os
import sys

from savegame import SavegameError, resume, run
from savegame.runtime import load

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    mode, url, run_id = sys.argv[1:4]
    workflow = load(os.path.join(HERE, "bank.py:flow"))
    given = json.loads(os.environ.get("SAVEGAME_INPUT", '{"question": "hi"}'))
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    try:
        if mode == "start":
            result = run(workflow, given, run_id=run_id, store=url)
        else:
            result = resume(run_id, store=url, workflow=workflow)
    except SavegameError as exc:
        sys.stdout.write(f"ERROR {type(exc).__name__} {exc}\n")
        sys.stdout.flush()
        return
    sys.stdout.write(f"DONE {result.status.value}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
