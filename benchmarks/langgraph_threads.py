"""LangGraph's own workload: many short threads and a few long ones (issue 28, point 5).

Real compiled LangGraph graphs, ``durability="sync"`` (each checkpoint committed before
the next step), on LangGraph's ``SqliteSaver`` and ``savegame.langgraph.SavegameSaver``
over SQLite, each on its own file in the same directory with the settings it uses by
default (both WAL, ``synchronous=FULL``: read back and printed); ``InMemorySaver`` runs
beside them as LangGraph's own cost (a saver that costs almost nothing). The graphs:

* ``chat N``: a ReAct-shaped loop over a ``messages`` channel (``add_messages``):
  ``agent`` answers with an ``AIMessage`` that calls a tool, ``tools`` answers with a
  ``ToolMessage``: N checkpoints a run (the input's, the one after LangGraph's
  ``__start__`` task applied it, then one per node call). Sizes 3, 5, 10 (3 is the
  smallest run LangGraph stores) run as many short threads, each a new
  ``thread_id``: what fixed costs hit (the first put of a thread, ``get_tuple`` on a
  thread with nothing stored, which LangGraph calls first, the line lookup, the lease);
  100 and 400 run as a few long threads.
* ``interrupt``: ``agent``, then ``review`` calls ``interrupt()``; the run stops, and
  ``invoke(Command(resume=...))`` on the same thread goes on to ``send``: one turn of
  human-in-the-loop, both invokes timed.
* ``subgraph``: ``agent``, then ``research``, a compiled two-node subgraph (its
  checkpoints in their own namespace: a new line per call), then ``agent`` again.

Each run is timed whole (``invoke``, or ``ainvoke`` in the async table, from the call to
its return: LangGraph's own work included, which is what a user waits for) and divided
by the checkpoints the run stored (counted with ``saver.list`` afterwards, the same on
every saver). Messages carry ``--message-bytes`` of pseudo-prose. The systems are
interleaved thread by thread in a rotating order, so load from elsewhere on the machine
falls on all of them alike; the first ``--warmup`` runs of each are not counted. The
async table runs ``ainvoke`` on ``AsyncSqliteSaver`` (the reference there),
``SavegameSaver`` (its async methods) and ``InMemorySaver``. After the timed runs, one
more run per system has its connection's statements traced: the commits a run pays.
Before and after everything, the floor: one bare commit (an INSERT of 1 KB, WAL, FULL)
in the same directory, which no durable checkpoint can cost less than. ``--normal`` puts
every saver at ``synchronous=NORMAL`` (a commit does not wait for the disk): what is
left is each saver's CPU.

    python benchmarks/langgraph_threads.py
    python benchmarks/langgraph_threads.py --threads 300 --long 100,400 --long-repeat 5
    python benchmarks/langgraph_threads.py --cases chat3,chat10 --modes sync --normal
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt
from workload import SYNCHRONOUS_NAMES, machine, markdown, message_text, version

REFERENCE = {"sync": "LangGraph SqliteSaver", "async": "LangGraph AsyncSqliteSaver"}
SAVEGAME = "SavegameSaver SQLite"
MEMORY = "LangGraph InMemorySaver"
#: The smallest LangGraph run stores 3 checkpoints: the input's, the one after the input
#: is applied (LangGraph's ``__start__`` task), and one per node call.
SHORT = (3, 5, 10)


class Chat(TypedDict):
    messages: Annotated[list[Any], add_messages]


@functools.cache
def text(i: int, size: int) -> str:
    """Cached: generating text (0.3 ms a message) stays out of the timed runs after warm-up."""
    return message_text(i, size)


def chat_graph(size: int, checkpoints: int) -> Any:
    """agent <-> tools, ``checkpoints - 2`` node calls (the thread then holds
    ``checkpoints - 1`` messages, the input's too)."""

    def agent(state: Chat) -> dict[str, Any]:
        n = len(state["messages"])
        call = {"name": "search", "args": {"q": f"q{n}"}, "id": f"call-{n}", "type": "tool_call"}
        return {"messages": [AIMessage(text(n, size), tool_calls=[call])]}

    def tools(state: Chat) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [ToolMessage(text(n, size), tool_call_id=f"call-{n - 1}")]}

    def route(state: Chat) -> str:
        if len(state["messages"]) >= checkpoints - 1:
            return END
        return "tools" if isinstance(state["messages"][-1], AIMessage) else "agent"

    g = StateGraph(Chat)
    g.add_node("agent", agent)
    g.add_node("tools", tools)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END])
    g.add_conditional_edges("tools", route, ["agent", END])
    return g


