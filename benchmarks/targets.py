"""Issue 34's table in one run: every row measured against its reference in the same run.

Each row is a ratio (or, for the CPU row, milliseconds) against a reference measured in
this run, with the issue's target and whether it is met. The workload is
``concurrency.py``'s (each step appends one 2 KB pseudo-prose message, ``workload.message``,
to a list in the state, a checkpoint after every step), and so are the measurements:
this script imports them and only picks, pairs and judges.

1. ``arun`` alone on a SQLite file: wall per step over one bare commit per step (an
   INSERT of the same 2 KB and COMMIT, WAL, ``synchronous=FULL``, one thread);
2. the same for sync ``run``;
3. ``--runs`` concurrent ``arun`` calls in one process (one event loop) on SQLite:
   checkpoints/s over raw INSERT+COMMIT from as many threads (as many commits);
4. the same runs on SQLite over the same runs on ``memory://``;
5. the same runs on PostgreSQL over raw INSERT+COMMIT from as many connections;
6. the same runs on PostgreSQL over ``memory://``;
7. ``arun`` alone on ``memory://``: the process's CPU per step, in ms; with
   ``--instructions``, judged instead as the issue's own cut (0.128 -> 0.08 ms: 0.625x)
   in instructions a step (callgrind, which the machine's speed does not move), over the
   same step of the tree the issue was measured on (``BASELINE``), counted in this run;
8. the PostgreSQL runs split over ``--processes`` worker processes over one process;
9. LangGraph graphs of 3-10 checkpoints a run (``langgraph_threads.py``'s chat3, chat5,
   chat10, interrupt and subgraph, ``invoke``, ``durability="sync"``): per checkpoint,
   ``SavegameSaver`` on a SQLite file over ``SqliteSaver`` on a file; the worst graph is
   the row's value, every graph's ratio is printed under the table.

Rows 1, 2 and 7 come from ``--single-repeat`` rounds, rows 3-6 and 8 from ``--repeat``
rounds; a round runs every system its rows need once, in turn, on fresh stores. A ratio
is the median of the rounds' ratios (their range is printed beside it: on a shared
machine other processes' fsyncs move a round's numbers far more than a change to
savegame does), CPU the median of the rounds'. PostgreSQL rows are
skipped, with a line saying so, when the server (``SAVEGAME_BENCH_PG``) does not answer;
row 9 when LangGraph is not installed.

    python benchmarks/targets.py
    python benchmarks/targets.py --rows 1,2,7 --single-repeat 7
    python benchmarks/targets.py --quick --rows 1,2,3,4,7 --json   # a smoke test
    python benchmarks/targets.py --rows 7 --instructions            # ~4 min, valgrind and git
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from concurrency import (
    Row,
    raw_postgres_row,
    raw_sqlite_row,
    savegame_processes_row,
    savegame_row,
    single_rows,
)
from step_cpu import floor_run
from workload import machine, markdown, message, version

from stores import PG_URL, fresh_postgres, fresh_sqlite

ALL_ROWS = tuple(range(1, 10))
POSTGRES_ROWS = (5, 6, 8)
SINGLE_ROWS = (1, 2, 7)
MANY_ROWS = (3, 4, 5, 6, 8)
LANGGRAPH_CASES = ("chat3", "chat5", "chat10", "interrupt", "subgraph")

BARE = "bare SQLite commit"
HOPPED = "bare SQLite commit, one thread hop"
RUN = "savegame run, SQLite"
ARUN = "savegame arun, SQLite"
MEMORY = "savegame arun, memory://"


@dataclass(frozen=True, slots=True)
class Target:
    row: int
    what: str
    measured: float
    unit: str
    """``x`` for a ratio, ``ms`` for row 7's CPU per step."""
    shown: str
    """The measured cell: the value, and the absolute number behind a ratio."""
    reference: str
    op: str
    """``<=`` or ``>=``: which side of ``goal`` meets the target."""
    goal: float
    detail: dict[str, float] = field(default_factory=dict)

    @property
    def met(self) -> bool:
        return self.measured <= self.goal if self.op == "<=" else self.measured >= self.goal

    @property
    def target(self) -> str:
        # str(): 1.0 stays "1.0" as the issue writes it (":g" would print "1")
        return f"{self.op} {self.goal}{' ms' if self.unit == 'ms' else self.unit}"


