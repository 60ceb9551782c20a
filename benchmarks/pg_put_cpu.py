"""Client CPU per checkpoint put on PostgreSQL (issue 34, point 3).

The store's side of a put, alone: records are encoded before the timed calls, so
what is measured is ``PostgresStore`` (building parameters, psycopg, libpq, the
socket), in the calling thread (``time.thread_time``; psycopg runs in the caller),
the wall time around the call, and the server backend's CPU (``/proc``: a server on
this machine). Modes, interleaved round by round on one fresh
schema of the real server:

- ``lone``: one run's ``put_checkpoint`` (what the group committer calls for a
  batch of one);
- ``batch16`` / ``batch64``: ``put_checkpoints`` of 16 / 64 plain puts, one per run
  (the group committer's batch), per put;
- ``raw``: the floor, one ``INSERT`` of a 2 KB text plus its commit (autocommit) on
  a bare psycopg connection, as ``concurrency.py``'s raw rows do.

Each put carries a state of a step counter and a 2 KB message (``workload.message``).
``--callgrind`` counts instructions per put as well (each mode in a child process
under valgrind, collecting only inside the timed calls: deterministic where the
timings on a shared 2-core machine are not). ``--compare A,B`` runs this script
against the ``src/`` of two checkouts alternately, ``--repeat`` times, and prints the
medians side by side with B/A: how to measure one change alone.

    python benchmarks/pg_put_cpu.py
    python benchmarks/pg_put_cpu.py --rounds 400 --callgrind
    python benchmarks/pg_put_cpu.py --compare /tmp/base,. --repeat 5
    python benchmarks/pg_put_cpu.py --options prepare_threshold=none   # never prepare
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from workload import machine, markdown, message

MODES = ("lone", "batch16", "batch64", "raw")
ROUNDS = 200
"""Timed calls per mode: lone and raw put once a call, a batch N times."""
WARMUP = 5


def _size(mode: str) -> int:
    return int(mode.removeprefix("batch")) if mode.startswith("batch") else 1


def _state(step: int) -> dict[str, Any]:
    return {"step": step, "message": message(step)}


class Bench:
    """One fresh schema: the runs, their leases and the pre-encoded records of every round."""

    def __init__(self, url: str, rounds: int, modes: Sequence[str] = MODES) -> None:
        from savegame.stores.postgres import PostgresStore
        from savegame.testing.builders import OWNER, make_record, make_run

        self.url = url
        self.store = PostgresStore.from_url(url)
        self.rounds = rounds
        self.chains: dict[str, list[tuple[list[Any], int]]] = {}
        for mode in modes:
            if mode == "raw":
                continue
            runs = []
            for _ in range(_size(mode)):
                run, first = make_run(state=_state(0))
                lease = self.store.create_run(run, first, owner=OWNER, ttl=600)
                records, previous = [], first
                for step in range(1, rounds + WARMUP + 1):
                    h = previous.header
                    previous = make_record(
                        h.thread_id, h.run_id, parent_id=h.checkpoint_id, step=step,
                        node="add", state=_state(step),
                    )  # fmt: skip
                    records.append(previous)
                runs.append((records, lease.token))
            self.chains[mode] = runs
        self.step = dict.fromkeys(MODES, 0)
        import psycopg

        from savegame.stores.postgres import parse_url

        conninfo, options = parse_url(url)
        self.raw = psycopg.connect(conninfo, autocommit=True)
        self.raw.execute(f'CREATE TABLE "{options["schema"]}".raw (run int, step int, body text)')
        self.raw_sql = f'INSERT INTO "{options["schema"]}".raw VALUES (%s, %s, %s)'
        self.body = message(0)["content"]

    def call(self, mode: str) -> Callable[[], object]:
        """The next timed call of ``mode``."""
        from savegame.stores.base import Put

        i = self.step[mode]
        self.step[mode] += 1
        if mode == "raw":
            return lambda: self.raw.execute(self.raw_sql, (0, i, self.body))
        runs = self.chains[mode]
        if mode == "lone":
            records, token = runs[0]
            record = records[i]
            return lambda: self.store.put_checkpoint(record, lease_token=token)
        puts = [Put(records[i], token) for records, token in runs]
        return lambda: self.store.put_checkpoints(puts)

    def close(self) -> None:
        self.raw.close()
        self.store.close()


def _ticks(pid: int) -> int:
    """A local server backend's CPU (user + system) in clock ticks; 0 when unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def timed(bench: Bench, modes: Sequence[str], rounds: int) -> dict[str, dict[str, float]]:
    """Median thread CPU and wall microseconds per put of each mode, rounds interleaved,
    and the mean CPU of the server's backend per put (from /proc: a local server, one
    pooled connection; its clock ticks are coarse, so only the mean over all calls)."""
    cpu: dict[str, list[float]] = {m: [] for m in modes}
    wall: dict[str, list[float]] = {m: [] for m in modes}
    server = dict.fromkeys(modes, 0)
    with bench.store._pool.connection() as conn:
        backend = conn.info.backend_pid
    raw_backend = bench.raw.info.backend_pid
    for _ in range(WARMUP):
        for mode in modes:
            bench.call(mode)()
    for _ in range(rounds):
        for mode in modes:
            call, n = bench.call(mode), _size(mode)
            pid = raw_backend if mode == "raw" else backend
            t0 = _ticks(pid)
            c0, w0 = time.thread_time(), time.perf_counter()
            call()
            w1, c1 = time.perf_counter(), time.thread_time()
            server[mode] += _ticks(pid) - t0
            cpu[mode].append((c1 - c0) / n * 1e6)
            wall[mode].append((w1 - w0) / n * 1e6)
    tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
    return {
        m: {
            "cpu_us": statistics.median(cpu[m]),
            "wall_us": statistics.median(wall[m]),
            "server_us": server[m] * tick_us / (rounds * _size(m)),
        }
        for m in modes
    }


