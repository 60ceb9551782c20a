"""Where a SQLite batch's time goes when 64 runs share one event loop (issue 34, row 4).

Row 4 compares 64 concurrent ``arun`` calls on a SQLite file with the same runs on
``memory://``, which does its puts on the loop itself, where SQLite's go to an io thread.
This times each batch the loop's committer writes, in wall time and in
the io thread's own CPU time (``time.thread_time``), split into its statements (a
savepoint, the head's UPDATE and the INSERT a put) and its COMMIT (the WAL frames and
the fsync, the GIL released), and counts the process's context switches a checkpoint.
Wall time in the statements beyond their CPU is the io thread waiting for the GIL,
which the loop holds while it encodes the other runs' steps: ``sqlite3`` releases it
around every statement and must take it back after each.

    python benchmarks/batch_gil.py --rounds 3                 # ~5 s

(Not callgrind: its ``--toggle-collect`` counts only the thread that entered the
function, so the io thread's puts would go uncounted.)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import tempfile
import threading
import time
from typing import Any

from step_cpu import _warm, append

import savegame
from savegame.stores.sqlite import SqliteStore

#: Per batch: its puts, then wall and io-thread CPU seconds of its statements and of its
#: COMMIT.
Batches = list[tuple[int, float, float, float, float]]


def _instrument(store: SqliteStore, batches: Batches) -> None:
    """Time ``store``'s batches: its transaction's enter and exit, inside each call of
    ``put_checkpoints`` (the committer's), per thread."""
    local = threading.local()
    make_tx, put_checkpoints = store._tx, store.put_checkpoints

    class Timed:
        def __init__(self) -> None:
            self.tx = make_tx()

        def __enter__(self) -> Any:
            conn = self.tx.__enter__()
            local.marks = [(time.perf_counter(), time.thread_time())]
            return conn

        def __exit__(self, *exc: Any) -> Any:
            local.marks.append((time.perf_counter(), time.thread_time()))
            try:
                return self.tx.__exit__(*exc)
            finally:
                local.marks.append((time.perf_counter(), time.thread_time()))

    def timed_puts(puts: Any) -> Any:
        store._tx = Timed  # type: ignore[method-assign]
        try:
            return put_checkpoints(puts)
        finally:
            store._tx = make_tx  # type: ignore[method-assign]
            (w0, c0), (w1, c1), (w2, c2) = local.marks
            batches.append((len(puts), w1 - w0, c1 - c0, w2 - w1, c2 - c1))

    store.put_checkpoints = timed_puts  # type: ignore[method-assign]


def one_round(url: str, runs: int, steps: int) -> dict[str, float]:
    """The round's rates, and on SQLite its batches' times."""
    store = savegame.open_store(url)
    savegame.run(append, {"steps": 3}, store=store)  # tables, imports, caches
    batches: Batches = []
    if isinstance(store, SqliteStore):
        _instrument(store, batches)

    async def many() -> None:
        await asyncio.gather(
            *(savegame.arun(append, {"steps": steps}, store=store) for _ in range(runs))
        )

    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    asyncio.run(many())
    wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
    store.close()
    n = runs * steps
    out = {
        "checkpoints/s": n / wall,
        "user CPU ms/checkpoint": (after.ru_utime - before.ru_utime) * 1e3 / n,
        "system CPU ms/checkpoint": (after.ru_stime - before.ru_stime) * 1e3 / n,
        "context switches/checkpoint": (
            after.ru_nvcsw - before.ru_nvcsw + after.ru_nivcsw - before.ru_nivcsw
        )
        / n,
    }
    if batches:
        puts = sum(row[0] for row in batches)
        out["puts a batch (median)"] = statistics.median(row[0] for row in batches)
        for i, what in enumerate(
            ("statements, wall", "statements, io CPU", "COMMIT, wall", "COMMIT, io CPU"), 1
        ):
            out[f"{what} ms/put"] = sum(row[i] for row in batches) * 1e3 / puts
    return out


def _url(kind: str, tmp: str) -> str:
    return "memory://" if kind == "memory" else f"sqlite:///{tmp}/batch.db"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    _warm(args.steps)
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}; {args.runs} runs")
    got: dict[str, dict[str, list[float]]] = {"memory": {}, "sqlite": {}}
    for _ in range(args.rounds):
        for kind in got:
            with tempfile.TemporaryDirectory() as tmp:
                row = one_round(_url(kind, tmp), args.runs, args.steps)
            for key, value in row.items():
                got[kind].setdefault(key, []).append(value)
    for kind, rows in got.items():
        print(f"\n{kind} (median of {args.rounds} rounds)")
        for key, values in rows.items():
            print(f"  {key:34} {statistics.median(values):10.4f}")


if __name__ == "__main__":
    main()
