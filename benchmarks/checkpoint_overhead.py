"""Checkpoint overhead: savegame vs LangGraph's SqliteSaver vs a bare SQLite commit.

The workload is the shape of an agent conversation: every step appends one
2 KB message of pseudo-prose (see ``workload.message``) to a list in the state,
and the loop checkpoints after every step. All systems run side by side in one
process, on fresh temporary database files, interleaved per repeat so that
disk or CPU drift hits every system alike. Tables go to stdout as markdown,
progress to stderr.

    python benchmarks/checkpoint_overhead.py --steps 50,100,200,400 --solo-steps 2000 --repeat 5

``benchmarks/storage_engine.py`` runs this and adds loading and listing; the
LangGraph rows need the ``benchmark`` extra (``pip install -e '.[benchmark]'``).
"""

from __future__ import annotations

import argparse
import itertools
import operator
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypedDict

from workload import (
    SYNCHRONOUS_NAMES,
    TimedWrites,
    machine,
    markdown,
    message,
    stored_bytes,
    version,
)

try:
    from savegame import END, Workflow, open_store, run
except ImportError as exc:  # run from a checkout without installing
    raise SystemExit(
        f"cannot import savegame ({exc}); run `pip install -e '.[benchmark]'` or set PYTHONPATH=src"
    ) from exc

INSTALL_HINT = "pip install -e '.[benchmark]'"
THREAD = "bench"
"""LangGraph's thread id in every run (each run has a database of its own)."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One run of one system at one step count."""

    seconds: float
    """Wall time of the run alone; opening the database and creating tables are excluded."""
    step_median: float
    """Median seconds from one step's start to the next one's: the step, its checkpoint
    and the loop's bookkeeping. For the floor, one INSERT + COMMIT."""
    stored_bytes: int
    """Database file plus WAL after ``PRAGMA wal_checkpoint(TRUNCATE)``."""
    write_median: float | None = None
    """Median seconds to commit one checkpoint (savegame's put_checkpoint, timed by a wrapping
    store; the others have no hook)."""
    run_id: str | None = None
    """savegame's run id, so later measurements can read the same database."""


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
    solo: bool = True
    """Also runs at the ``--solo-steps`` counts (LangGraph does not: minutes per run)."""


@dataclass(slots=True)
class Cell:
    """The samples of one system at one step count, over all repeats."""

    samples: list[Sample] = field(default_factory=list)

    def ms_per_step(self, steps: int) -> float:
        return statistics.median(s.seconds for s in self.samples) / steps * 1e3

    def step_ms(self) -> float:
        return statistics.median(s.step_median for s in self.samples) * 1e3

    def write_ms(self) -> float | None:
        known = [s.write_median for s in self.samples if s.write_median is not None]
        return statistics.median(known) * 1e3 if known else None

    def stored_bytes(self) -> int:
        return int(statistics.median(s.stored_bytes for s in self.samples))


def intervals(stamps: Sequence[float]) -> float:
    """Median gap between consecutive timestamps: the steady per-step cost.

    The median rather than the mean: WAL auto-checkpoints land on a few steps and
    the mean (wall time / steps) is reported separately as ms/step.
    """
    return statistics.median(b - a for a, b in itertools.pairwise(stamps))


# -- bare SQLite: the floor ------------------------------------------------------------------


