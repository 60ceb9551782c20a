"""``savegame migrate langgraph`` on a big SqliteSaver database (issue 20, point 5).

The source is made by the real graph of ``langgraph_saver.py`` (one node appending a
2 KB pseudo-prose message to ``messages``, ``operator.add``) run on LangGraph's
``SqliteSaver`` with ``durability="sync"``, once per thread: ``--threads`` x
``--steps`` (default 50 x 400, about 8 GB: SqliteSaver stores the whole list at every
step). Built by graphs, not by ``SqliteSaver.put``: what LangGraph really leaves on
disk, pending writes included (about two minutes here).

Then, each into a fresh SQLite target (file + WAL after ``wal_checkpoint(TRUNCATE)``):

* ``read only``: every thread's history through ``SqliteSaver.list``, paged as the
  migration's verification reads it: the reference the other rows are divided by;
* ``dry run``: ``migrate(..., dry_run=True)``: every checkpoint read and checked;
* ``migrate``: the whole migration (read, check, write through SavegameSaver, verify);
* ``migrate --latest-only``: the newest checkpoint of each thread only.

    python benchmarks/migrate_langgraph.py                       # 50 x 400, ~5-10 min here
    python benchmarks/migrate_langgraph.py --threads 5 --steps 100 --repeat 3
    python benchmarks/migrate_langgraph.py --source /tmp/lg.db   # build once, reuse after

Medians over ``--repeat`` runs of each row.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

from langgraph_saver import build_graph, config
from workload import machine, markdown, message, stored_bytes, version


def build(path: Path, threads: int, steps: int) -> float:
    """The source: ``threads`` runs of the graph on SqliteSaver; seconds it took."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    started = time.perf_counter()
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        app = build_graph(steps).compile(checkpointer=SqliteSaver(conn))
        for n in range(threads):
            cfg = config(steps)
            cfg["configurable"]["thread_id"] = f"thread-{n:03}"
            out = app.invoke({"messages": []}, cfg, durability="sync")
            assert len(out["messages"]) == steps
            print(f"  built thread {n + 1}/{threads}", file=sys.stderr, flush=True)
    stored_bytes(path)  # the WAL folded in: the file is what a user has
    return time.perf_counter() - started


def read_all(source: Path) -> None:
    """Every thread's history through LangGraph's saver, paged: the reading floor."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from savegame.integrations.langgraph._verify import history

    uri = f"file:{source}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True, check_same_thread=False)) as conn:
        saver = SqliteSaver(conn)
        saver.is_setup = True
        threads = [r[0] for r in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")]
        for thread in threads:
            namespaces = [r[0] for r in conn.execute(
                "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = ?", (thread,)
            )]  # fmt: skip
            for _ in history(saver, thread, namespaces):
                pass


def timed(run: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall seconds, CPU seconds of this process (the machine may be shared), result."""
    started, cpu = time.perf_counter(), time.process_time()
    out = run()
    return time.perf_counter() - started, time.process_time() - cpu, out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=1, help="runs per row; medians reported")
    parser.add_argument("--source", type=Path, help="the SqliteSaver file: built if missing")
    args = parser.parse_args(argv)
    from savegame.langgraph import migrate

    for i in range(args.steps):  # text generation (cached) stays out of the timings
        message(i)
    with tempfile.TemporaryDirectory(prefix="savegame-migrate-bench-") as tmp:
        source = args.source or Path(tmp) / "langgraph.db"
        built = None
        if not source.exists():
            print(f"building {args.threads} x {args.steps} on SqliteSaver", file=sys.stderr)
            built = build(source, args.threads, args.steps)
        source_bytes = stored_bytes(source)
        rows: dict[str, list[tuple[float, float, Any, int]]] = {}
        for repeat in range(args.repeat):
            for name, kind in (("read only", None), ("dry run", "dry"), ("migrate", "full"),
                               ("migrate --latest-only", "latest")):  # fmt: skip
                target = Path(tmp) / f"target-{kind}-{repeat}.db"
                print(f"{name} ({repeat + 1}/{args.repeat})", file=sys.stderr, flush=True)
                if kind is None:
                    seconds, cpu, report = timed(lambda: read_all(source))
                else:
                    seconds, cpu, report = timed(lambda k=kind, t=target: migrate(  # type: ignore[misc]
                        str(source), f"sqlite:///{t}", dry_run=k == "dry", latest_only=k == "latest"
                    ))  # fmt: skip
                    bad = [r for r in report.results if r.status == "skipped"]
                    assert not bad, bad[:3]
                size = stored_bytes(target) if target.exists() else 0
                rows.setdefault(name, []).append((seconds, cpu, report, size))
                target.unlink(missing_ok=True)
                for suffix in ("-wal", "-shm"):
                    target.with_name(target.name + suffix).unlink(missing_ok=True)
    reference = statistics.median(s for s, _, _, _ in rows["read only"])
    table = []
    for name, runs in rows.items():
        seconds = statistics.median(s for s, _, _, _ in runs)
        cpu = statistics.median(c for _, c, _, _ in runs)
        _, _, report, size = runs[-1]
        migrated = len(report.migrated) if report is not None else args.threads
        checkpoints = report.checkpoints if report is not None else "-"
        after = f"{size / 1e6:.1f}" if size else "-"
        ratio = f"1/{source_bytes / size:.0f}" if size else "-"
        table.append([
            name, str(migrated), str(checkpoints), f"{seconds:.1f}", f"{cpu:.1f}",
            f"{migrated / seconds:.2f}", f"{seconds / reference:.2f}x",
            f"{source_bytes / 1e6:.1f}", after, ratio,
        ])  # fmt: skip
    print(f"Machine: {machine(lg_versions())}")
    if built is not None:
        print(f"Source built by the graph on SqliteSaver in {built:.0f} s "
              f"({args.threads} threads x {args.steps} steps).")  # fmt: skip
    print()
    print(markdown(
        ["row", "threads", "checkpoints", "seconds", "CPU s", "threads/s", "time vs read only",
         "source MB", "target MB", "target vs source"],
        table, numeric_from=1,
    ))  # fmt: skip
    full = rows["migrate"][-1][2]
    print()
    print(f"migrate: {full.bytes_before / 1e6:.1f} MB of the threads' rows in the source -> "
          f"{full.bytes_after / 1e6:.1f} MB in savegame (records, journal, blobs), "
          f"median of {args.repeat} run(s) each; MB: files after wal_checkpoint(TRUNCATE).")  # fmt: skip


def lg_versions() -> str:
    return ", ".join(f"{d} {version(d)}" for d in ("langgraph", "langgraph-checkpoint-sqlite"))


if __name__ == "__main__":
    main()
