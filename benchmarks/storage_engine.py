"""Storage engine targets (issue 4), side by side with LangGraph's SqliteSaver in one run.

1. The appending loop of ``checkpoint_overhead.py`` (a 2 KB message of pseudo-prose
   per step, a checkpoint per step) for savegame, LangGraph and the bare SQLite
   commit floor at 50/100/200/400 steps, and savegame and the floor alone at
   2,000: stored bytes and per-step overhead.
2. Loading the latest state of the 400- and 2,000-step runs in a fresh process:
   a child opens the store with ``savegame.get_checkpoint(run_id, store=url)``;
   only that call is timed (the child's ``import savegame`` is reported apart).
   Beside it, the same child parses the loaded state from one JSON document:
   a reference measured in the same run, since absolute milliseconds move
   2x between two VMs of the same kind.
3. Listing the 2,000-checkpoint history without decoding states
   (``savegame.history(run_id, store=url)``).

Then a table of the targets, each marked met or missed.

    python benchmarks/storage_engine.py --repeat 5
    python benchmarks/storage_engine.py --repeat 1 --profile   # where the time goes
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import checkpoint_overhead as overhead
from workload import machine, markdown, median_ms, zstd_ratio

import savegame

# The child measures only what a fresh process pays: interpreter start-up is
# outside both numbers; the import is timed apart from the load.
CHILD = """
import json, sys, time
started = time.perf_counter()
import savegame
imported = time.perf_counter()
url, run_id, steps, profile = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
if profile:
    import cProfile, pstats
    prof = cProfile.Profile()
    prof.enable()
t0 = time.perf_counter()
cp = savegame.get_checkpoint(run_id, store=url)
t1 = time.perf_counter()
if profile:
    prof.disable()
# A second load in the same process: what is left once lazy imports and caches are warm.
t2 = time.perf_counter()
savegame.get_checkpoint(run_id, store=url)
t3 = time.perf_counter()
assert len(cp.state["messages"]) == steps, len(cp.state["messages"])
# The same-run reference: parsing this very state from one JSON document, the
# least a store that keeps state as JSON pays (median of 5, in this process).
import orjson, statistics
document = orjson.dumps(cp.state)
parses = []
for _ in range(5):
    t4 = time.perf_counter()
    orjson.loads(document)
    parses.append(time.perf_counter() - t4)
print(json.dumps({"import": imported - started, "load": t1 - t0, "again": t3 - t2,
                  "parse": statistics.median(parses)}))
if profile:
    pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(12)