def floor_bench(synchronous: str) -> Bench:
    """One 2 KB INSERT and one COMMIT per step: the least a durable per-step save can cost."""

    def bench(db: Path, steps: int) -> Sample:
        rows = [message(i)["content"].encode() for i in range(steps)]
        # isolation_level=None so BEGIN/COMMIT below are the only transactions.
        conn = sqlite3.connect(db, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {synchronous}")
            conn.execute("CREATE TABLE log (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
            stamps = [time.perf_counter()]
            for row in rows:
                conn.execute("BEGIN")
                conn.execute("INSERT INTO log (body) VALUES (?)", (row,))
                conn.execute("COMMIT")
                stamps.append(time.perf_counter())
        finally:
            conn.close()
        return Sample(stamps[-1] - stamps[0], intervals(stamps), stored_bytes(db))

    return bench


# -- savegame ----------------------------------------------------------------------------------


def appender(messages: Sequence[dict[str, str]], stamps: list[float]) -> Workflow:
    wf = Workflow("append")
    steps = len(messages)

    @wf.step(entry=True)
    def add(state: dict[str, Any], ctx: object) -> tuple[dict[str, Any], str]:
        stamps.append(time.perf_counter())
        old = state.get("messages", [])
        # A new list, as the delta contract asks: the engine then sends only the appended item.
        msgs = [*old, messages[len(old)]]
        return {"messages": msgs}, ("add" if len(msgs) < steps else END)

    return wf


def savegame_bench(synchronous: str) -> Bench:
    query = "" if synchronous == "FULL" else f"?synchronous={synchronous.lower()}"

    def bench(db: Path, steps: int) -> Sample:
        stamps: list[float] = []
        wf = appender([message(i) for i in range(steps)], stamps)
        # Opened outside the timed region: schema creation is a one-off, not per-step cost.
        store = TimedWrites(open_store(f"sqlite:///{db}{query}"))
        try:
            started = time.perf_counter()
            result = run(wf, {}, store=store)
            seconds = time.perf_counter() - started
        finally:
            store.close()
        writes = store.writes
        got = len(result.state["messages"])
        if got != steps:
            raise RuntimeError(f"savegame ran {got} steps, expected {steps}")
        return Sample(
            seconds, intervals(stamps), stored_bytes(db), statistics.median(writes), result.run_id
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

    def graph(messages: Sequence[dict[str, str]], stamps: list[float]) -> Any:
        steps = len(messages)

        def add(state: ChatState) -> dict[str, list[dict[str, str]]]:
            stamps.append(time.perf_counter())
            return {"messages": [messages[len(state["messages"])]]}

        builder = StateGraph(ChatState)
        builder.add_node("add", add)
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
        stamps: list[float] = []
        app = graph([message(i) for i in range(steps)], stamps)
        cp = saver(db)
        try:
            compiled = app.compile(checkpointer=cp)
            config: Any = {"configurable": {"thread_id": THREAD}, "recursion_limit": steps + 10}
            started = time.perf_counter()
            # durability="sync" commits each checkpoint before the next step
            # starts, like savegame's default; LangGraph's own default, "async",
            # overlaps the write with the next step.
            out = compiled.invoke({"messages": []}, config, durability="sync")
            seconds = time.perf_counter() - started
        finally:
            cp.conn.close()
        if len(out["messages"]) != steps:
            raise RuntimeError(f"LangGraph ran {len(out['messages'])} steps, expected {steps}")
        return Sample(seconds, intervals(stamps), stored_bytes(db))

    with tempfile.TemporaryDirectory(prefix="savegame-bench-") as tmp:
        cp = saver(Path(tmp) / "probe.db")
        (level,) = cp.conn.execute("PRAGMA synchronous").fetchone()
        cp.conn.close()
    return System(
        "LangGraph SqliteSaver", SYNCHRONOUS_NAMES[level], bench, is_langgraph=True, solo=False
    )


# -- driver ----------------------------------------------------------------------------------


def systems(*, normal: bool = False) -> list[System]:
    """``normal``: also the floor and savegame at ``synchronous=NORMAL``, where a WAL
    commit does not fsync, so what is left of a step is CPU (and the page cache)."""
    found = [
        System("bare SQLite", "FULL", floor_bench("FULL"), is_floor=True),
        System("savegame", "FULL", savegame_bench("FULL")),
    ]
    if normal:
        found += [
            System("bare SQLite", "NORMAL", floor_bench("NORMAL"), is_floor=True),
            System("savegame", "NORMAL", savegame_bench("NORMAL")),
        ]
    lg = langgraph_system()
    if lg is not None:
        found.append(lg)
    return found


@dataclass(slots=True)
class Results:
    systems: list[System]
    step_counts: list[int]
    solo_counts: list[int]
    cells: dict[tuple[int, int], Cell]
    keep: Path
    """Where the last repeat's savegame and LangGraph databases were kept (see ``kept``)."""

    def savegame_run(self, steps: int) -> tuple[Path, str]:
        """The kept savegame database at ``steps`` and the run id in it."""
        i = next(i for i, s in enumerate(self.systems) if s.name == "savegame")
        run_id = self.cells[i, steps].samples[-1].run_id
        assert run_id is not None
        return kept(self.keep, self.systems[i], steps), run_id

    def langgraph_db(self, steps: int) -> Path | None:
        """The kept LangGraph database at ``steps`` (thread ``THREAD``), if it ran there."""
        at = next((i for i, s in enumerate(self.systems) if s.is_langgraph), None)
        if at is None or (at, steps) not in self.cells:
            return None
        return kept(self.keep, self.systems[at], steps)


def kept(keep: Path, system: System, steps: int) -> Path:
    return keep / f"{'langgraph' if system.is_langgraph else 'savegame'}-{steps}.db"


def keeps(system: System) -> bool:
    """The stores whose last run is kept for the load measurements: savegame at FULL, LangGraph."""
    return system.is_langgraph or (system.name == "savegame" and system.synchronous == "FULL")


def sample(system: System, steps: int, keep: Path | None) -> Sample:
    # Flush what earlier runs left dirty (deleting a 25 MB database, for one): otherwise
    # the filesystem journal commits it inside the next run's first fsync, which showed
    # as +100 ms on every 50-step run that followed a 2,000-step one.
    os.sync()
    # A fresh directory per run: no page cache, WAL or free pages carried over.
    with tempfile.TemporaryDirectory(prefix="savegame-bench-") as tmp:
        db = Path(tmp) / "bench.db"
        got = system.bench(db, steps)
        if keep is not None:
            db.rename(kept(keep, system, steps))  # the WAL was truncated by stored_bytes
        return got


def measure(
    found: list[System], step_counts: list[int], solo_counts: list[int], repeat: int, keep: Path
) -> Results:
    everything = [*step_counts, *solo_counts]
    cells = {(i, n): Cell() for i in range(len(found)) for n in everything}
    # Warm-up: imports, graph compilation paths and the first file creation are
    # one-off costs that would otherwise land on the first repeat.
    for system in found:
        sample(system, min(everything), None)
    for r in range(repeat):
        print(f"repeat {r + 1}/{repeat}", file=sys.stderr, flush=True)
        for n in everything:
            for i, system in enumerate(found):
                if n in solo_counts and n not in step_counts and not system.solo:
                    continue
                last = r == repeat - 1 and keeps(system)
                cells[i, n].samples.append(sample(system, n, keep if last else None))
    return Results(
        found, step_counts, solo_counts, {k: c for k, c in cells.items() if c.samples}, keep
    )


def ratio(value: float, reference: float | None) -> str:
    return "-" if reference is None or reference == 0 else f"{value / reference:.2f}x"


def inverse(value: float, reference: float | None) -> str:
    """A small ratio written as 1/N, easier to compare with a "< 1/100" target."""
    return "-" if reference is None or value == 0 else f"1/{reference / value:.0f}"


def table(results: Results) -> str:
    header = [
        "system",
        "sync",
        "steps",
        "ms/step (mean)",
        "step ms (median)",
        "write ms (median)",
        "stored MB",
        "step vs floor",
        "step vs LangGraph",
        "bytes vs LangGraph",
    ]
    rows: list[list[str]] = []
    cells, found = results.cells, results.systems
    for n in [*results.step_counts, *results.solo_counts]:
        floors = {s.synchronous: cells.get((i, n)) for i, s in enumerate(found) if s.is_floor}
        lg_at = next(((i, s) for i, s in enumerate(found) if s.is_langgraph), None)
        lg = None if lg_at is None else cells.get((lg_at[0], n))
        lg_sync = None if lg_at is None else lg_at[1].synchronous
        for i, system in enumerate(found):
            cell = cells.get((i, n))
            if cell is None:
                continue
            floor = floors.get(system.synchronous)
            write = cell.write_ms()
            rows.append(
                [
                    system.name,
                    system.synchronous,
                    str(n),
                    f"{cell.ms_per_step(n):.3f}",
                    f"{cell.step_ms():.3f}",
                    "-" if write is None else f"{write:.3f}",
                    f"{cell.stored_bytes() / 1e6:.3f}",
                    "-"
                    if system.is_floor or floor is None
                    else ratio(cell.step_ms(), floor.step_ms()),
                    # Time only against LangGraph at the same level; bytes do not depend on it.
                    "-"
                    if lg is None or system.is_langgraph or lg_sync != system.synchronous
                    else ratio(cell.step_ms(), lg.step_ms()),
                    "-"
                    if lg is None or system.is_langgraph
                    else inverse(cell.stored_bytes(), lg.stored_bytes()),
                ]
            )
    return markdown(header, rows, numeric_from=2)


def legend(repeat: int) -> str:
    return (
        f"ms/step (mean): median over {repeat} runs of run wall time / steps. "
        "step ms (median): median gap between consecutive step starts within a run (the step, "
        "its checkpoint, the loop), then the median over runs; for the floor one INSERT + COMMIT. "
        "write ms: savegame's put_checkpoint (timed by a wrapping store), the commit of one checkpoint. "
        "stored MB: db + WAL bytes after PRAGMA wal_checkpoint(TRUNCATE). "
        "step vs floor: step ms over the floor's at the same synchronous level."
    )


def langgraph_versions() -> str:
    return (
        f"langgraph {version('langgraph')}, "
        f"langgraph-checkpoint-sqlite {version('langgraph-checkpoint-sqlite')}"
    )


def counts(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", default="50,100,200,400", type=counts,
                        help="step counts for every system (default: 50,100,200,400)")  # fmt: skip
    parser.add_argument("--solo-steps", default="2000", type=counts,
                        help="step counts without LangGraph (default: 2000; '' for none)")  # fmt: skip
    parser.add_argument("--repeat", default=5, type=int, help="runs per cell; medians are reported")
    parser.add_argument("--normal", action="store_true",
                        help="add the floor and savegame at synchronous=NORMAL (no fsync: CPU)")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    add_arguments(parser)
    args = parser.parse_args(argv)
    found = systems(normal=args.normal)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="savegame-bench-keep-") as keep:
        results = measure(found, args.steps, args.solo_steps, args.repeat, Path(keep))
    print(f"Machine: {machine(langgraph_versions())}")
    print()
    print(table(results))
    print()
    print(legend(args.repeat) + f" Wall time {time.perf_counter() - started:.0f} s.")


if __name__ == "__main__":
    main()