_TOTALS = re.compile(rb"^(?:summary|totals): (\d+)", re.MULTILINE)


def counted(url: str, mode: str, rounds: int) -> float:
    """Instructions per put of ``mode``, counted by callgrind in a child process."""
    with tempfile.TemporaryDirectory(prefix="savegame-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(
            [
                "valgrind", "--tool=callgrind", "--collect-atstart=no",
                "--toggle-collect=_operator_call", f"--callgrind-out-file={out}",
                sys.executable, __file__, "--child", mode, "--rounds", str(rounds), "--url", url,
            ],
            check=True, env={**os.environ, "PYTHONHASHSEED": "0"},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        return int(_TOTALS.findall(out.read_bytes())[-1]) / (rounds * _size(mode))


def child(url: str, mode: str, rounds: int) -> None:
    """Under callgrind: only ``operator.call``'s insides are collected."""
    bench = Bench(url, rounds, [mode])
    try:
        for _ in range(WARMUP):
            bench.call(mode)()
        calls = [bench.call(mode) for _ in range(rounds)]
        for call in calls:
            operator.call(call)
    finally:
        bench.close()


def measure(
    rounds: int, callgrind: bool, modes: Sequence[str], options: str = ""
) -> dict[str, dict[str, float]]:
    from stores import fresh_postgres

    with fresh_postgres() as url:
        # One pooled connection: the server's side is one backend to read.
        bench = Bench(url + "&pool_max=1" + (f"&{options}" if options else ""), rounds)
        try:
            got = timed(bench, modes, rounds)
        finally:
            bench.close()
    if callgrind:
        for mode in modes:
            with fresh_postgres() as url:
                got[mode]["instr"] = counted(url, mode, min(rounds, 50))
    return got


def report(got: dict[str, dict[str, float]]) -> str:
    raw = got.get("raw")
    rows = []
    for mode, v in got.items():
        ratio = f"{v['cpu_us'] / raw['cpu_us']:.2f}" if raw else "-"
        instr = f"{v['instr'] / 1e3:,.0f}" if "instr" in v else "-"
        cells = [f"{v['cpu_us']:.1f}", f"{v['wall_us']:.1f}", f"{v['server_us']:.1f}"]
        rows.append([mode, *cells, instr, ratio])
    header = ["mode", "CPU us/put", "wall us/put", "server CPU us/put", "k instr/put", "CPU x raw"]
    return markdown(header, rows, numeric_from=1)


def compare(dirs: Sequence[str], repeat: int, rounds: int, callgrind: bool, options: str) -> None:
    """Each checkout's src/ in a child, alternately; medians of the children's medians."""
    runs: dict[str, list[dict[str, dict[str, float]]]] = {d: [] for d in dirs}
    for i in range(repeat):
        for d in dirs if i % 2 == 0 else list(reversed(dirs)):
            src = str(Path(d).resolve() / "src")
            env = {**os.environ, "PYTHONPATH": src}
            cmd = [sys.executable, __file__, "--json", "--rounds", str(rounds)]
            cmd += ["--options", options] if options else []
            cmd += ["--callgrind"] if callgrind else []
            done = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
            runs[d].append(json.loads(done.stdout))
            print(f"repeat {i + 1}/{repeat}: {d}", file=sys.stderr)
    keys = ["cpu_us", "wall_us", "server_us"] + (["instr"] if callgrind else [])
    header = ["mode", "measure", *dirs, f"{dirs[-1]} / {dirs[0]}"]
    rows = []
    for mode in MODES:
        for key in keys:
            med = [statistics.median(r[mode][key] for r in runs[d]) for d in dirs]
            rows.append([mode, key, *(f"{m:,.1f}" for m in med), f"{med[-1] / med[0]:.3f}"])
    print(markdown(header, rows, numeric_from=2))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--callgrind", action="store_true", help="instructions/put as well")
    parser.add_argument("--compare", help="two checkouts, comma-separated: their src/, alternately")
    parser.add_argument("--repeat", type=int, default=5, help="children per checkout (--compare)")
    parser.add_argument(
        "--options", default="", help="store URL options, e.g. prepare_threshold=none"
    )
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.url, args.child, args.rounds)
        return
    if args.compare:
        compare(args.compare.split(","), args.repeat, args.rounds, args.callgrind, args.options)
        return
    got = measure(args.rounds, args.callgrind, MODES, args.options)
    if args.json:
        print(json.dumps(got))
        return
    print(machine(f"load average {os.getloadavg()[0]:.2f}"), "\n")
    print(report(got))


if __name__ == "__main__":
    main()