def ratio_text(value: float, goal: float) -> str:
    """Two decimals as the issue writes them, three when two would round onto the goal
    (0.598 shown as 0.60 beside "missed" against >= 0.6 reads as a contradiction)."""
    text = f"{value:.2f}"
    return f"{value:.3f}" if float(text) == goal and value != goal else text


def paired(mine: Sequence[float], theirs: Sequence[float]) -> tuple[float, list[float]]:
    """The median of the rounds' ratios, and the ratios. A round's systems ran back to
    back, so a machine busier in one round (other processes' fsyncs, here) weighs on
    both sides of that round's ratio; a ratio of two medians could pair a quiet round's
    number with a busy one's."""
    ratios = [a / b for a, b in zip(mine, theirs, strict=True)]
    return statistics.median(ratios), ratios


def spread(ratios: Sequence[float]) -> str:
    return "" if len(ratios) < 2 else f"; rounds {min(ratios):.2f}-{max(ratios):.2f}"


@dataclass(frozen=True, slots=True)
class Skipped:
    row: int
    reason: str


# -- rows 1, 2, 7: one run alone ------------------------------------------------------------


def one_run_targets(rows: set[int], steps: int, repeat: int) -> list[Target]:
    wanted = {BARE} if rows & {1, 2} else set()
    wanted |= {ARUN, HOPPED} if 1 in rows else set()
    wanted |= {RUN} if 2 in rows else set()
    wanted |= {MEMORY} if 7 in rows else set()
    # One repeat a call: a ratio per round (see paired), each round's systems interleaved.
    rounds = [{s.what: s for s in single_rows(steps, 1, only=wanted)} for _ in range(repeat)]

    def walls(system: str) -> list[float]:
        return [r[system].wall_ms for r in rounds]

    out = []
    for row, system, verb, goal in ((1, ARUN, "`arun`", 1.5), (2, RUN, "sync `run`", 1.3)):
        if row in rows:
            ratio, ratios = paired(walls(system), walls(BARE))
            ms, bare = statistics.median(walls(system)), statistics.median(walls(BARE))
            reference = f"bare INSERT 2 KB + COMMIT: {bare:.3f} ms/step"
            extra: dict[str, float] = {}
            if row == 1:
                # What an event loop that must not block can reach at best: the same
                # commit sent to a thread and awaited. The hop is the floor's own cost.
                hopped = statistics.median(walls(HOPPED))
                hop_ratio, _ = paired(walls(HOPPED), walls(BARE))
                reference += f"; through one thread hop: {hopped:.3f} ({hop_ratio:.2f}x)"
                extra = {"hopped_ms": hopped, "hopped_ratio": hop_ratio}
            out.append(Target(
                row, f"1 run, {verb}, SQLite file: wall per step vs one bare WAL+FULL commit",
                ratio, "x", f"{ratio_text(ratio, goal)}x ({ms:.3f} ms/step{spread(ratios)})",
                reference, "<=", goal, {"ms_per_step": ms, "reference_ms": bare, **extra},
            ))  # fmt: skip
    if 7 in rows:
        cpu = statistics.median(r[MEMORY].cpu_ms for r in rounds)
        wall = statistics.median(walls(MEMORY))
        floor = floor_cpu_ms(steps, repeat)
        # The issue states this one in milliseconds: the CPU a step costs with no store to
        # speak of, the ceiling every store's row is read against. Beside it, the least
        # such a step costs in Python (step_cpu.floor_run), so a slow machine's day reads
        # as a ratio too.
        out.append(Target(
            7, "`memory://`, 1 run, `arun`, CPU per step", cpu, "ms",
            f"{cpu:.3f} ms ({cpu / floor:.1f}x the floor)",
            f"none (absolute); the step's floor in Python {floor:.3f} ms; wall {wall:.3f} ms/step",
            "<=", 0.08, {"cpu_ms": cpu, "wall_ms": wall, "floor_cpu_ms": floor},
        ))  # fmt: skip
    return out


BASELINE = "fa02193"
"""main when issue 34's work began ("A cheaper encode" in docs/benchmarks.md starts from
it): the step the issue's 0.128 ms was measured on."""
ISSUE_CUT = 0.08 / 0.128
"""Row 7 as the issue asks it, without the milliseconds: a step at most 0.625 of what it
cost. The same instructions read 0.080 ms on one day's VM and 0.14 on another's, and a
target is a ratio to a same-run reference, never absolute milliseconds."""


