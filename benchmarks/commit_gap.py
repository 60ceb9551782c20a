"""What one bare SQLite commit costs when the process does other work between commits.

The per-step target of issue 4 compares savegame's step with the floor of
``checkpoint_overhead.py``: one 2 KB INSERT and one COMMIT (WAL,
``synchronous=FULL``) in a tight loop. A real step spends CPU time between its
commits (the step itself, encoding the checkpoint). This script runs the floor's
exact loop with a busy wait of 0, 100, 200 and 400 us before each transaction
and reports the median time of the transaction alone, split into the commits
that grew the WAL file and those that wrote into space it already had (after
the first automatic checkpoint SQLite reuses the file from its start).

    python benchmarks/commit_gap.py --commits 1500 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

from workload import machine, markdown, message

GAPS_US = (0, 100, 200, 400)


def commits(gap_s: float, count: int) -> tuple[list[float], list[float]]:
    """Seconds per transaction, (commits that grew the WAL, commits that reused it)."""
    bodies = [message(i)["content"].encode() for i in range(count)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "floor.db"
        wal = Path(f"{path}-wal")
        with closing(sqlite3.connect(path, isolation_level=None)) as conn:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("CREATE TABLE log (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
            os.sync()
            grew: list[float] = []
            reused: list[float] = []
            size = wal.stat().st_size
            for body in bodies:
                until = time.perf_counter() + gap_s
                while time.perf_counter() < until:  # CPU work, as a step does
                    pass
                started = time.perf_counter()
                conn.execute("BEGIN")
                conn.execute("INSERT INTO log (body) VALUES (?)", (body,))
                conn.execute("COMMIT")
                seconds = time.perf_counter() - started
                now = wal.stat().st_size
                (grew if now > size else reused).append(seconds)
                size = now
    return grew, reused


def ms(values: Sequence[float]) -> str:
    return f"{statistics.median(values) * 1e3:.3f}" if values else "-"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--commits", type=int, default=1500, help="commits per run (default: 1500)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per gap (default: 3)")
    args = parser.parse_args(argv)
    rows = []
    for gap in GAPS_US:
        grew: list[float] = []
        reused: list[float] = []
        for i in range(args.repeat):
            print(f"gap {gap} us, run {i + 1}/{args.repeat}", file=sys.stderr, flush=True)
            g, r = commits(gap / 1e6, args.commits)
            grew += g
            reused += r
        rows.append(
            [f"{gap}", ms(grew + reused), ms(grew), ms(reused), f"{len(grew)}/{len(reused)}"]
        )
    print(machine())
    print()
    print(markdown(
        ["CPU before each commit, us", "commit ms (median)", "WAL grew", "WAL reused",
         "commits grew/reused"],
        rows, numeric_from=0,
    ))  # fmt: skip
    print(
        f"\n{args.repeat} runs of {args.commits} commits per gap, a fresh file each; "
        "one 2 KB INSERT + COMMIT, WAL, synchronous=FULL, as the floor of checkpoint_overhead.py."
    )


if __name__ == "__main__":
    main()
