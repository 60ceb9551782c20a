"""Drives RUNS concurrent runs on one store handle, so their checkpoints go in shared batches.

Usage: group_child.py run|arun STORE_URL RUNS (the crash harness's mode, url, run id order)

``run``: each run in its own thread (``savegame.run``); ``arun``: all on one event loop
(``savegame.arun``), whose committer hands their saves to an io thread in batches.

Prints ``BATCH <checkpoint id> ...`` (flushed) as each multi-run transaction starts, and
``CP <run id> <step>`` once a checkpoint is committed, then ``DONE``. The parent kills
the process at a random moment after a BATCH line: inside the transaction or right
after its commit.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

import savegame
from savegame.client import Observer
from savegame.model import CheckpointHeader
from savegame.runtime import load
from savegame.stores import Put, PutResult, open_store

HERE = os.path.dirname(os.path.abspath(__file__))
print_lock = threading.Lock()


def say(line: str) -> None:
    with print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def main() -> None:
    mode, url, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store: Any = open_store(url)
    batch = type(store).put_checkpoints

    def announced(self: Any, puts: Sequence[Put]) -> list[PutResult | Exception]:
        say("BATCH " + " ".join(p.record.checkpoint_id for p in puts))
        return batch(self, puts)

    type(store).put_checkpoints = announced
    wf = load(os.path.join(HERE, "group_workload.py") + (":awf" if mode == "arun" else ":wf"))

    def committed(header: CheckpointHeader, seconds: float) -> None:
        say(f"CP {header.run_id} {header.step}")

    def one(i: int) -> None:
        savegame.run(
            wf, {}, run_id=f"g{i}", store=store, observer=Observer(on_checkpoint=committed)
        )

    if mode == "arun":
        watch = Observer(on_checkpoint=committed)

        async def all_runs() -> None:
            await asyncio.gather(
                *(savegame.arun(wf, {}, run_id=f"g{i}", store=store, observer=watch)
                  for i in range(runs))
            )  # fmt: skip

        asyncio.run(all_runs())
        say("DONE")
        return
    threads = [threading.Thread(target=one, args=(i,)) for i in range(runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    say("DONE")


if __name__ == "__main__":
    main()