def instructions_target(steps: int, cpu: Target | None) -> Target | str:
    """Row 7 in instructions: ``memory-arun``'s step now over the same step at ``BASELINE``,
    both counted by callgrind in this run (``step_cpu.instructions``); or why not."""
    from step_cpu import instructions

    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="savegame-baseline-") as tmp:
        try:
            tree = subprocess.run(
                ["git", "archive", BASELINE, "src"], cwd=root, capture_output=True, check=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=tree, check=True)
            note(f"row 7 in instructions: this tree, then {BASELINE}'s (callgrind)")
            now = instructions("memory-arun", steps)
            then = instructions("memory-arun", steps, src=Path(tmp) / "src")
        except (OSError, subprocess.CalledProcessError) as exc:
            return f"--instructions needs valgrind and this git checkout ({exc})"
    ratio = now / then
    besides = f"; CPU {cpu.measured:.3f} ms a step in this run" if cpu else ""
    return Target(
        7, "`memory://`, 1 run, `arun`, a step's instructions vs the issue's tree",
        ratio, "x", f"{ratio_text(ratio, ISSUE_CUT)}x ({now / 1e3:,.0f}k instructions a step)",
        f"the same step at {BASELINE}, this run: {then / 1e3:,.0f}k{besides}",
        "<=", round(ISSUE_CUT, 3), {"instructions": now, "baseline_instructions": then},
    )  # fmt: skip


def floor_cpu_ms(steps: int, repeat: int) -> float:
    """CPU ms a step of ``step_cpu.floor_run``: the step called, its appended item encoded,
    compressed and checksummed, kept in a dict; the median of ``repeat`` runs."""
    got = []
    for _ in range(max(repeat, 1)):
        started = time.process_time()
        floor_run(steps)
        got.append((time.process_time() - started) / steps * 1e3)
    return statistics.median(got)


# -- rows 3-6, 8: many runs at once ---------------------------------------------------------


def many_runs(
    rows: set[int], r: int, steps: int, repeat: int, processes: int
) -> dict[str, list[Row]]:
    """Each round runs every system the rows need once, in turn, on fresh stores."""
    systems: dict[str, Callable[[], Row]] = {}
    commits = r * (steps + 1)  # as many as savegame writes: one a step plus each run's first

    def on_sqlite() -> Row:
        with fresh_sqlite() as url:
            return savegame_row("SQLite", url, r, steps)

    def on_postgres() -> Row:
        with fresh_postgres() as url:
            return savegame_row("PostgreSQL", url, r, steps)

    def on_processes() -> Row:
        with fresh_postgres() as url:
            return savegame_processes_row(url, r, steps, processes)

    if rows & {4, 6}:
        systems["memory"] = lambda: savegame_row("memory://", "memory://", r, steps)
    if rows & {3, 4}:
        systems["sqlite"] = on_sqlite
    if 3 in rows:
        systems["raw sqlite"] = lambda: raw_sqlite_row(r, commits)
    if rows & {5, 6, 8}:
        systems["postgres"] = on_postgres
    if 8 in rows:
        systems["processes"] = on_processes
    if 5 in rows:
        systems["raw postgres"] = lambda: raw_postgres_row(r, commits)
    got: dict[str, list[Row]] = {name: [] for name in systems}
    for i in range(repeat):
        for name, measure in systems.items():
            note(f"{r} runs, round {i + 1}/{repeat}: {name}")
            got[name].append(measure())
    return got


