"""Where a LangGraph run's saver CPU goes: `SavegameSaver` against `SqliteSaver`, by part.

Row 9 of issue 34 (``targets.py``) is a wall-time ratio per checkpoint, and at
``synchronous=NORMAL`` (no fsync) it stays where it is with the fsync: the gap is CPU.
This splits it. One graph of ``langgraph_threads.py`` (``chat3``, ``chat10``,
``interrupt``, ``subgraph``) runs on both savers over SQLite files at
``synchronous=NORMAL``, ``durability="sync"``, runs interleaved, each a new thread:

* by default, the thread CPU (``time.thread_time_ns``, in whichever of LangGraph's
  threads runs them) of each saver's ``get_tuple``, ``put`` and ``put_writes``, and of
  savegame's parts below them (the encode and its pieces, the SQL puts, the journal),
  per run. Wrapping costs a few microseconds a call; the parts are for reading against
  each other, the savers' totals against each other.
* ``--instructions``: the whole process's instructions per run under callgrind (every
  thread, LangGraph's own work included), for each saver: ``--runs`` runs less none,
  after the same warm-up, so the store's set-up cancels out. Repeats differ by about
  1 %: LangGraph's two pool threads race, and a task write that misses its checkpoint
  pays a commit of its own.

    python benchmarks/langgraph_parts.py --case interrupt --runs 300      # ~10 s
    python benchmarks/langgraph_parts.py --case chat3 --instructions      # ~1 minute
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import langgraph_threads as lt

SAVERS = ("sqlite", "savegame")
WARMUP = 5
_TOTAL = re.compile(rb"Collected : (\d+)")


@asynccontextmanager
async def saver(kind: str, path: Path) -> AsyncIterator[Any]:
    """``langgraph_threads``' saver of ``kind`` on a file at ``synchronous=NORMAL`` (what
    is left is CPU). Entered on an event loop, used from it with sync ``invoke``."""
    name = lt.SAVEGAME if kind == "savegame" else lt.REFERENCE["sync"]
    async with lt.open_saver(name, path, normal=True) as found:
        yield found


def case(name: str) -> lt.Case:
    args = argparse.Namespace(message_bytes=512, threads=1, long=[], long_repeat=1, cases=[name])
    return lt.cases(args)[0]


def runner(graph: Any, case: lt.Case, prefix: str) -> Callable[[int], None]:
    def one(i: int) -> None:
        config = {"configurable": {"thread_id": f"{prefix}-{i}"}}
        for given in case.inputs(i):
            graph.invoke(given, config, durability="sync")

    return one


# -- thread CPU by part -------------------------------------------------------------------
class Parts:
    """Thread CPU and calls of wrapped functions, by label."""

    def __init__(self) -> None:
        self.ns: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()

    def wrap(self, owner: Any, attr: str, label: str) -> None:
        inner = getattr(owner, attr)

        @functools.wraps(inner)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time_ns()
            try:
                return inner(*args, **kwargs)
            finally:
                self.ns[label] += time.thread_time_ns() - start
                self.calls[label] += 1

        setattr(owner, attr, timed)


def wrap_all(parts: Parts) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    from savegame.codec import _delta, _engine, _envelope, _packs
    from savegame.integrations.langgraph import _lines
    from savegame.langgraph import SavegameSaver
    from savegame.stores.sqlite import _store

    for method in ("get_tuple", "put", "put_writes"):
        parts.wrap(SqliteSaver, method, f"sqlite {method}")
        parts.wrap(SavegameSaver, method, f"savegame {method}")
    for owner, attr, label in [
        (_engine.Encoder, "encode", "put: encode"),
        (_engine.Encoder, "_encoded", "put: encode: values as trees"),
        (_delta, "diff_trees", "put: encode: tree diff"),
        (_engine.Encoder, "_keyframe", "put: encode: keyframe"),
        (_packs.Packer, "tree", "put: encode: keyframe: packer"),
        (_envelope, "seal_record", "put: encode: seal_record"),
        (_lines.Lines, "_create", "put: first of a line (create_run)"),
        (_lines.Lines, "_put", "put: SQL put (one transaction)"),
        (_store.SqliteStore, "_put", "put: SQL put: its statements"),
        (_lines.Lines, "encoded_all", "put_writes: values encoded"),
        (_lines.Lines, "_journaled", "put_writes: journal entries sealed"),
        (_store.SqliteStore, "record_intents", "put_writes: own commits (record_intents)"),
        (_lines.Lines, "load", "get_tuple: load the checkpoint"),
        (_lines.Lines, "writes", "get_tuple: its pending writes"),
        (_store.SqliteStore, "list_runs", "get_tuple/put: the thread's lines (list_runs)"),
    ]:
        parts.wrap(owner, attr, label)  # the engine calls the modules' functions by attribute


def by_part(name: str, runs: int) -> str:
    parts = Parts()
    wrap_all(parts)
    asyncio.run(_run_both(case(name), runs, parts))
    lines = [f"{name}: thread CPU a run, {runs} runs a saver, synchronous=NORMAL", ""]
    lines += ["| part | µs a run | calls a run |", "| --- | ---: | ---: |"]
    totals = {
        kind: sum(parts.ns[f"{kind} {m}"] for m in ("get_tuple", "put", "put_writes"))
        for kind in SAVERS
    }
    for kind in SAVERS:
        lines.append(f"| **{kind}: the three methods** | **{totals[kind] / runs / 1e3:.0f}** | |")
        for method in ("get_tuple", "put", "put_writes"):
            label = f"{kind} {method}"
            lines.append(_row(label, parts, runs))
            if kind == "savegame":
                for part in sorted(p for p in parts.ns if p.split(":")[0] == method):
                    lines.append(_row(part, parts, runs, "- "))
    for part in sorted(p for p in parts.ns if "/" in p.split(":")[0]):
        lines.append(_row(part, parts, runs, "- "))
    lines.append("")
    lines.append(
        f"savegame over sqlite, the three methods: {totals['savegame'] / totals['sqlite']:.2f}x"
    )
    return "\n".join(lines)


async def _run_both(found: lt.Case, runs: int, parts: Parts) -> None:
    with tempfile.TemporaryDirectory(prefix="savegame-lg-parts-") as tmp:
        async with (
            saver("sqlite", Path(tmp) / "lg.db") as sq,
            saver("savegame", Path(tmp) / "sg.db") as sg,
        ):
            ones = {
                kind: runner(found.graph.compile(checkpointer=s), found, kind)
                for kind, s in (("sqlite", sq), ("savegame", sg))
            }
            for i in range(WARMUP):
                for one in ones.values():
                    one(-1 - i)
            parts.ns.clear()
            parts.calls.clear()
            for i in range(runs):
                for kind in SAVERS if i % 2 else reversed(SAVERS):
                    ones[kind](i)


def _row(label: str, parts: Parts, runs: int, indent: str = "") -> str:
    ms, calls = parts.ns[label] / runs / 1e3, parts.calls[label] / runs
    return f"| {indent}{label} | {ms:.0f} | {calls:.1f} |"


# -- whole-process instructions per run ------------------------------------------------------
def child(name: str, kind: str, runs: int) -> None:
    asyncio.run(_run_one(case(name), kind, runs))


async def _run_one(found: lt.Case, kind: str, runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="savegame-lg-parts-") as tmp:
        async with saver(kind, Path(tmp) / "db") as s:
            one = runner(found.graph.compile(checkpointer=s), found, kind)
            for i in range(WARMUP):
                one(-1 - i)
            for i in range(runs):
                one(i)


def instructions(name: str, kind: str, runs: int) -> float:
    """Instructions a run: callgrind's total for ``runs`` runs less that for none."""

    def total(count: int) -> int:
        done = subprocess.run(
            [
                "valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                sys.executable, __file__, "--child", name, kind, str(count),
            ],
            check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"},
        )  # fmt: skip
        return int(_TOTAL.findall(done.stderr)[-1])

    return (total(runs) - total(0)) / runs


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--case", default="interrupt",
                        help="chat3, chat5, chat10, interrupt or subgraph")  # fmt: skip
    parser.add_argument("--runs", type=int, default=None,
                        help="runs a saver (default 300; 20 with --instructions)")  # fmt: skip
    parser.add_argument("--instructions", action="store_true",
                        help="whole-process instructions a run under callgrind")  # fmt: skip
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        name, kind, count = args.child
        child(name, kind, int(count))
        return
    if args.instructions:
        runs = args.runs or 20
        counts = {kind: instructions(args.case, kind, runs) for kind in SAVERS}
        for kind in SAVERS:
            print(f"{args.case} {kind}: {counts[kind] / 1e6:.2f}M instructions a run ({runs} runs)")
        print(f"savegame over sqlite: {counts['savegame'] / counts['sqlite']:.2f}x")
        return
    print(by_part(args.case, args.runs or 300))


if __name__ == "__main__":
    main()