"""

LOAD_STEPS = (400, 2000)
HISTORY_STEPS = 2000


@dataclass(frozen=True, slots=True)
class Load:
    steps: int
    import_ms: float
    load_ms: float
    """Median over children of the first ``get_checkpoint`` in a fresh process (open included)."""
    again_ms: float
    """The second call in the same child."""
    parse_ms: float
    """``orjson.loads`` of the same state as one JSON document, in the same child."""


def fresh_process_load(db: Path, run_id: str, steps: int, children: int) -> Load:
    runs = []
    for _ in range(children):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, f"sqlite:///{db}", run_id, str(steps), "0"],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        runs.append(json.loads(out.stdout))

    def ms(key: str) -> float:
        return float(statistics.median(r[key] for r in runs)) * 1e3

    return Load(steps, ms("import"), ms("load"), ms("again"), ms("parse"))


def profile_child(db: Path, run_id: str, steps: int) -> str:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, f"sqlite:///{db}", run_id, str(steps), "1"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return out.stdout.split("\n", 1)[1]


def history_ms(db: Path, run_id: str, repeat: int) -> tuple[float, float]:
    """Median ms of ``history`` by URL (opens and closes the store) and on an open handle."""
    url = f"sqlite:///{db}"
    count = len(savegame.history(run_id, store=url))
    if count != HISTORY_STEPS + 1:  # the input checkpoint, then one per step
        raise RuntimeError(f"history has {count} checkpoints, expected {HISTORY_STEPS + 1}")
    by_url = median_ms(lambda: savegame.history(run_id, store=url), repeat)
    store = savegame.open_store(url)
    try:
        on_handle = median_ms(lambda: savegame.history(run_id, store=store), repeat)
    finally:
        store.close()
    return by_url, on_handle


def profiled(call: Callable[[], object], *restrict: str | int, sort: str = "tottime") -> str:
    prof = cProfile.Profile()
    prof.runcall(call)
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats(sort).print_stats(*(restrict or (12,)))
    return out.getvalue()


def profile_run(steps: int) -> str:
    """cProfile of one savegame run at ``steps``: where per-step (and keyframe) time goes."""
    system = next(s for s in overhead.systems() if s.name == "savegame")
    # Cumulative, savegame's own functions: shows keyframes against deltas and the write.
    return profiled(
        lambda: overhead.sample(system, steps, None),
        "savegame/(codec|stores)",
        16,
        sort="cumulative",
    )


# -- the targets table -----------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def targets(results: overhead.Results, loads: Sequence[Load], history: tuple[float, float]) -> str:
    cells, found = results.cells, results.systems
    # The targets are at synchronous=FULL; --normal rows are context.
    index = {s.name: i for i, s in enumerate(found) if s.synchronous == "FULL"}
    rows: list[list[str]] = []
    sg, floor, lg = index["savegame"], index["bare SQLite"], index.get("LangGraph SqliteSaver")
    if lg is not None and (lg, 400) in cells and (sg, 400) in cells:
        share = cells[sg, 400].stored_bytes() / cells[lg, 400].stored_bytes()
        rows.append(["stored bytes vs LangGraph, 400 steps", "< 1/100",
                     f"1/{1 / share:.0f} ({cells[sg, 400].stored_bytes() / 1e6:.2f} MB)",
                     verdict(share < 0.01)])  # fmt: skip
    steps = [n for n in [*results.step_counts, *results.solo_counts] if (sg, n) in cells]
    ratios = [cells[sg, n].step_ms() / cells[floor, n].step_ms() for n in steps]
    medians = [cells[sg, n].step_ms() for n in steps]
    for n, r in zip(steps, ratios, strict=True):
        rows.append([f"per-step overhead vs floor (median), {n} steps", "< 2x",
                     f"{r:.2f}x ({cells[sg, n].step_ms():.3f} ms)", verdict(r < 2)])  # fmt: skip
    spread = max(medians) / min(medians)
    means = [cells[sg, n].ms_per_step(n) for n in steps]
    mean_spread = max(means) / min(means)
    rows.append([f"per-step median flat in steps ({steps[0]}..{steps[-1]})", "flat",
                 f"max/min {spread:.2f}", verdict(spread < 1.5)])  # fmt: skip
    rows.append([f"per-step mean (wall / steps) flat ({steps[0]}..{steps[-1]})", "flat",
                 f"max/min {mean_spread:.2f}", verdict(mean_spread < 1.5)])  # fmt: skip
    limits = {400: 2.0, 2000: 5.0}
    for load in loads:
        limit = limits.get(load.steps)
        rows.append([f"load latest, fresh process, {load.steps} steps", f"< {limit:g} ms",
                     f"{load.load_ms:.2f} ms", verdict(limit is not None and load.load_ms < limit)])  # fmt: skip
    rows.append([f"history of {HISTORY_STEPS} checkpoints, by URL", "< 50 ms",
                 f"{history[0]:.1f} ms", verdict(history[0] < 50)])  # fmt: skip
    return markdown(["target", "goal", "measured", "verdict"], rows, numeric_from=2)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    overhead.add_arguments(parser)
    parser.add_argument("--children", default=7, type=int,
                        help="fresh processes per load measurement (default: 7)")  # fmt: skip
    parser.add_argument("--profile", action="store_true",
                        help="also print cProfile tables for a run, a load and a listing")  # fmt: skip
    args = parser.parse_args(argv)
    solo = sorted(set(args.solo_steps) | ({HISTORY_STEPS} - set(args.steps)))
    started = time.perf_counter()
    found = overhead.systems(normal=args.normal)
    with tempfile.TemporaryDirectory(prefix="savegame-bench-keep-") as keep:
        results = overhead.measure(found, args.steps, solo, args.repeat, Path(keep))
        print("fresh-process loads", file=sys.stderr, flush=True)
        loads = [
            fresh_process_load(*results.savegame_run(n), n, args.children)
            for n in LOAD_STEPS
            if n in [*args.steps, *solo]
        ]
        history = history_ms(*results.savegame_run(HISTORY_STEPS), repeat=21)
        profiles: list[tuple[str, str]] = []
        if args.profile:
            db, run_id = results.savegame_run(HISTORY_STEPS)
            profiles = [
                (f"savegame run, {HISTORY_STEPS} steps", profile_run(HISTORY_STEPS)),
                (f"fresh-process load, {HISTORY_STEPS} steps",
                 profile_child(db, run_id, HISTORY_STEPS)),
                (f"history, {HISTORY_STEPS} checkpoints",
                 profiled(lambda: savegame.history(run_id, store=f"sqlite:///{db}"))),
            ]  # fmt: skip
    print(f"Machine: {machine(overhead.langgraph_versions())}")
    print(f"Workload: zstd shrinks one message body {zstd_ratio():.2f}x (median of 50)")
    print()
    print(overhead.table(results))
    print()
    print(overhead.legend(args.repeat))
    print()
    print(markdown(
        ["steps", "child import ms", "load ms (fresh process)", "load ms (2nd call)",
         "JSON parse of the state ms", "load vs parse"],
        [[str(x.steps), f"{x.import_ms:.1f}", f"{x.load_ms:.2f}", f"{x.again_ms:.2f}",
          f"{x.parse_ms:.2f}", f"{x.load_ms / x.parse_ms:.1f}x"]
         for x in loads],
        numeric_from=0,
    ))  # fmt: skip
    print()
    print(f"Medians over {args.children} children. "
          f"history({HISTORY_STEPS} checkpoints): {history[0]:.1f} ms by URL "
          f"(open + list + close), {history[1]:.1f} ms on an open store; median of 21.")  # fmt: skip
    print()
    print(targets(results, loads, history))
    for title, text in profiles:
        print(f"\n### cProfile: {title}\n\n```\n{text.strip()}\n```")
    print(f"\nWall time {time.perf_counter() - started:.0f} s.", file=sys.stderr)


if __name__ == "__main__":
    main()
