"""The same messages kept as a list or as a dict: what the shape of a state costs.

A keyframe packs long lists and dicts that hold many entries
(``savegame.codec._packs``). This runs the appending loop of ``storage_engine.py``
both ways, the messages in a list and in a dict ``{call_id: message}``, on the
default SQLite store and reports stored bytes, time per step and the latest
state's load in a fresh process.

    python benchmarks/state_shapes.py [--steps 400] [--repeat 3]

Medians over the repeats; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workload import machine, markdown, message, stored_bytes

from savegame import END, Workflow, open_store, run

LOAD = """
import json, sys, time
import savegame
from savegame.client import get_checkpoint  # the lazy names: the modules loaded before the timer
import savegame.stores.sqlite
started = time.perf_counter()
savegame.client.get_checkpoint(sys.argv[2], store=sys.argv[1])
print(json.dumps((time.perf_counter() - started) * 1e3))
"""


def workflow(shape: str, steps: int) -> Workflow:
    messages = [message(i) for i in range(steps)]
    wf = Workflow(f"shape-{shape}")

    @wf.step(entry=True)
    def add(state: dict[str, Any], ctx: object) -> tuple[dict[str, Any], str]:
        n = state.get("n", 0)
        if shape == "list":
            items: Any = [*state.get("items", []), messages[n]]
        else:
            items = {**state.get("items", {}), f"call-{n}": messages[n]}
        return {"items": items, "n": n + 1}, ("add" if n + 1 < steps else END)

    return wf


def once(shape: str, steps: int) -> tuple[float, float, float]:
    """(stored MB, ms per step, fresh-process load ms) of one run."""
    with tempfile.TemporaryDirectory(prefix="savegame-shapes-") as folder:
        db = Path(folder) / "shapes.db"
        url = f"sqlite:///{db}"
        store = open_store(url)
        try:
            started = time.perf_counter()
            result = run(workflow(shape, steps), {}, store=store)
            per_step = (time.perf_counter() - started) / steps * 1e3
        finally:
            store.close()
        size = stored_bytes(db) / 1e6
        out = subprocess.run(
            [sys.executable, "-c", LOAD, url, result.run_id],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        return size, per_step, float(json.loads(out.stdout))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    rows = []
    for shape in ("list", "dict"):
        print(shape, file=sys.stderr, flush=True)
        runs = [once(shape, args.steps) for _ in range(args.repeat)]
        size, per_step, load = (statistics.median(column) for column in zip(*runs, strict=True))
        rows.append([shape, str(args.steps), f"{size:.2f}", f"{per_step:.3f}", f"{load:.2f}"])
    print(f"Machine: {machine()}")
    print()
    print(markdown(["state['items']", "steps", "stored MB", "ms/step (mean)", "load ms (fresh process)"],
                   rows, numeric_from=1))  # fmt: skip


if __name__ == "__main__":
    main()
