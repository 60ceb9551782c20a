"""Run the fork workload in a child process: ``start``, ``fork CHECKPOINT`` or ``resume``.

Usage: fork_child.py start|fork|resume STORE_URL RUN_ID|CHECKPOINT_ID. Prints ``CP <step>
<checkpoint id>`` per committed checkpoint, ``FORK <run id>`` once the fork exists, and
``DONE <status>`` at the end.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from savegame import resume, run  # noqa: E402
from savegame.client import Observer, fork  # noqa: E402
from savegame.model import CheckpointHeader  # noqa: E402
from tests.crash.fork_workload import wf  # noqa: E402


def _committed(header: CheckpointHeader, seconds: float) -> None:
    if header.step == 0 or header.metadata.get("fork"):
        sys.stdout.write(f"FORK {header.run_id}\n")
    sys.stdout.write(f"CP {header.step} {header.checkpoint_id}\n")
    sys.stdout.flush()


def main() -> None:
    mode, url, ident = sys.argv[1:4]
    observer = Observer(on_checkpoint=_committed)
    if mode == "start":
        status = run(wf, {}, run_id=ident, store=url, observer=observer).status
    elif mode == "fork":
        result = fork(ident, store=url, workflow=wf, observer=observer).result
        assert result is not None
        status = result.status
    else:
        status = resume(ident, store=url, workflow=wf, observer=observer).status
    sys.stdout.write(f"DONE {status.value}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
