"""Stores under load (issue 5): throughput, latency and worker takeover per backend.

1. Throughput: 1, 4 and 16 concurrent runs on SQLite (a file, ``synchronous=FULL``),
   PostgreSQL (a fresh ``?schema=bench_...``, dropped afterwards) and Redis (a
   unique ``?prefix=bench_...``, keys deleted afterwards). Each concurrent
   worker opens its own store handle and drives ``--runs`` runs of 50 steps
   one after another; the state is a counter and a list of its last 5 values.
   Workers are threads in one process, or separate processes (``--modes``).
2. Takeover: submit 2 slow runs (``savegame.submit``), start a worker process
   (concurrency 2, lease TTL 2 s, poll 0.05 s), SIGKILL it once both runs have
   checkpoints, start a second worker, and time from the kill to the first
   checkpoint the new worker writes for a run the killed one held (read from
   ``savegame.client.history`` headers' ``created_at``). SQLite and PostgreSQL.

    python benchmarks/stores.py
    python benchmarks/stores.py --backends sqlite,postgres --modes threads --takeovers 5
"""

from __future__ import annotations

import argparse
import itertools
import logging
import multiprocessing as mp
import os
import random
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workload import TimedWrites, machine, markdown, percentile, version

import savegame
from savegame import END, Workflow
from savegame.client import Observer

PG_URL = os.environ.get("SAVEGAME_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("SAVEGAME_BENCH_REDIS", "redis://127.0.0.1:6379/0")
STEPS = 50
LEASE_TTL = 2.0
POLL = 0.05
SLOW_STEP_S = 0.05
"""The slow run's step time: long enough to be mid-run when killed, short enough that
the first step after a takeover adds little to the measured takeover time."""

# -- workflows (module level: the takeover workers import them by file path) -----------------

counter = Workflow("bench-counter")


@counter.step(entry=True)
def tick(state: dict[str, Any], ctx: object) -> tuple[dict[str, Any], str]:
    n = state.get("n", 0) + 1
    return {"n": n, "recent": [*state.get("recent", [])[-4:], n]}, ("tick" if n < STEPS else END)


slow = Workflow("bench-slow")


@slow.step(entry=True)
def crawl(state: dict[str, Any], ctx: object) -> tuple[dict[str, Any], str]:
    time.sleep(SLOW_STEP_S)
    n = state.get("n", 0) + 1
    return {"n": n}, ("crawl" if n < 1000 else END)


# -- backends ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Backend:
    name: str
    detail: str
    fresh: Callable[[], Any]
    """A context manager yielding the URL of a new, empty store, removed on exit."""


@contextmanager
def fresh_sqlite() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="savegame-stores-") as tmp:
        # The default synchronous level (FULL): every commit is fsynced.
        yield f"sqlite:///{tmp}/stores.db"