def interrupt_graph(size: int) -> Any:
    """agent, then review asks a person (``interrupt``), then send."""

    def agent(state: Chat) -> dict[str, Any]:
        return {"messages": [AIMessage(text(len(state["messages"]), size))]}

    def review(state: Chat) -> dict[str, Any]:
        verdict = interrupt({"question": "send this?", "draft": state["messages"][-1].content})
        return {"messages": [HumanMessage(f"review: {verdict}")]}

    g = StateGraph(Chat)
    g.add_node("agent", agent)
    g.add_node("review", review)
    g.add_node("send", agent)
    g.add_edge(START, "agent")
    g.add_edge("agent", "review")
    g.add_edge("review", "send")
    g.add_edge("send", END)
    return g


def subgraph_graph(size: int) -> Any:
    """agent, then ``research`` (a subgraph: search, then summarize), then agent again."""

    def say(state: Chat) -> dict[str, Any]:
        return {"messages": [AIMessage(text(len(state["messages"]), size))]}

    inner = StateGraph(Chat)
    inner.add_node("search", say)
    inner.add_node("summarize", say)
    inner.add_edge(START, "search")
    inner.add_edge("search", "summarize")
    inner.add_edge("summarize", END)
    g = StateGraph(Chat)
    g.add_node("agent", say)
    g.add_node("research", inner.compile())
    g.add_node("answer", say)
    g.add_edge(START, "agent")
    g.add_edge("agent", "research")
    g.add_edge("research", "answer")
    g.add_edge("answer", END)
    return g


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    graph: Any
    inputs: Callable[[int], list[Any]]
    """What each ``invoke`` of run ``i`` is given, in order (a resume is a second invoke)."""
    runs: int


def cases(args: argparse.Namespace) -> list[Case]:
    size = args.message_bytes

    def ask(i: int) -> list[Any]:
        return [{"messages": [HumanMessage(text(10_000 + i % 100, size))]}]

    def ask_then_resume(i: int) -> list[Any]:
        return [*ask(i), Command(resume="yes")]

    sizes = [(n, args.threads) for n in SHORT] + [(n, args.long_repeat) for n in args.long]
    out = [Case(f"chat{n}", chat_graph(size, n), ask, runs) for n, runs in sizes]
    out.insert(len(SHORT), Case("interrupt", interrupt_graph(size), ask_then_resume, args.threads))
    out.insert(len(SHORT) + 1, Case("subgraph", subgraph_graph(size), ask, args.threads))
    return [c for c in out if not args.cases or c.name in args.cases]


# -- savers -----------------------------------------------------------------------------------
@asynccontextmanager
async def open_saver(name: str, path: Path, *, normal: bool = False) -> AsyncIterator[Any]:
    """The saver ``name`` on ``path``, opened as its documentation shows (SqliteSaver's
    ``setup`` sets WAL; ``synchronous`` is left at SQLite's default, FULL). ``normal``:
    every saver at ``synchronous=NORMAL``, where a commit does not wait for the disk."""
    if name == MEMORY:
        yield InMemorySaver()
    elif name == SAVEGAME:
        from savegame.langgraph import SavegameSaver

        saver = SavegameSaver(f"sqlite:///{path}" + ("?synchronous=normal" if normal else ""))
        try:
            yield saver
        finally:
            saver.close()
    elif name == REFERENCE["async"]:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
            await saver.setup()
            if normal:
                await saver.conn.execute("PRAGMA synchronous=NORMAL")
            yield saver
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(str(path)) as saver:
            saver.setup()
            if normal:
                saver.conn.execute("PRAGMA synchronous=NORMAL")
            yield saver


async def pragmas(name: str, saver: Any) -> str:
    """journal_mode and synchronous as the saver's own connection has them (synchronous is
    per connection: another connection would read its own)."""
    if name == MEMORY:
        return "-"
    found = []
    for pragma in ("journal_mode", "synchronous"):
        if name == REFERENCE["async"]:
            async with saver.conn.execute(f"PRAGMA {pragma}") as cur:
                found.append((await cur.fetchone())[0])
        else:
            conn = saver.store._conn if name == SAVEGAME else saver.conn
            found.append(conn.execute(f"PRAGMA {pragma}").fetchone()[0])
    return f"{found[0]}, synchronous={SYNCHRONOUS_NAMES[found[1]]}"


