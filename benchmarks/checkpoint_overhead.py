"""Checkpoint overhead: savegame vs LangGraph's SqliteSaver vs a bare SQLite commit.

The workload is the shape of an agent conversation: every step appends one
2 KB message to a list in the state, and the loop checkpoints after every step.
All systems run side by side in one process, on fresh temporary database
files, interleaved per repeat so that disk or CPU drift hits every system
alike. Printed to stdout as a markdown table (progress goes to stderr), so
the output can be pasted into docs/benchmarks.md as is.

    PYTHONPATH=src python benchmarks/checkpoint_overhead.py --steps 50,100,200,400 --repeat 5

LangGraph rows need the ``benchmark`` extra (``pip install -e '.[benchmark]'``);
without it the other rows still run.
"""

from __future__ import annotations

import argparse
import operator
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any, TypedDict

try:
    from savegame import END, Observer, Workflow, open_store, run
except ImportError as exc:  # run from a checkout without installing
    raise SystemExit(
        f"cannot import savegame ({exc}); run `pip install -e '.[benchmark]'` or set PYTHONPATH=src"
    ) from exc

MESSAGE_BYTES = 2048
MESSAGE: dict[str, str] = {"role": "user", "content": "x" * MESSAGE_BYTES}
FLOOR_ROW = b"x" * MESSAGE_BYTES
# PRAGMA synchronous reports a number; the docs and our URLs use the names.
SYNCHRONOUS_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
INSTALL_HINT = "pip install -e '.[benchmark]'"


@dataclass(frozen=True, slots=True)
class Sample:
    """One run of one system at one step count."""

    seconds: float
    """Wall time of the run alone; opening the database and creating tables are excluded."""
    stored_bytes: int
    """Database file plus WAL after ``PRAGMA wal_checkpoint(TRUNCATE)``."""
    write_median: float | None = None
    """Median seconds to commit one checkpoint, where the system reports it (savegame's observer)."""
    write_mean: float | None = None
    """Mean of the same: writes grow with the state and WAL auto-checkpoints add spikes,
    so the median alone understates what the writes cost the run."""


Bench = Callable[[Path, int], Sample]
"""Run ``steps`` steps against a fresh database file at the given path."""


@dataclass(frozen=True, slots=True)
class System:
    name: str
    synchronous: str
    """The PRAGMA synchronous level the system runs with, by name (``FULL``, ``NORMAL``)."""
    bench: Bench
    is_floor: bool = False
    is_langgraph: bool = False


@dataclass(slots=True)
class Cell:
    """The samples of one system at one step count, over all repeats."""

    samples: list[Sample] = field(default_factory=list)

    def ms_per_step(self, steps: int) -> float:
        return statistics.median(s.seconds for s in self.samples) / steps * 1e3

    def write_ms(self, mean: bool = False) -> float | None:
        runs = [s.write_mean if mean else s.write_median for s in self.samples]
        known = [w for w in runs if w is not None]
        return statistics.median(known) * 1e3 if known else None

    def stored_bytes(self) -> int:
        return int(statistics.median(s.stored_bytes for s in self.samples))


def stored_bytes(db: Path) -> int:
    """Bytes on disk once the WAL is folded into the main file.

    Without the TRUNCATE checkpoint the number would depend on when SQLite last
    auto-checkpointed and on whether the system closed its connection (the last
    close checkpoints too), not on what the system stores.
    """
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = db.with_name(db.name + "-wal")
    return db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


# -- bare SQLite: the floor ------------------------------------------------------------------


