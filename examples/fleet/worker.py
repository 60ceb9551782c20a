"""A worker inside your own process, as an application's process can be its worker:

    python worker.py             # Worker(...).run(): works until SIGTERM or Ctrl-C
    python worker.py --async     # await worker.arun(), as an asyncio app would
    python worker.py --idle 2    # stop once nothing was runnable for 2 s

It imports each run's ``fleet:wf`` as this process imports anything: this folder is
on its path (``python worker.py`` puts it there).
"""

from __future__ import annotations

import argparse
import asyncio

from savegame import Worker
from savegame.fleet import WorkerStats


async def serve(worker: Worker, idle: float | None) -> WorkerStats:
    # The worker works in its own threads: this loop (your web app, your other tasks)
    # goes on meanwhile. Cancelling this task stops the worker at its steps' boundaries.
    return await worker.arun(idle_exit=idle)


def main() -> None:
    parse = argparse.ArgumentParser(description=__doc__)
    parse.add_argument("--async", dest="use_async", action="store_true", help="use arun()")
    parse.add_argument("--idle", type=float, default=None, metavar="SECONDS")
    args = parse.parse_args()
    worker = Worker(concurrency=2)  # the store: $SAVEGAME_STORE, else sqlite:///savegame.db
    if args.use_async:
        stats = asyncio.run(serve(worker, args.idle))
    else:
        worker.install_signal_handlers()
        stats = worker.run(idle_exit=args.idle)
    print(f"worker stopped: claimed {stats.claimed}, {sorted(set(stats.finished.values()))}")


if __name__ == "__main__":
    main()