async def trace(name: str, saver: Any, callback: Callable[[str], None] | None) -> None:
    """Hand every statement the saver's connection runs to ``callback`` (None: stop)."""
    if name == REFERENCE["async"]:
        await saver.conn.set_trace_callback(callback)
    elif name != MEMORY:
        (saver.store._conn if name == SAVEGAME else saver.conn).set_trace_callback(callback)


def commit_floor(tmp: Path, count: int = 300) -> float:
    """Median ms of one bare commit here: an INSERT of 1 KB and COMMIT, WAL, FULL, in the
    directory the savers write to (what any durable checkpoint pays at least)."""
    (tmp / "floor.db").unlink(missing_ok=True)
    conn = sqlite3.connect(tmp / "floor.db", isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)")
        times = []
        for _ in range(count):
            started = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t (body) VALUES (?)", (os.urandom(1024),))
            conn.execute("COMMIT")
            times.append(time.perf_counter() - started)
    finally:
        conn.close()
    return statistics.median(times) * 1e3


# -- measuring --------------------------------------------------------------------------------
@dataclass
class Cell:
    seconds: list[float]
    """Each counted run, whole."""
    checkpoints: int = 0
    commits: int = 0
    """Commits of one run (an extra run after the timed ones, its statements traced)."""
    settings: str = "-"

    @property
    def run_ms(self) -> float:
        return statistics.median(self.seconds) * 1e3

    @property
    def checkpoint_ms(self) -> float:
        return self.run_ms / self.checkpoints


async def measure(
    case: Case, mode: str, names: list[str], tmp: Path, args: argparse.Namespace
) -> dict[str, Cell]:
    """Every system runs ``case`` ``--warmup`` + ``case.runs`` times, one new thread a run,
    the systems in a rotating order; ``invoke`` (sync) or ``ainvoke`` (async)."""
    cells = {name: Cell([]) for name in names}
    async with AsyncExitStack() as stack:
        apps = {}
        for name in names:
            path = tmp / f"{mode}-{case.name}-{name.replace(' ', '_')}.db"
            saver = await stack.enter_async_context(open_saver(name, path, normal=args.normal))
            cells[name].settings = await pragmas(name, saver)
            apps[name] = (saver, case.graph.compile(checkpointer=saver))
        for i in range(args.warmup + case.runs):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                saver, app = apps[name]
                thread = {"configurable": {"thread_id": f"{case.name}-{i}"}}
                took = await run_once(app, case.inputs(i), thread, mode)
                if i >= args.warmup:
                    cells[name].seconds.append(took)
                if i == args.warmup and mode == "sync":
                    cells[name].checkpoints = len(list(saver.list(thread)))
                elif i == args.warmup:
                    cells[name].checkpoints = len([t async for t in saver.alist(thread)])
        for name, (saver, app) in apps.items():
            statements: list[str] = []
            await trace(name, saver, statements.append)
            thread = {"configurable": {"thread_id": f"{case.name}-traced"}}
            await run_once(app, case.inputs(0), thread, mode)
            await trace(name, saver, None)
            cells[name].commits = sum(s.strip().upper() == "COMMIT" for s in statements)
    return cells


async def run_once(app: Any, given: list[Any], thread: Any, mode: str) -> float:
    """Seconds of one run: each input in turn, ``invoke`` or ``ainvoke``."""
    config = {**thread, "recursion_limit": 1000}
    started = time.perf_counter()
    for item in given:
        if mode == "sync":
            app.invoke(item, config, durability="sync")
        else:
            await app.ainvoke(item, config, durability="sync")
    return time.perf_counter() - started


# -- tables -----------------------------------------------------------------------------------
def table(mode: str, results: dict[str, dict[str, Cell]], names: list[str]) -> str:
    rows = []
    for case_name, cells in results.items():
        ref, mem = cells[REFERENCE[mode]], cells.get(MEMORY)
        for name in names:
            c = cells[name]
            part = "-"
            if name != MEMORY and mem is not None and ref.checkpoint_ms > mem.checkpoint_ms:
                saver = c.checkpoint_ms - mem.checkpoint_ms
                part = f"{saver:.3f} ({saver / (ref.checkpoint_ms - mem.checkpoint_ms):.2f}x)"
            rows.append([
                case_name, name, str(len(c.seconds)), str(c.checkpoints),
                "-" if name == MEMORY else str(c.commits), f"{c.run_ms:.2f}",
                f"{c.checkpoint_ms:.3f}", f"{c.checkpoint_ms / ref.checkpoint_ms:.2f}x", part,
            ])  # fmt: skip
    return markdown(
        ["graph", "system", "runs", "checkpoints a run", "commits a run", "ms a run (median)",
         "ms a checkpoint", "vs reference", "saver's ms a checkpoint (vs reference's)"],
        rows, numeric_from=2,
    )  # fmt: skip


