"""Start or resume a retry workload in a child process.

Usage: retry_child.py start|resume STORE_URL RUN_ID (the workflow: $RETRY_FLOW)
Prints ``HOOK backoff`` when a wait between attempts begins (after the failed attempt
is journaled), then ``DONE <status>`` or ``ERROR <ClassName> ...`` at the end.
"""

from __future__ import annotations

import os
import sys

from stamina.instrumentation import RetryDetails, set_on_retry_hooks

from savegame import SavegameError, resume, run
from savegame.runtime import load

HERE = os.path.dirname(os.path.abspath(__file__))


def announce(details: RetryDetails) -> None:
    sys.stdout.write("HOOK backoff\n")
    sys.stdout.flush()


def main() -> None:
    mode, url, run_id = sys.argv[1:4]
    set_on_retry_hooks([announce])
    try:
        if mode == "start":
            wf = load(os.path.join(HERE, "retry_workload.py") + ":" + os.environ["RETRY_FLOW"])
            result = run(wf, {}, run_id=run_id, store=url)
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
