"""The CPU of one checkpointed step, alone: the 2 KB-append run of ``concurrency.py``.

A step appends one 2 KB message (``workload.message``) to a list in the state and the
run checkpoints after every step. Three ways to run it, each a fresh store per repeat,
interleaved within a repeat so a machine that gets busier slows them alike:

* ``memory-arun``: ``savegame.arun`` on ``memory://`` (the issue's CPU target);
* ``memory-run``: ``savegame.run`` on ``memory://``;
* ``sqlite-off``: ``savegame.run`` on a SQLite file, ``PRAGMA synchronous=OFF``, so
  what is left is CPU, not the fsync (the FULL target's ratio is the CPU above the floor);
* ``floor``: no savegame, the least such a step costs in Python (:func:`floor_run`: the
  step called, its appended item encoded, compressed and checksummed, kept in a dict).

The CPU is the process's (``time.process_time``, every thread) over a run of
``--steps`` steps divided by the steps, the run's start and end included; the median
of ``--repeat``. On a shared machine wall time is noise, CPU time less so, and
instruction counts not at all: ``--callgrind`` runs each mode once more under
valgrind's callgrind, counting only the instructions inside the measured run (the run
is called through ``operator.call``, and callgrind collects only inside that C
function: ``--toggle-collect=_operator_call``), and prints instructions per step.
The counts repeat to within a fraction of a percent (``PYTHONHASHSEED=0``).

    python benchmarks/step_cpu.py --steps 400 --repeat 7               # ~10 s
    python benchmarks/step_cpu.py --steps 400 --repeat 0 --callgrind   # ~1 minute
    python benchmarks/step_cpu.py --profile memory-arun --steps 2000   # cProfile, top 25
"""

from __future__ import annotations

import argparse
import asyncio
import operator
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from workload import machine, markdown, message

import savegame
from savegame import END, Workflow

append = Workflow("bench-step-cpu")


@append.step(entry=True)
def add(state: dict[str, Any], ctx: object) -> tuple[dict[str, Any], str]:
    n = state.get("n", 0)
    messages = [*state.get("messages", []), message(n)]
    return {"n": n + 1, "messages": messages}, ("add" if n + 1 < state["steps"] else END)


MODES = ("memory-arun", "memory-run", "sqlite-off", "floor")


def floor_run(steps: int) -> dict[int, tuple[int, bytes, bytes]]:
    """The least a checkpointed step of this workload costs in Python, as a reference for
    the ``memory://`` rows: call the step, take what it appended as a delta, encode it
    (orjson), compress it (zstd level 1, a record's level) and checksum it (BLAKE2b-128,
    a record's check) under the step's number, and keep it in a dict. No runtime, no
    header, no keyframes or packs, no store: what is left over this in the other rows
    is savegame's own work for a step (and the loads it keeps bounded)."""
    import hashlib

    import orjson
    import zstandard

    compressor = zstandard.ZstdCompressor(level=1)
    kept: dict[int, tuple[int, bytes, bytes]] = {}
    state: dict[str, Any] = {"steps": steps, "messages": []}
    node = "add"
    while node != END:
        old = state["messages"]
        update, node = add(state, None)
        state = {**state, **update}
        new = state["messages"]
        body = orjson.dumps({"n": state["n"], "a": new[len(old) :]})
        payload = compressor.compress(body)
        digest = hashlib.blake2b(payload, digest_size=16).digest()
        kept[state["n"]] = (len(body), payload, digest)
    return kept


def _store(mode: str, tmp: str) -> Any:
    if mode.startswith("memory") or mode == "floor":
        return savegame.open_store("memory://")
    store = savegame.open_store(f"sqlite:///{tmp}/step.db")
    # Only full and normal are offered by the URL; OFF is for measuring, never for use.
    store._conn.execute("PRAGMA synchronous = OFF")
    return store


def _window(mode: str, store: Any, steps: int) -> Callable[[], object]:
    if mode == "floor":
        return lambda: floor_run(steps)
    if mode == "memory-arun":
        return lambda: asyncio.run(savegame.arun(append, {"steps": steps}, store=store))
    return lambda: savegame.run(append, {"steps": steps}, store=store)


def measure(mode: str, steps: int, *, call: Callable[[Callable[[], object]], object]) -> float:
    """CPU µs a step of one fresh run of ``steps`` steps (schema and warm-up outside)."""
    with tempfile.TemporaryDirectory(prefix="savegame-step-cpu-") as tmp:
        store = _store(mode, tmp)
        try:
            savegame.run(append, {"steps": 3}, store=store)  # tables, imports, caches
            window = _window(mode, store, steps)
            started = time.process_time()
            call(window)
            return (time.process_time() - started) / steps * 1e6
        finally:
            store.close()


def _warm(steps: int) -> None:
    for n in range(steps):
        message(n)  # the text is made once, outside every window


def cpu_table(modes: Sequence[str], steps: int, repeat: int) -> dict[str, float]:
    got: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(repeat):
        for mode in modes:
            got[mode].append(measure(mode, steps, call=operator.call))
    return {m: statistics.median(v) for m, v in got.items()}


_TOTALS = re.compile(rb"^(?:summary|totals): (\d+)", re.MULTILINE)


def instructions(mode: str, steps: int, *, src: Path | None = None) -> float:
    """Instructions a step of the measured run, counted by callgrind in a child process;
    with ``src``, savegame imported from that tree (another commit's ``src``)."""
    with tempfile.TemporaryDirectory(prefix="savegame-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        if src is not None:
            # Ahead of the installed savegame (an editable install's path hook included).
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
        subprocess.run(
            [
                "valgrind", "--tool=callgrind", "--collect-atstart=no",
                "--toggle-collect=_operator_call", f"--callgrind-out-file={out}",
                sys.executable, __file__, "--child", mode, "--steps", str(steps),
            ],
            check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        counts = _TOTALS.findall(out.read_bytes())
        return int(counts[-1]) / steps


def profile(mode: str, steps: int, top: int) -> None:
    import cProfile
    import pstats

    profiler = cProfile.Profile()

    def call(window: Callable[[], object]) -> None:
        profiler.enable()
        try:
            window()
        finally:
            profiler.disable()

    measure(mode, steps, call=call)
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(top)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--callgrind", action="store_true", help="instructions/step as well")
    parser.add_argument("--profile", choices=MODES, help="cProfile one run of this mode instead")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    # As a process started in a terminal has it: a background job inherits SIG_IGN, and
    # asyncio.run then skips installing its own handler (and the work around it).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _warm(args.steps)
    if args.child:
        measure(args.child, args.steps, call=operator.call)
        return
    if args.profile:
        profile(args.profile, args.steps, args.top)
        return
    modes = [m for m in args.modes.split(",") if m]
    print(machine(f"{args.steps} steps, x{args.repeat}"), file=sys.stderr)
    cpu = cpu_table(modes, args.steps, args.repeat) if args.repeat else {}
    counted = {m: instructions(m, args.steps) for m in modes} if args.callgrind else {}
    rows = [
        [
            mode,
            f"{cpu[mode]:.1f}" if mode in cpu else "",
            f"{counted[mode] / 1e3:,.0f}k" if mode in counted else "",
        ]
        for mode in modes
    ]
    print(markdown(["mode", "CPU µs/step", "instructions/step"], rows, numeric_from=1))


if __name__ == "__main__":
    main()