def floor_bench(synchronous: str) -> Bench:
    """One ~2 KB INSERT and one COMMIT per step: the least a durable per-step save can cost."""

    def bench(db: Path, steps: int) -> Sample:
        # isolation_level=None so BEGIN/COMMIT below are the only transactions.
        conn = sqlite3.connect(db, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {synchronous}")
            conn.execute("CREATE TABLE log (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
            started = time.perf_counter()
            for _ in range(steps):
                conn.execute("BEGIN")
                conn.execute("INSERT INTO log (body) VALUES (?)", (FLOOR_ROW,))
                conn.execute("COMMIT")
            seconds = time.perf_counter() - started
        finally:
            conn.close()
        return Sample(seconds, stored_bytes(db))

    return bench


# -- savegame ----------------------------------------------------------------------------------


def appender(steps: int) -> Workflow:
    wf = Workflow("append")

    @wf.step(entry=True)
    def add(state: dict[str, Any], ctx: object) -> tuple[dict[str, Any], str]:
        msgs = [*state.get("messages", []), MESSAGE]
        return {"messages": msgs}, ("add" if len(msgs) < steps else END)

    return wf


def savegame_bench(synchronous: str) -> Bench:
    query = "" if synchronous == "FULL" else f"?synchronous={synchronous.lower()}"

    def bench(db: Path, steps: int) -> Sample:
        wf = appender(steps)
        writes: list[float] = []
        observer = Observer(on_checkpoint=lambda header, seconds: writes.append(seconds))
        # Opened outside the timed region: schema creation is a one-off, not per-step cost.
        store = open_store(f"sqlite:///{db}{query}")
        try:
            started = time.perf_counter()
            result = run(wf, {}, store=store, observer=observer)
            seconds = time.perf_counter() - started
        finally:
            store.close()
        got = len(result.state["messages"])
        if got != steps:
            raise RuntimeError(f"savegame ran {got} steps, expected {steps}")
        return Sample(
            seconds, stored_bytes(db), statistics.median(writes), statistics.fmean(writes)
        )

    return bench


# -- LangGraph -------------------------------------------------------------------------------


class ChatState(TypedDict):
    """LangGraph's state: the idiomatic chat shape, a reducer appends each node's messages.

    At module level because LangGraph resolves the annotations by name.
    """

    messages: Annotated[list[dict[str, str]], operator.add]


def langgraph_system() -> System | None:
    """LangGraph's SqliteSaver, or None (with a message) when the benchmark extra is missing."""
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END as LG_END
        from langgraph.graph import START, StateGraph
    except ImportError as exc:
        print(
            f"LangGraph rows skipped ({exc.name} is not installed); for them run: {INSTALL_HINT}",
            file=sys.stderr,
        )
        return None

    def graph(steps: int) -> Any:
        builder = StateGraph(ChatState)
        builder.add_node("add", lambda state: {"messages": [MESSAGE]})
        builder.add_edge(START, "add")
        builder.add_conditional_edges(
            "add", lambda state: "add" if len(state["messages"]) < steps else LG_END
        )
        return builder

    def saver(db: Path) -> SqliteSaver:
        # The documented file setup; SqliteSaver sets WAL itself and leaves
        # synchronous at SQLite's default, which is what we measure.
        conn = sqlite3.connect(db, check_same_thread=False)
        cp = SqliteSaver(conn)
        cp.setup()
        return cp

    def bench(db: Path, steps: int) -> Sample:
        cp = saver(db)
        try:
            app = graph(steps).compile(checkpointer=cp)
            config: Any = {"configurable": {"thread_id": "bench"}, "recursion_limit": steps + 10}
            started = time.perf_counter()
            # durability="sync" commits each checkpoint before the next step
            # starts, like savegame's default; LangGraph's own default, "async",
            # overlaps the write with the next step.
            out = app.invoke({"messages": []}, config, durability="sync")
            seconds = time.perf_counter() - started
        finally:
            cp.conn.close()
        if len(out["messages"]) != steps:
            raise RuntimeError(f"LangGraph ran {len(out['messages'])} steps, expected {steps}")
        return Sample(seconds, stored_bytes(db))

    with tempfile.TemporaryDirectory(prefix="savegame-bench-") as tmp:
        cp = saver(Path(tmp) / "probe.db")
        (level,) = cp.conn.execute("PRAGMA synchronous").fetchone()
        cp.conn.close()
    return System("LangGraph SqliteSaver", SYNCHRONOUS_NAMES[level], bench, is_langgraph=True)


# -- driver ----------------------------------------------------------------------------------


def systems() -> list[System]:
    found = [
        System("bare SQLite", "FULL", floor_bench("FULL"), is_floor=True),
        System("bare SQLite", "NORMAL", floor_bench("NORMAL"), is_floor=True),
        System("savegame", "FULL", savegame_bench("FULL")),
        System("savegame", "NORMAL", savegame_bench("NORMAL")),
    ]
    lg = langgraph_system()
    if lg is not None:
        found.append(lg)
    return found


def sample(system: System, steps: int) -> Sample:
    # A fresh directory per run: no page cache, WAL or free pages carried over.
    with tempfile.TemporaryDirectory(prefix="savegame-bench-") as tmp:
        return system.bench(Path(tmp) / "bench.db", steps)


def measure(
    found: Sequence[System], step_counts: Sequence[int], repeat: int
) -> dict[tuple[int, int], Cell]:
    cells = {(i, n): Cell() for i in range(len(found)) for n in step_counts}
    # Warm-up: imports, graph compilation paths and the first file creation are
    # one-off costs that would otherwise land on the first repeat.
    for system in found:
        sample(system, min(step_counts))
    for r in range(repeat):
        print(f"repeat {r + 1}/{repeat}", file=sys.stderr, flush=True)
        for n in step_counts:
            for i, system in enumerate(found):
                cells[i, n].samples.append(sample(system, n))
    return cells


def ratio(value: float, reference: float | None) -> str:
    return "-" if reference is None or reference == 0 else f"{value / reference:.2f}x"


def table(
    found: Sequence[System], step_counts: Sequence[int], cells: dict[tuple[int, int], Cell]
) -> str:
    header = [
        "system",
        "sync",
        "steps",
        "ms/step",
        "write ms median",
        "write ms mean",
        "stored MB",
        "time vs floor",
        "time vs LangGraph",
        "bytes vs LangGraph",
    ]
    rows: list[list[str]] = []
    for n in step_counts:
        floors = {s.synchronous: cells[i, n] for i, s in enumerate(found) if s.is_floor}
        lg = next((cells[i, n] for i, s in enumerate(found) if s.is_langgraph), None)
        for i, system in enumerate(found):
            cell = cells[i, n]
            ms = cell.ms_per_step(n)
            floor = floors.get(system.synchronous)
            floor_ms = None if floor is None else floor.ms_per_step(n)
            write, write_mean = cell.write_ms(), cell.write_ms(mean=True)
            rows.append(
                [
                    system.name,
                    system.synchronous,
                    str(n),
                    f"{ms:.3f}",
                    "-" if write is None else f"{write:.3f}",
                    "-" if write_mean is None else f"{write_mean:.3f}",
                    f"{cell.stored_bytes() / 1e6:.2f}",
                    "-" if system.is_floor else ratio(ms, floor_ms),
                    "-" if lg is None or system.is_langgraph else ratio(ms, lg.ms_per_step(n)),
                    "-"
                    if lg is None or system.is_langgraph
                    else ratio(cell.stored_bytes(), lg.stored_bytes()),
                ]
            )
    return markdown(header, rows, numeric_from=2)


def markdown(header: list[str], rows: Iterable[list[str]], *, numeric_from: int) -> str:
    """A padded GitHub markdown table: readable in a terminal and pasteable into docs.

    rich renders box-drawn tables, which are not markdown, so this stays plain.
    """
    body = [header, *rows]
    widths = [max(len(row[c]) for row in body) for c in range(len(header))]

    def line(cells: list[str]) -> str:
        padded = [
            cell.rjust(w) if c >= numeric_from else cell.ljust(w)
            for c, (cell, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = [("-" * (w - 1) + ":") if c >= numeric_from else "-" * w for c, w in enumerate(widths)]
    return "\n".join([line(header), line(rule), *(line(row) for row in body[1:])])


def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine() -> str:
    return (
        f"{platform.system()} {platform.release()} {platform.machine()}, {os.cpu_count()} CPUs; "
        f"Python {platform.python_version()}; SQLite {sqlite3.sqlite_version}; "
        f"langgraph {version('langgraph')}, langgraph-checkpoint-sqlite "
        f"{version('langgraph-checkpoint-sqlite')}"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--steps",
        default="50,100,200,400",
        type=lambda text: [int(part) for part in text.split(",") if part],
        help="comma-separated step counts (default: 50,100,200,400)",
    )
    parser.add_argument("--repeat", default=5, type=int, help="runs per cell; medians are reported")
    args = parser.parse_args(argv)
    if not args.steps or min(args.steps) < 1 or args.repeat < 1:
        parser.error("--steps needs positive integers and --repeat at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    found = systems()
    started = time.perf_counter()
    cells = measure(found, args.steps, args.repeat)
    elapsed = time.perf_counter() - started
    steps = ",".join(map(str, args.steps))
    print(f"Machine: {machine()}")
    print(
        f"Command: python benchmarks/checkpoint_overhead.py --steps {steps} --repeat {args.repeat}"
    )
    print(
        f"Workload: one {MESSAGE_BYTES}-byte message appended per step, a checkpoint after every step"
    )
    print()
    print(table(found, args.steps, cells))
    print()
    print(
        f"ms/step: median over {args.repeat} runs of run wall time / steps. "
        "write ms: per-checkpoint commit time from savegame's Observer, median and mean "
        "within a run, then the median over runs. "
        "stored MB: db + WAL file bytes after PRAGMA wal_checkpoint(TRUNCATE). "
        "time vs floor: against bare SQLite at the same synchronous level. "
        f"Benchmark wall time {elapsed:.0f} s."
    )
    if not any(s.is_langgraph for s in found):
        print(f"\nLangGraph rows skipped: the benchmark extra is missing ({INSTALL_HINT}).")


if __name__ == "__main__":
    main()
