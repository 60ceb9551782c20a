"""Start or resume a run on the local model in a child process (``local_agents.py``).

Usage: SAVEGAME_MODEL_URL=... SAVEGAME_LOCAL_KIND=... local_child.py start|resume STORE RUN_ID
Prints ``DONE <status>``, or ``ERROR <ClassName> <message>`` for a savegame error.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from savegame import SavegameError, resume, run
from tests.models import local_agents


def main() -> None:
    mode, url, run_id = sys.argv[1:4]
    kind = os.environ["SAVEGAME_LOCAL_KIND"]
    workflow = local_agents.workflow(kind, os.environ["SAVEGAME_MODEL_URL"])
    try:
        if mode == "start":
            result = run(workflow, local_agents.given(kind), run_id=run_id, store=url)
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