@contextmanager
def fresh_postgres() -> Iterator[str]:
    import psycopg

    schema = f"bench_{secrets.token_hex(4)}"
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}schema={schema}"
    finally:
        with psycopg.connect(PG_URL.split("?")[0], autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextmanager
def fresh_redis() -> Iterator[str]:
    import redis

    prefix = f"bench_{secrets.token_hex(4)}"
    sep = "&" if "?" in REDIS_URL else "?"
    try:
        yield f"{REDIS_URL}{sep}prefix={prefix}"
    finally:
        client = redis.Redis.from_url(REDIS_URL)
        # The store keeps every key under "{prefix}:" (a hash tag, for Cluster slots).
        keys = list(client.scan_iter(match=f"{{{prefix}}}:*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()


def server_versions() -> dict[str, str]:
    found: dict[str, str] = {}
    try:
        import psycopg

        with psycopg.connect(PG_URL.split("?")[0]) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            sync = conn.execute("SHOW synchronous_commit").fetchone()
            found["postgres"] = (
                f"PostgreSQL {row[0] if row else '?'} (synchronous_commit={sync[0] if sync else '?'})"
            )
    except Exception as exc:  # reported, and the backend is skipped
        found["postgres"] = f"unavailable: {exc}"
    try:
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        info = client.info("server")
        conf = client.config_get("append*")
        client.close()
        found["redis"] = (
            f"Redis {info['redis_version']} (appendonly={conf.get('appendonly')}, "
            f"appendfsync={conf.get('appendfsync')})"
        )
    except Exception as exc:
        found["redis"] = f"unavailable: {exc}"
    return found


BACKENDS = {
    "sqlite": Backend("SQLite", "file, WAL, synchronous=FULL", fresh_sqlite),
    "postgres": Backend("PostgreSQL", "fresh schema", fresh_postgres),
    "redis": Backend("Redis", "unique prefix", fresh_redis),
}


# -- throughput ------------------------------------------------------------------------------


@dataclass(slots=True)
class Drive:
    """What one concurrent worker saw."""

    started: float
    ended: float
    checkpoints: int
    step_gaps: list[float] = field(default_factory=list)
    """Seconds between consecutive step starts of one run: the step plus its checkpoint."""
    writes: list[float] = field(default_factory=list)
    """Seconds of each ``put_checkpoint`` (timed by a wrapping store)."""


def quiet_redis() -> None:
    """Silence the store's warning about a Redis without AOF: the table header reports the
    server's appendonly/appendfsync instead, once."""
    logging.getLogger("savegame.stores.redis").setLevel(logging.ERROR)


def stamper(stamps: list[float]) -> Callable[[str, int, str], None]:
    """An ``on_step`` callback recording when each step of one run starts."""

    def on_step(run_id: str, index: int, name: str) -> None:
        stamps.append(time.perf_counter())

    return on_step


def drive(url: str, runs: int, ready: Callable[[], object]) -> Drive:
    """Open a store handle, wait for the others, then run ``runs`` counter runs in turn."""
    quiet_redis()
    store = TimedWrites(savegame.open_store(url))
    try:
        ready()
        gaps: list[float] = []
        writes = store.writes
        checkpoints = 0
        started = time.perf_counter()
        for _ in range(runs):
            stamps: list[float] = []
            # No on_checkpoint callback: after one the runtime reads the run row again
            # before the next step, a cost runs without observers do not pay.
            observer = Observer(on_step=stamper(stamps))
            result = savegame.run(counter, {}, store=store, observer=observer)
            if result.state["n"] != STEPS:
                raise RuntimeError(f"run {result.run_id} ended at n={result.state['n']}")
            gaps += [b - a for a, b in itertools.pairwise(stamps)]
        ended = time.perf_counter()
        checkpoints = len(writes)
    finally:
        store.close()
    return Drive(started, ended, checkpoints, gaps, writes)


def _process_main(url: str, runs: int, barrier: Any, out: Any) -> None:
    out.put(drive(url, runs, barrier.wait))


def concurrent_drives(url: str, workers: int, runs: int, mode: str) -> list[Drive]:
    if mode == "threads":
        barrier = threading.Barrier(workers)
        drives: list[Drive] = []
        errors: list[BaseException] = []

        def target() -> None:
            try:
                drives.append(drive(url, runs, barrier.wait))
            except BaseException as exc:  # surfaced below, not lost in the thread
                errors.append(exc)
                barrier.abort()

        threads = [threading.Thread(target=target) for _ in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return drives
    # spawn: a clean interpreter per worker, as separate deployments would have;
    # perf_counter is CLOCK_MONOTONIC on Linux, so the stamps compare across processes.
    ctx = mp.get_context("spawn")
    pbarrier = ctx.Barrier(workers)
    queue = ctx.Queue()
    procs = [ctx.Process(target=_process_main, args=(url, runs, pbarrier, queue))
             for _ in range(workers)]  # fmt: skip
    for p in procs:
        p.start()
    got = [queue.get(timeout=300) for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise RuntimeError(f"a worker process exited with {p.exitcode}")
    return got


@dataclass(frozen=True, slots=True)
class Throughput:
    backend: str
    mode: str
    workers: int
    checkpoints: int
    per_second: float
    step_median_ms: float
    step_mean_ms: float
    """With many workers on 2 cores scheduling is unfair (one worker runs a burst of steps
    while others wait), so the median flatters and the mean shows the average wait."""
    step_p95_ms: float
    write_median_ms: float
    write_p95_ms: float


def throughput(backend: Backend, workers: int, runs: int, mode: str) -> Throughput:
    with backend.fresh() as url:
        # A warm-up run creates the schema, so no worker pays for it inside the window.
        savegame.run(counter, {}, store=url)
        drives = concurrent_drives(url, workers, runs, mode)
    window = max(d.ended for d in drives) - min(d.started for d in drives)
    gaps = [g for d in drives for g in d.step_gaps]
    writes = [w for d in drives for w in d.writes]
    total = sum(d.checkpoints for d in drives)
    return Throughput(
        backend.name, mode, workers, total, total / window,
        statistics.median(gaps) * 1e3, statistics.fmean(gaps) * 1e3, percentile(gaps, 0.95) * 1e3,
        statistics.median(writes) * 1e3, percentile(writes, 0.95) * 1e3,
    )  # fmt: skip


def throughput_table(rows: Sequence[Throughput]) -> str:
    header = ["store", "workers", "concurrency", "checkpoints", "checkpoints/s",
              "step ms p50", "step ms mean", "step ms p95", "write ms p50", "write ms p95"]  # fmt: skip
    return markdown(header, [
        [r.backend, r.mode, str(r.workers), str(r.checkpoints), f"{r.per_second:.0f}",
         f"{r.step_median_ms:.2f}", f"{r.step_mean_ms:.2f}", f"{r.step_p95_ms:.2f}",
         f"{r.write_median_ms:.2f}", f"{r.write_p95_ms:.2f}"]
        for r in rows
    ], numeric_from=2)  # fmt: skip


# -- takeover --------------------------------------------------------------------------------


def worker_command(url: str) -> tuple[list[str], str]:
    """The CLI's ``savegame worker`` when this build has it, else this file's ``--worker``."""
    probe = subprocess.run([sys.executable, "-m", "savegame", "worker", "--help"],
                           capture_output=True, text=True)  # fmt: skip
    if probe.returncode == 0 and "--lease-ttl" in probe.stdout:
        return [sys.executable, "-m", "savegame", "worker", "--store", url,
                "--lease-ttl", str(LEASE_TTL), "--poll", str(POLL), "--concurrency", "2"], \
            "python -m savegame worker"  # fmt: skip
    return [sys.executable, str(Path(__file__).resolve()), "--worker", url], \
        "savegame.Worker(url, concurrency=2, lease_ttl=2, poll=0.05).run() (no worker CLI yet)"  # fmt: skip


def run_worker(url: str) -> None:
    savegame.Worker(url, concurrency=2, lease_ttl=LEASE_TTL, poll=POLL).run()


@dataclass(frozen=True, slots=True)
class Takeover:
    seconds: float
    """Kill -> the first checkpoint the new worker wrote for a run the killed one held."""
    last_seconds: float
    """Kill -> every held run has such a checkpoint."""
    lease_left: float
    """How long the killed worker's lease still had to run at the kill (the least of its runs)."""


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.01)


def takeover_once(url: str, command: list[str], log: Path, rng: random.Random) -> Takeover:
    # Two runs for a worker of concurrency 2: it holds both, and nothing else is
    # queued, so the second worker's first claims can only be takeovers.
    runs = [savegame.submit(slow, {}, store=url).run_id for _ in range(2)]
    store = savegame.open_store(url)
    first = second = None
    try:
        with log.open("ab") as sink:
            first = subprocess.Popen(command, stdout=sink, stderr=sink)
            tag = f":{first.pid}:"

            def held_and_stepping() -> bool:
                infos = [store.get_run(r) for r in runs]
                return all(i.lease is not None and tag in i.lease.owner and i.step >= 3
                           for i in infos)  # fmt: skip

            try:
                wait_for(held_and_stepping, 30, "the first worker to checkpoint both runs")
            except TimeoutError:
                infos = [store.get_run(r) for r in runs]
                raise TimeoutError(
                    f"runs {infos}; worker log:\n{log.read_text()[-3000:]}"
                ) from None
            # Then a random point of the heartbeat cycle (renewals every TTL/3), seeded:
            # killing right after the claim would always leave a nearly full lease.
            time.sleep(rng.uniform(0, LEASE_TTL / 3))
            killed_at = time.time()
            os.kill(first.pid, signal.SIGKILL)
            first.wait()
            leases = [store.get_run(r).lease for r in runs]
            lease_left = min(x.expires_at for x in leases if x is not None) - killed_at
            second = subprocess.Popen(command, stdout=sink, stderr=sink)
            taken: dict[str, float] = {}

            def all_taken_over() -> bool:
                for r in runs:
                    if r not in taken:
                        newest = store.list_checkpoints(r, limit=1)
                        if newest and newest[0].created_at.timestamp() > killed_at:
                            # created_at is the writer's wall clock: the same machine's.
                            taken[r] = newest[0].created_at.timestamp() - killed_at
                return len(taken) == len(runs)

            wait_for(all_taken_over, 30, "the second worker to take both runs over")
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        store.close()
    return Takeover(min(taken.values()), max(taken.values()), lease_left)


def takeovers(backend: Backend, repeat: int, log: Path) -> tuple[list[Takeover], str]:
    found: list[Takeover] = []
    how = ""
    rng = random.Random(7)
    for _ in range(repeat):
        # A fresh store each time: the previous second worker, killed, left its runs leased.
        with backend.fresh() as url:
            savegame.run(counter, {}, store=url)  # creates the schema outside the timing
            command, how = worker_command(url)
            found.append(takeover_once(url, command, log, rng))
    return found, how


def takeover_table(rows: Sequence[tuple[str, list[Takeover]]]) -> str:
    def med(values: Sequence[float]) -> str:
        return f"{statistics.median(values):.2f}"

    header = ["store", "repeats", "takeover s (median)", "min", "max",
              "all held runs s (median)", "lease left at kill s (median)", "takeover - lease left"]  # fmt: skip
    return markdown(header, [
        [name, str(len(ts)), med([t.seconds for t in ts]),
         f"{min(t.seconds for t in ts):.2f}", f"{max(t.seconds for t in ts):.2f}",
         med([t.last_seconds for t in ts]), med([t.lease_left for t in ts]),
         med([t.seconds - t.lease_left for t in ts])]
        for name, ts in rows
    ], numeric_from=1)  # fmt: skip


# -- driver ----------------------------------------------------------------------------------


def names(text: str) -> list[str]:
    return [part for part in text.split(",") if part]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--backends", default="sqlite,postgres,redis", type=names)
    parser.add_argument("--modes", default="threads,processes", type=names,
                        help="threads (one process) and/or processes (default: both)")  # fmt: skip
    parser.add_argument("--workers", default="1,4,16",
                        type=lambda t: [int(x) for x in names(t)])  # fmt: skip
    parser.add_argument("--runs", default=4, type=int,
                        help="runs each concurrent worker drives, one after another (default: 4)")  # fmt: skip
    parser.add_argument("--takeovers", default=5, type=int,
                        help="kill/takeover repeats per store (default: 5; 0 skips)")  # fmt: skip
    parser.add_argument("--worker", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:  # the takeover's worker process when there is no `savegame worker` CLI
        run_worker(args.worker)
        return
    quiet_redis()
    started = time.perf_counter()
    servers = server_versions()
    chosen = []
    for name in args.backends:
        if servers.get(name, "").startswith("unavailable"):
            print(f"{name} skipped: {servers.pop(name)}", file=sys.stderr)
        else:
            chosen.append(BACKENDS[name])
    rows: list[Throughput] = []
    for backend in chosen:
        for mode in args.modes:
            for workers in args.workers:
                print(f"{backend.name} {mode} x{workers}", file=sys.stderr, flush=True)
                rows.append(throughput(backend, workers, args.runs, mode))
    taken: list[tuple[str, list[Takeover]]] = []
    how = ""
    with tempfile.TemporaryDirectory(prefix="savegame-takeover-") as tmp:
        log = Path(tmp) / "workers.log"
        for backend in [b for b in chosen if b.name != "Redis"] if args.takeovers else []:
            print(f"{backend.name} takeover x{args.takeovers}", file=sys.stderr, flush=True)
            found, how = takeovers(backend, args.takeovers, log)
            taken.append((backend.name, found))
    print(f"Machine: {machine(*servers.values())}; psycopg {version('psycopg')}, "
          f"redis-py {version('redis')}")  # fmt: skip
    print()
    print(throughput_table(rows))
    print()
    print(f"Each worker: its own store handle, {args.runs} runs x {STEPS} steps in turn "
          "(state: a counter and its last 5 values). checkpoints/s: all checkpoints over the "
          "window from the first worker's start to the last one's end. step ms: gap between "
          "consecutive step starts of a run (step + checkpoint). write ms: "
          "put_checkpoint's time, from a wrapping store.")  # fmt: skip
    if taken:
        print()
        print(takeover_table(taken))
        print()
        print(f"Worker: {how}; lease TTL {LEASE_TTL:g} s (heartbeat every TTL/3), poll "
              f"{POLL:g} s, slow step {SLOW_STEP_S * 1e3:.0f} ms. Killed with SIGKILL once it "
              "had checkpointed both runs 3 times, plus a random 0..TTL/3 s (seeded); the second worker is "
              "started right after.")  # fmt: skip
    print(f"\nWall time {time.perf_counter() - started:.0f} s.", file=sys.stderr)


if __name__ == "__main__":
    main()
