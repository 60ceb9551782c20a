"""LangGraph checkpointers side by side in one run (issue 15, point 6).

The same LangGraph graph, one node appending a 2 KB message of pseudo-prose to a
``messages`` channel (``operator.add`` reducer) at every step, ``durability="sync"``
(each checkpoint committed before the next step), on:

* LangGraph's ``SqliteSaver`` (the reference every ratio is taken against),
* LangGraph's ``PostgresSaver`` (when a server is reachable and
  ``langgraph-checkpoint-postgres`` is installed),
* ``savegame.langgraph.SavegameSaver`` on SQLite and on PostgreSQL.

Per system and step count: stored bytes (SQLite: file + WAL after
``PRAGMA wal_checkpoint(TRUNCATE)``; PostgreSQL: ``pg_total_relation_size`` summed over
the tables of the system's own schema, as left after the run, no VACUUM), the median
interval between two node calls (per-step time, the checkpoint write included), and in
a fresh child process ``graph.get_state(config)`` and ``list(graph.get_state_history(
config))`` (the child's imports and graph compile are outside both timings; opening the
saver is timed apart). At each step count the systems are interleaved: their runs
round-robin, then one child per system per round, so load from elsewhere on the machine
falls on all of them alike.

    python benchmarks/langgraph_saver.py --steps 100,400 --repeat 3
    python benchmarks/langgraph_saver.py --steps 2000 --repeat 1 --skip-postgressaver-at 2000

PostgreSQL: ``SAVEGAME_BENCH_PG``, else ``SAVEGAME_TEST_POSTGRES``, else
``postgresql://postgres@127.0.0.1:5432/test``; each system writes to its own schema
``lgbench_*``, dropped at the end. ``--skip-sqlitesaver-at 2000`` / ``--skip-postgressaver-at 2000`` leave
LangGraph's savers out at 2,000 steps: they store the whole list at every step (about 4 GB
there, minutes of run); without SqliteSaver that step count has no ratios.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, TypedDict

from workload import machine, markdown, message, stored_bytes, version

HERE = Path(__file__).resolve().parent
THREAD = "bench-thread"
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
REFERENCE = "LangGraph SqliteSaver"


class ChatState(TypedDict):
    messages: Annotated[list[dict[str, str]], operator.add]


def build_graph(steps: int, stamps: list[float] | None = None) -> Any:
    """The graph every system runs: ``steps`` calls of one node appending one message."""
    from langgraph.graph import END, START, StateGraph

    def add(state: ChatState) -> dict[str, list[dict[str, str]]]:
        if stamps is not None:
            stamps.append(time.perf_counter())
        return {"messages": [message(len(state["messages"]))]}

    builder = StateGraph(ChatState)
    builder.add_node("add", add)
    builder.add_edge(START, "add")
    builder.add_conditional_edges(
        "add", lambda state: "add" if len(state["messages"]) < steps else END
    )
    return builder


@contextmanager
def open_saver(kind: str, where: str, *, setup: bool = True) -> Iterator[Any]:
    """A saver of ``kind`` on ``where`` (a SQLite path, or a PostgreSQL URL + schema).

    ``setup=False``: do not create LangGraph's tables (a reader of an existing store);
    SavegameSaver always checks its schema on open, which is part of what it costs.
    """
    if kind == "sqlitesaver":
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(where, check_same_thread=False)
        saver = SqliteSaver(conn)
        if setup:
            saver.setup()
        try:
            yield saver
        finally:
            conn.close()
    elif kind == "postgressaver":
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        url, schema = where.split("#")
        with psycopg.connect(
            url, autocommit=True, prepare_threshold=0, row_factory=dict_row,
            options=f"-c search_path={schema}",
        ) as conn:  # fmt: skip
            saver = PostgresSaver(conn)  # type: ignore[arg-type]
            if setup:
                saver.setup()
            yield saver
    else:
        from savegame.langgraph import SavegameSaver

        saver = SavegameSaver(where)
        try:
            yield saver
        finally:
            saver.close()


def preload(kind: str, where: str) -> None:
    """Import what ``open_saver(kind, where)`` needs, so a child's timings leave imports out
    (the store's driver too: ``open_store`` imports it lazily, 0.1 s for psycopg here)."""
    if kind == "sqlitesaver":
        import langgraph.checkpoint.sqlite
    elif kind == "postgressaver":
        import langgraph.checkpoint.postgres  # noqa: F401
        import psycopg.rows  # noqa: F401
    else:
        import savegame.langgraph

        if where.startswith("postgresql:"):
            import savegame.stores.postgres  # noqa: F401


def config(steps: int) -> Any:
    return {"configurable": {"thread_id": THREAD}, "recursion_limit": steps + 10}


# The child times opening the saver, then the two reads; imports and compile come before.
CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import langgraph_saver as bench
kind, where, steps = sys.argv[2], sys.argv[3], int(sys.argv[4])
bench.preload(kind, where)
graph = bench.build_graph(steps)
t0 = time.perf_counter()
with bench.open_saver(kind, where, setup=False) as saver:
    app = graph.compile(checkpointer=saver)
    t1 = time.perf_counter()
    state = app.get_state(bench.config(steps))
    t2 = time.perf_counter()
    history = list(app.get_state_history(bench.config(steps)))
    t3 = time.perf_counter()
assert len(state.values["messages"]) == steps, len(state.values["messages"])
print(json.dumps({"open": t1 - t0, "get_state": t2 - t1, "history": t3 - t2,
                  "checkpoints": len(history)}))
"""


@dataclass(frozen=True, slots=True)
class System:
    name: str
    kind: str
    postgres: bool


@dataclass(frozen=True, slots=True)
class Cell:
    stored: int
    step_ms: float
    open_ms: float
    get_state_ms: float
    history_ms: float
    checkpoints: int


def postgres_url() -> str | None:
    """The server to use, or None (with a message) when none answers."""
    url = (
        os.environ.get("SAVEGAME_BENCH_PG")
        or os.environ.get("SAVEGAME_TEST_POSTGRES")
        or DEFAULT_PG
    )
    try:
        import psycopg

        psycopg.connect(url, connect_timeout=3).close()
    except Exception as exc:
        print(f"PostgreSQL rows skipped ({url}: {exc})", file=sys.stderr)
        return None
    return url


def systems(pg: str | None) -> list[System]:
    found = [System(REFERENCE, "sqlitesaver", False)]
    if pg is not None:
        try:
            import langgraph.checkpoint.postgres  # noqa: F401
        except ImportError:
            print("PostgresSaver skipped: pip install 'savegame[benchmark]'", file=sys.stderr)
        else:
            found.append(System("LangGraph PostgresSaver", "postgressaver", True))
    found.append(System("SavegameSaver SQLite", "savegame", False))
    if pg is not None:
        found.append(System("SavegameSaver PostgreSQL", "savegame", True))
    return found


def pg_fresh_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{schema}"')


def pg_drop_schemas(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        names = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'lgbench\\_%'"
        ).fetchall()
        for (name,) in names:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')


def pg_bytes(url: str, schema: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size("
            "(quote_ident(schemaname) || '.' || quote_ident(tablename))::regclass)), 0)"
            " FROM pg_tables WHERE schemaname = %s",
            (schema,),
        ).fetchone()
    return int(row[0]) if row else 0


def location(
    system: System, tmp: Path, steps: int, pg: str | None
) -> tuple[str, Callable[[], int]]:
    """Where ``system`` writes its ``steps`` run (made empty), and how to count its bytes."""
    slug = f"{system.kind}_{'pg' if system.postgres else 'sqlite'}_{steps}"
    if system.postgres:
        assert pg is not None
        schema = f"lgbench_{slug}"
        pg_fresh_schema(pg, schema)
        sep = "&" if "?" in pg else "?"
        where = f"{pg}#{schema}" if system.kind == "postgressaver" else f"{pg}{sep}schema={schema}"
        return where, lambda: pg_bytes(pg, schema)
    db = tmp / f"{slug}.db"
    for suffix in ("", "-wal", "-shm"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)
    where = str(db) if system.kind == "sqlitesaver" else f"sqlite:///{db}"
    return where, lambda: stored_bytes(db)


def run_once(system: System, where: str, steps: int) -> float:
    """One run of the graph; the median ms between two node calls."""
    stamps: list[float] = []
    graph = build_graph(steps, stamps)
    with open_saver(system.kind, where) as saver:
        out = graph.compile(checkpointer=saver).invoke(
            {"messages": []}, config(steps), durability="sync"
        )
    if len(out["messages"]) != steps:
        raise RuntimeError(f"{system.name} ran {len(out['messages'])} steps, expected {steps}")
    gaps = [b - a for a, b in pairwise(stamps)]
    return statistics.median(gaps) * 1e3


def child(system: System, where: str, steps: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(HERE), system.kind, where, str(steps)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    result: dict[str, float] = json.loads(out.stdout.splitlines()[-1])
    return result


def measure(
    systems: list[System], steps: int, args: argparse.Namespace, tmp: Path, pg: str | None
) -> dict[str, Cell]:
    """Every system at ``steps``, interleaved: the runs round-robin over the systems, then
    the fresh-process reads, one child per system per round in a rotating order, so a
    burst of load on the shared machine falls on every system alike, not on one."""
    step_ms: dict[str, list[float]] = {s.name: [] for s in systems}
    stores: dict[str, tuple[str, Callable[[], int]]] = {}
    for _ in range(args.repeat):
        for s in systems:
            print(f"{s.name}, {steps} steps", file=sys.stderr, flush=True)
            stores[s.name] = location(s, tmp, steps, pg)
            step_ms[s.name].append(run_once(s, stores[s.name][0], steps))
    stored = {name: count() for name, (_, count) in stores.items()}  # the last runs' stores
    reads: dict[str, list[dict[str, float]]] = {s.name: [] for s in systems}
    for i in range(args.children):
        for s in systems[i % len(systems) :] + systems[: i % len(systems)]:
            reads[s.name].append(child(s, stores[s.name][0], steps))
    return {name: _cell(stored[name], step_ms[name], reads[name]) for name in stored}


def _cell(stored: int, step_ms: list[float], reads: list[dict[str, float]]) -> Cell:
    def ms(key: str) -> float:
        return statistics.median(r[key] for r in reads) * 1e3

    return Cell(
        stored, statistics.median(step_ms), ms("open"), ms("get_state"), ms("history"),
        int(reads[0]["checkpoints"]),
    )  # fmt: skip


def ratio(value: float, reference: float | None) -> str:
    return "-" if reference is None else f"{value / reference:.2f}x"


def results_table(found: list[System], steps: list[int], cells: dict[tuple[str, int], Cell]) -> str:
    rows = []
    for n in steps:
        ref = cells.get((REFERENCE, n))
        for s in found:
            c = cells.get((s.name, n))
            if c is None:
                continue
            shrink = "-" if ref is None else f"1/{ref.stored / c.stored:.1f}"
            rows.append([
                str(n), s.name, f"{c.stored / 1e6:.3f}", shrink, f"{c.step_ms:.3f}",
                ratio(c.step_ms, ref and ref.step_ms), f"{c.open_ms:.2f}", f"{c.get_state_ms:.2f}",
                ratio(c.get_state_ms, ref and ref.get_state_ms), f"{c.history_ms:.1f}",
                str(c.checkpoints),
            ])  # fmt: skip
    return markdown(
        ["steps", "system", "stored MB", "bytes vs SqliteSaver", "ms/step (median)",
         "step vs SqliteSaver", "open ms", "get_state ms", "get_state vs SqliteSaver",
         "get_state_history ms", "checkpoints"],
        rows, numeric_from=2,
    )  # fmt: skip


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def targets(found: list[System], steps: list[int], cells: dict[tuple[str, int], Cell]) -> str:
    rows: list[list[str]] = []
    for s in (s for s in found if s.kind == "savegame"):
        for n in steps:
            c, ref = cells.get((s.name, n)), cells.get((REFERENCE, n))
            if c is None or ref is None:
                continue
            if n == 400:
                shrink = ref.stored / c.stored
                rows.append([s.name, f"stored bytes, {n} steps", ">= 50x below SqliteSaver",
                             f"1/{shrink:.1f}", verdict(shrink >= 50)])  # fmt: skip
            r = c.step_ms / ref.step_ms
            rows.append([s.name, f"per-step time, {n} steps", "<= SqliteSaver",
                         f"{r:.2f}x", verdict(r <= 1)])  # fmt: skip
            r = c.get_state_ms / ref.get_state_ms
            rows.append([s.name, f"get_state, fresh process, {n} steps", "<= SqliteSaver",
                         f"{r:.2f}x", verdict(r <= 1)])  # fmt: skip
    return markdown(["system", "target", "goal", "measured", "verdict"], rows, numeric_from=3)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--steps", default="100,400,2000",
                        type=lambda t: [int(p) for p in t.split(",") if p],
                        help="step counts (default: 100,400,2000)")  # fmt: skip
    parser.add_argument("--repeat", default=3, type=int, help="runs per cell; medians reported")
    parser.add_argument("--children", default=5, type=int,
                        help="fresh processes per get_state measurement (default: 5)")  # fmt: skip
    for kind in ("sqlitesaver", "postgressaver"):
        parser.add_argument(f"--skip-{kind}-at", default="", metavar="STEPS",
                            type=lambda t: {int(p) for p in t.split(",") if p},
                            help=f"step counts at which LangGraph's {kind} is not run (slow)")  # fmt: skip
    parser.add_argument("--no-postgres", action="store_true", help="SQLite systems only")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    pg = None if args.no_postgres else postgres_url()
    found = systems(pg)
    for i in range(max(args.steps)):  # text generation (cached) stays out of timed steps
        message(i)
    cells: dict[tuple[str, int], Cell] = {}
    with tempfile.TemporaryDirectory(prefix="savegame-lg-bench-") as tmp:
        for n in args.steps:
            here = []
            for s in found:
                if s.kind != "savegame" and n in getattr(args, f"skip_{s.kind}_at"):
                    print(f"{s.name} at {n} steps skipped (--skip-{s.kind}-at)", file=sys.stderr)
                    continue
                here.append(s)
            for name, cell in measure(here, n, args, Path(tmp), pg).items():
                cells[name, n] = cell
    if pg is not None:
        pg_drop_schemas(pg)
    print(f"Machine: {machine(lg_versions())}")
    print()
    print(results_table(found, args.steps, cells))
    print()
    print(f"ms/step: median interval between node calls, median over {args.repeat} runs. "
          "stored MB: SQLite file + WAL after wal_checkpoint(TRUNCATE); PostgreSQL: "
          "pg_total_relation_size summed over the system's schema (no VACUUM). get_state / "
          f"get_state_history (full iteration): median over {args.children} fresh processes, "
          "the saver's open (connect, and SavegameSaver's schema check) apart, imports and compile outside. durability='sync'. Ratios against SqliteSaver "
          "in this run.")  # fmt: skip
    print()
    print(targets(found, args.steps, cells))
    print(f"\nWall time {time.perf_counter() - started:.0f} s.", file=sys.stderr)


def lg_versions() -> str:
    return ", ".join(
        f"{d} {version(d)}"
        for d in ("langgraph", "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres")
    )


if __name__ == "__main__":
    main()
