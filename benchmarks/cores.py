"""How much of the machine 64 runs on PostgreSQL use, in one process and in four.

Issue 34's row 8 asks four worker processes for 1.5x one process's checkpoints a second.
On a machine whose cores the clients share with the server, that is bounded by the
cores: this reads the whole machine's busy time (``/proc/stat``, Linux) around
``concurrency.py``'s one-process and four-process rows, and prints it in cores beside
the rate. Busy time covers the call, so the four processes' start-up (imports, first
connections) is counted too: an upper bound for them.

    python benchmarks/cores.py --rounds 3          # ~10 s, needs the test PostgreSQL
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

from concurrency import Row, savegame_processes_row, savegame_row

from stores import fresh_postgres


def _busy() -> tuple[int, int]:
    with open("/proc/stat") as stat:
        ticks = [int(v) for v in stat.readline().split()[1:]]
    return sum(ticks), ticks[3] + ticks[4]  # all, idle + iowait


def cores_used(measure: Callable[[], Row]) -> tuple[Row, float]:
    """The row, and the machine's cores kept busy while it ran."""
    total, idle = _busy()
    row = measure()
    total2, idle2 = _busy()
    return row, (1 - (idle2 - idle) / (total2 - total)) * (os.cpu_count() or 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--processes", type=int, default=4)
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")
    for _ in range(args.rounds):
        with fresh_postgres() as url:
            one, busy = cores_used(lambda: savegame_row("PostgreSQL", url, args.runs, args.steps))
        with fresh_postgres() as url:
            many, busy_many = cores_used(
                lambda: savegame_processes_row(url, args.runs, args.steps, args.processes)
            )
        print(
            f"1 process: {one.per_second:6.0f} checkpoints/s, {busy:.2f} cores busy;"
            f" {args.processes} processes: {many.per_second:6.0f}/s, {busy_many:.2f} cores"
        )
        time.sleep(0.5)


if __name__ == "__main__":
    main()
