"""What a workspace snapshot costs per checkpoint (issue 14): about the changed file.

A tree of ``--files`` files (``--size`` bytes each, in 100 directories) is the
workspace of a workflow whose every step rewrites one file; each step is
checkpointed on a fresh SQLite file. Per checkpoint after the run's first (which
stores the whole tree once), the table gives the median and the mean of:

* bytes stored: the record's payload, the blobs it stored first, and the digests it
  lists (64 bytes each, twice: the header's list and the reference table's rows);
* ms: from the end of one step to the start of the next (capture, encode, commit).

Same-run references: the changed file's size; a full-tree tar per step (its bytes,
and the ms to write it to memory); the same run without a workspace.

    python benchmarks/workspace.py --files 10000 --steps 64
"""

from __future__ import annotations

import argparse
import io
import os
import sqlite3
import statistics
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workload import machine, markdown

from savegame import END, StepContext, Workflow, run
from savegame.client import history
from savegame.stores import SqliteStore


def make_tree(root: Path, files: int, size: int) -> list[Path]:
    paths = []
    for i in range(files):
        path = root / f"d{i % 100:02}" / f"f{i:05}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes((f"file {i} line\n" * (size // 12 + 1)).encode()[:size])
        paths.append(path)
    return paths


def one_run(files: int, size: int, steps: int, workspace: bool) -> tuple[list[int], list[float]]:
    """(bytes stored, seconds) per checkpoint after the first one with the workspace."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        paths = make_tree(root, files, size)
        gaps: list[float] = []
        ended: list[float] = []
        wf = Workflow(f"bench-workspace-{workspace}", workspace=root if workspace else None)

        @wf.step(entry=True)
        def edit(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
            if ended:
                gaps.append(time.perf_counter() - ended[-1])
            n = state.get("n", 0) + 1
            paths[(n * 7919) % files].write_bytes(os.urandom(size // 2).hex().encode())
            ended.append(time.perf_counter())
            return {"n": n}, ("edit" if n < steps else END)

        store = SqliteStore(Path(tmp) / "bench.db")
        result = run(wf, {}, store=store)
        stored = _bytes_per_checkpoint(store, Path(tmp) / "bench.db", result.run_id)
        store.close()
    # Oldest first: the input record, [the first workspace snapshot], then one per step.
    skip = 2 if workspace else 1
    return stored[skip + 1 :], gaps


def _bytes_per_checkpoint(store: SqliteStore, db: Path, run_id: str) -> list[int]:
    records = [store.get_checkpoint(h.checkpoint_id) for h in history(run_id, store=store)]
    with sqlite3.connect(db) as conn:
        sizes = dict(conn.execute("SELECT digest, size FROM blobs").fetchall())
    seen: set[str] = set()
    out = []
    for record in reversed(records):
        new = [d for d in set(record.header.blobs) if d not in seen]
        seen.update(new)
        listed = 2 * 64 * len(record.header.blobs)
        out.append(record.header.size + sum(sizes.get(d, 0) for d in new) + listed)
    return out


def tar_per_step(files: int, size: int, repeat: int) -> tuple[int, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        make_tree(root, files, size)
        times, length = [], 0
        for _ in range(repeat):
            started = time.perf_counter()
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tar:
                tar.add(root, arcname="ws")
            times.append(time.perf_counter() - started)
            length = buf.tell()
    return length, statistics.median(times)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=1024, help="bytes per file")
    parser.add_argument("--steps", type=int, default=64, help="steps (checkpoints) per run")
    args = parser.parse_args(argv)
    print("with a workspace ...", file=sys.stderr, flush=True)
    ws_bytes, ws_ms = one_run(args.files, args.size, args.steps, workspace=True)
    print("without ...", file=sys.stderr, flush=True)
    plain_bytes, plain_ms = one_run(args.files, args.size, args.steps, workspace=False)
    print("tar ...", file=sys.stderr, flush=True)
    tar_bytes, tar_s = tar_per_step(args.files, args.size, 5)
    changed = args.size  # the step writes size // 2 random bytes as hex: size bytes

    def row(name: str, sizes: Sequence[int], secs: Sequence[float]) -> list[str]:
        med, mean = statistics.median(sizes), statistics.fmean(sizes)
        return [
            name,
            f"{med:,.0f}",
            f"{mean:,.0f}",
            f"{med / changed:.1f}x",
            f"{statistics.median(secs) * 1e3:.2f}",
            f"{statistics.fmean(secs) * 1e3:.2f}",
        ]

    rows = [
        row("workspace snapshot", ws_bytes, ws_ms),
        row("no workspace (same steps)", plain_bytes, plain_ms),
        row("full-tree tar per step", [tar_bytes], [tar_s]),
        ["the changed file", f"{changed:,}", f"{changed:,}", "1.0x", "", ""],
    ]
    print(machine(f"{args.files:,} files of {args.size:,} B, {args.steps} steps, one run each"))
    print()
    header = [
        "per checkpoint",
        "bytes, median",
        "bytes, mean",
        "median vs changed file",
        "ms, median",
        "ms, mean",
    ]
    print(markdown(header, rows, numeric_from=1))


if __name__ == "__main__":
    main()
