"""A LangGraph migration in a child process, killed with SIGKILL at the n-th call of one
target store method (``put_checkpoint`` 4: in the middle of a thread), or left to run.

    python migrate_workload.py SOURCE TARGET_URL METHOD N [GO_FILE]

``N`` 0 kills nowhere. ``GO_FILE``: wait until it exists before starting (two children
released together). Prints the report's results as JSON lines: ``RESULT <json>``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

import orjson

from savegame.langgraph import migrate
from savegame.stores import open_store


def dying(store: Any, method: str, nth: int) -> None:
    real = getattr(store, method)
    calls = []

    def call(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == nth:
            os.kill(os.getpid(), signal.SIGKILL)  # in the middle of the migration's writes
        return real(*args, **kwargs)

    setattr(store, method, call)


def main() -> None:
    source, target, method, nth = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if len(sys.argv) > 5:
        while not os.path.exists(sys.argv[5]):
            time.sleep(0.01)
    store = open_store(target)
    if nth:
        dying(store, method, nth)
    report = migrate(source, store)
    for result in report.results:
        print("RESULT", orjson.dumps({"thread": result.thread_id, "status": result.status,
                                      "reason": result.reason}).decode(), flush=True)  # fmt: skip
    store.close()


if __name__ == "__main__":
    main()