def many_targets(rows: set[int], got: dict[str, list[Row]], r: int, processes: int) -> list[Target]:
    def rates(system: str) -> list[float]:
        return [x.per_second for x in got[system]]

    specs = (
        (3, "sqlite", "raw sqlite", f"SQLite, checkpoints/s vs raw INSERT+COMMIT from {r} threads",
         f"raw INSERT 2 KB + COMMIT, {r} threads", 2.5, "x"),
        (4, "sqlite", "memory", "SQLite vs the same runs on `memory://`",
         f"`memory://`, {r} runs", 0.8, ""),
        (5, "postgres", "raw postgres", f"PostgreSQL, checkpoints/s vs raw INSERT+COMMIT from {r} connections",
         f"raw INSERT 2 KB + COMMIT, {r} connections", 1.0, "x"),
        (6, "postgres", "memory", "PostgreSQL vs the same runs on `memory://`",
         f"`memory://`, {r} runs", 0.6, ""),
        (8, "processes", "postgres", f"PostgreSQL, {processes} worker processes vs one process",
         f"one process, {r} runs", 1.5, "x"),
    )  # fmt: skip
    out = []
    for row, mine, theirs, what, reference, goal, unit in specs:
        if row not in rows:
            continue
        ratio, ratios = paired(rates(mine), rates(theirs))
        rate, ref_rate = statistics.median(rates(mine)), statistics.median(rates(theirs))
        shown = f"{ratio_text(ratio, goal)}{unit} ({rate:.0f}/s{spread(ratios)})"
        out.append(Target(
            row, f"{r} runs, {what}", ratio, unit, shown,
            f"{reference}: {ref_rate:.0f}/s", ">=", goal,
            {"per_second": rate, "reference_per_second": ref_rate},
        ))  # fmt: skip
    return out


# -- row 9: LangGraph ---------------------------------------------------------------------


def langgraph_target(threads: int, warmup: int, message_bytes: int) -> Target:
    import langgraph_threads as lt

    ns = argparse.Namespace(
        threads=threads, long=[], long_repeat=0, warmup=warmup, message_bytes=message_bytes,
        cases=list(LANGGRAPH_CASES), normal=False,
    )  # fmt: skip
    names = [lt.REFERENCE["sync"], lt.SAVEGAME]
    ratios: dict[str, float] = {}
    counts: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="savegame-targets-lg-") as tmp:
        for case in lt.cases(ns):
            note(f"LangGraph {case.name}, {threads} threads")
            cells = asyncio.run(lt.measure(case, "sync", names, Path(tmp), ns))
            mine, ref = cells[lt.SAVEGAME], cells[lt.REFERENCE["sync"]]
            ratios[case.name] = mine.checkpoint_ms / ref.checkpoint_ms
            counts[f"{case.name} checkpoints"] = mine.checkpoints
    worst = max(ratios, key=ratios.__getitem__)
    return Target(
        9, "LangGraph graphs, 3-10 checkpoints a run, per checkpoint, `invoke`",
        ratios[worst], "x", f"{ratio_text(ratios[worst], 1.0)}x (worst: {worst})",
        f"`SqliteSaver` on a file, same graphs ({message_bytes} B messages)", "<=", 1.0,
        {**ratios, **counts},
    )  # fmt: skip


# -- the table ------------------------------------------------------------------------------


def note(what: str) -> None:
    print(what, file=sys.stderr, flush=True)