def targets(results: dict[str, dict[str, dict[str, Cell]]]) -> str:
    rows = []
    for mode, by_case in results.items():
        for case_name, cells in by_case.items():
            r = cells[SAVEGAME].checkpoint_ms / cells[REFERENCE[mode]].checkpoint_ms
            rows.append([f"{'invoke' if mode == 'sync' else 'ainvoke'} {case_name}",
                         f"<= {REFERENCE[mode]}", f"{r:.2f}x", "met" if r <= 1 else "MISSED"])  # fmt: skip
    return markdown(["SavegameSaver, per checkpoint", "goal", "measured", "verdict"], rows,
                    numeric_from=2)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    def ints(t: str) -> list[int]:
        return [int(p) for p in t.split(",") if p]

    def words(t: str) -> list[str]:
        return [p for p in t.split(",") if p]

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--threads", default=200, type=int,
                        help="short threads per system and graph (default 200)")  # fmt: skip
    parser.add_argument("--long", default=[100, 400], type=ints,
                        help="checkpoints of the long runs (default 100,400)")  # fmt: skip
    parser.add_argument("--long-repeat", default=3, type=int, help="runs per long size")
    parser.add_argument("--warmup", default=3, type=int, help="uncounted first runs per system")
    parser.add_argument("--message-bytes", default=512, type=int,
                        help="text of each message (default 512)")  # fmt: skip
    parser.add_argument("--cases", default=[], type=words,
                        help="only these graphs: chat3,chat5,chat10,interrupt,subgraph,chat100...")  # fmt: skip
    parser.add_argument("--modes", default=["sync", "async"], type=words, help="sync,async")
    parser.add_argument("--no-memory", action="store_true", help="leave InMemorySaver out")
    parser.add_argument("--normal", action="store_true",
                        help="every saver at synchronous=NORMAL: what is left is CPU")  # fmt: skip
    args = parser.parse_args(argv)
    started = time.perf_counter()
    out = [f"Machine: {machine(lg_versions())}", ""]
    every: dict[str, dict[str, dict[str, Cell]]] = {}
    with tempfile.TemporaryDirectory(prefix="savegame-lg-threads-") as tmp:
        floors = [commit_floor(Path(tmp))]
        for mode in args.modes:
            names = [REFERENCE[mode], SAVEGAME] + ([] if args.no_memory else [MEMORY])
            every[mode] = results = {}
            for case in cases(args):
                print(f"{mode} {case.name}", file=sys.stderr, flush=True)
                results[case.name] = asyncio.run(measure(case, mode, names, Path(tmp), args))
            settings = {n: c.settings for n, c in next(iter(results.values())).items()}
            out += [f"{'invoke' if mode == 'sync' else 'ainvoke'}, durability='sync'; "
                    + "; ".join(f"{n}: {s}" for n, s in settings.items()), ""]  # fmt: skip
            out += [table(mode, results, names), ""]
        floors.append(commit_floor(Path(tmp)))
    out.append(
        "commits a run: COMMIT statements of one more run, traced on the saver's connection. "
        "ms a run: median over the runs of one invoke (interrupt: both invokes). ms a checkpoint: "
        "that over the checkpoints a run stored. vs reference: against SqliteSaver (invoke) / "
        "AsyncSqliteSaver (ainvoke) in the same run. saver's ms a checkpoint: over "
        "InMemorySaver's (what the saver adds to LangGraph's own work), and its ratio to the "
        "reference's."
    )
    out += [
        "",
        "One bare commit here (INSERT of 1 KB, WAL, FULL, same directory; median of 300): "
        f"{floors[0]:.3f} ms before the runs, {floors[1]:.3f} ms after.",
        "",
        targets(every),
    ]
    print("\n".join(out))
    print(f"\nWall time {time.perf_counter() - started:.0f} s.", file=sys.stderr)


def lg_versions() -> str:
    return ", ".join(
        f"{d} {version(d)}" for d in ("langgraph", "langgraph-checkpoint-sqlite", "aiosqlite")
    )


if __name__ == "__main__":
    main()