def postgres_unreachable() -> str | None:
    """Why the PostgreSQL rows cannot run, or None when the server answers."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed"
    try:
        with psycopg.connect(PG_URL.split("?")[0], connect_timeout=3):
            pass
    except psycopg.Error as exc:
        return f"PostgreSQL unreachable at {PG_URL} ({str(exc).strip().splitlines()[0]})"
    return None


def table(found: Sequence[Target]) -> str:
    return markdown(
        ["#", "what", "measured (same run)", "reference", "target", "met/missed"],
        [[str(t.row), t.what, t.shown, t.reference, t.target, "met" if t.met else "missed"]
         for t in found],
        numeric_from=6,
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--rows",
        default=",".join(map(str, ALL_ROWS)),
        help="which rows of the table to measure (default all: 1,...,9)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke test: few steps, one repeat, few LangGraph threads",
    )
    parser.add_argument("--runs", type=int, default=64, help="concurrent runs of rows 3-6, 8")
    parser.add_argument("--steps", type=int, help="steps a run in rows 3-6, 8 (default 40)")
    parser.add_argument("--repeat", type=int, help="rounds of rows 3-6, 8 (default 3)")
    parser.add_argument("--processes", type=int, default=4, help="worker processes of row 8")
    parser.add_argument("--single-steps", type=int, help="steps of rows 1, 2, 7 (default 400)")
    parser.add_argument("--single-repeat", type=int, help="repeats of rows 1, 2, 7 (default 5)")
    parser.add_argument(
        "--lg-threads", type=int, help="LangGraph threads per graph and saver, row 9 (default 60)"
    )
    parser.add_argument(
        "--lg-message-bytes",
        type=int,
        default=512,
        help="row 9's message text (default 512, langgraph_threads.py's)",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help=f"row 7 in instructions over the same step at {BASELINE} (callgrind, ~4 min)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = parser.parse_args(argv)  # fmt: skip
    quick = args.quick

    def pick(given: int | None, full: int, small: int) -> int:
        return given if given is not None else (small if quick else full)

    steps, repeat = pick(args.steps, 40, 5), pick(args.repeat, 3, 1)
    single_steps, single_repeat = pick(args.single_steps, 400, 20), pick(args.single_repeat, 5, 1)
    lg_threads, lg_warmup = pick(args.lg_threads, 60, 3), 1 if quick else 3
    rows = {int(x) for x in args.rows.split(",") if x}
    if unknown := rows - set(ALL_ROWS):
        parser.error(f"no such row: {sorted(unknown)}")

    skipped: list[Skipped] = []
    if rows & set(POSTGRES_ROWS) and (why := postgres_unreachable()):
        skipped += [Skipped(r, why) for r in sorted(rows & set(POSTGRES_ROWS))]
    if 9 in rows:
        try:
            import langgraph_threads  # noqa: F401
        except ImportError as exc:
            skipped.append(Skipped(9, f"LangGraph is not installed ({exc})"))
    rows -= {s.row for s in skipped}

    load_before = os.getloadavg()
    started = time.perf_counter()
    for n in range(max(steps, single_steps)):
        message(n)  # the text is made once, outside every window
    found: list[Target] = []
    if rows & set(SINGLE_ROWS):
        note(f"1 run, {single_steps} steps, x{single_repeat}")
        found += one_run_targets(rows, single_steps, single_repeat)
    if rows & set(MANY_ROWS):
        got = many_runs(rows, args.runs, steps, repeat, args.processes)
        found += many_targets(rows, got, args.runs, args.processes)
    if 9 in rows:
        found.append(langgraph_target(lg_threads, lg_warmup, args.lg_message_bytes))
    uncounted = None  # why row 7 stayed in CPU ms when --instructions asked otherwise
    if 7 in rows and args.instructions:
        cpu = next((t for t in found if t.row == 7), None)
        counted = instructions_target(single_steps, cpu)
        if isinstance(counted, str):
            uncounted = counted
        else:
            found = [t for t in found if t.row != 7] + [counted]
    found.sort(key=lambda t: t.row)
    load_after = os.getloadavg()
    settings = {
        "runs": args.runs, "steps": steps, "repeat": repeat, "processes": args.processes,
        "single_steps": single_steps, "single_repeat": single_repeat,
        "lg_threads": lg_threads, "lg_message_bytes": args.lg_message_bytes,
    }  # fmt: skip
    about = machine(f"langgraph {version('langgraph')}")
    if args.json:
        print(json.dumps({
            "machine": about, "settings": settings,
            "load_average": {"before": load_before, "after": load_after},
            "seconds": round(time.perf_counter() - started, 1),
            "rows": [{**asdict(t), "target": t.target, "met": t.met} for t in found],
            "skipped": [asdict(s) for s in skipped],
            "row_7_not_in_instructions": uncounted,
        }, indent=2))  # fmt: skip
        return
    print(about)
    print(", ".join(f"{k} {v}" for k, v in settings.items()))
    print(
        "load average (1, 5, 15 min): "
        f"{' '.join(f'{x:.2f}' for x in load_before)} before, "
        f"{' '.join(f'{x:.2f}' for x in load_after)} after; "
        f"{time.perf_counter() - started:.0f} s\n"
    )
    print(table(found) if found else "(no row measured)")
    if uncounted:
        print(f"\nrow 7 in CPU ms, not in instructions: {uncounted}")
    for reason in dict.fromkeys(s.reason for s in skipped):
        which = ", ".join(str(s.row) for s in skipped if s.reason == reason)
        print(f"\n{'rows' if ',' in which else 'row'} {which} skipped: {reason}")
    lg = next((t for t in found if t.row == 9), None)
    if lg:
        each = ", ".join(
            f"{k} ({lg.detail[f'{k} checkpoints']:.0f} checkpoints) {lg.detail[k]:.2f}x"
            for k in LANGGRAPH_CASES
        )
        print(f"\nrow 9, SavegameSaver per checkpoint over SqliteSaver's, each graph: {each}")


if __name__ == "__main__":
    main()
