"""Waiting runs (issue 18): what sleeping runs cost a worker's claim, and how late a sleep wakes.

1. **Claims beside sleepers.** A store holds ``--sleepers`` runs checkpointed waiting a
   week (``ctx.sleep``'s record, written through the Store protocol) and one run that
   woke (due a second ago). Each row: the median of ``--repeat`` ``claim_run`` calls that
   find the woken run (its lease then released again), beside the same calls on a store
   with no sleepers: the ratio is how much the sleepers cost a claim (1x: nothing; a scan
   of the waiting runs would grow with their number).
2. **Wake lateness.** ``--naps`` runs of a workflow that sleeps ``--nap`` seconds are
   submitted; one ``Worker`` (``--poll`` seconds between looks, ``--concurrency`` slots)
   runs them. Lateness is when the step went on (the sleep entry's ``woke``) minus the due
   time it recorded; the issue asks for a wake within a second of due on a fleet.

    python benchmarks/waiting_runs.py                        # SQLite, PostgreSQL, Redis
    python benchmarks/waiting_runs.py --backends sqlite --sleepers 2000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from workload import machine, markdown, median_ms, percentile

from savegame import END, StepContext, Worker, Workflow, submit
from savegame.client import list_effects
from savegame.model import EffectKind, RunStatus, Waiting, utcnow
from savegame.stores import Store, open_store
from savegame.testing.builders import make_run, next_record

PG_URL = os.environ.get("SAVEGAME_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("SAVEGAME_BENCH_REDIS", "redis://127.0.0.1:6379/0")
OWNER = "bench:1:1"

NAP = Workflow("bench-nap")


@NAP.step(entry=True)
def nap(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    ctx.sleep(state["nap"])
    return {"woke": True}, END


@contextmanager
def scratch(backend: str, tmp: Path) -> Iterator[str]:
    """A fresh store's URL; what it wrote is dropped afterwards (PostgreSQL, Redis)."""
    tag = uuid.uuid4().hex[:12]
    if backend == "sqlite":
        yield f"sqlite:///{tmp / f'{tag}.db'}"
    elif backend == "postgres":
        import psycopg

        schema = f"bench_wait_{tag}"
        try:
            yield f"{PG_URL}?schema={schema}"
        finally:
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    else:
        import redis

        prefix = f"bench-wait-{tag}"
        try:
            yield f"{REDIS_URL}?prefix={prefix}"
        finally:
            client = redis.Redis.from_url(REDIS_URL)
            doomed = list(client.scan_iter(match="{" + prefix + "}:*", count=1000))
            for start in range(0, len(doomed), 1000):
                client.unlink(*doomed[start : start + 1000])
            client.close()


def sleeping(store: Store, until: datetime) -> str:
    """A run checkpointed waiting until ``until``, its lease released: as a sleep leaves it."""
    run, first = make_run(workflow="bench-nap")
    lease = store.create_run(run, first, owner=OWNER, ttl=30)
    record = next_record(first, status=RunStatus.WAITING)
    store.put_checkpoint(record, lease_token=lease.token, waiting=Waiting(until=until))
    store.release_lease(run.run_id, lease.token)
    return run.run_id


def claim_ms(store: Store, repeat: int) -> float:
    def once() -> None:
        lease = store.claim_run(OWNER, 30)
        assert lease is not None, "the woken run was not claimed"
        store.release_lease(lease.run_id, lease.token)

    return median_ms(once, repeat)


def claims(backend: str, tmp: Path, sleepers: int, repeat: int) -> list[str]:
    times = []
    for count in (0, sleepers):
        with scratch(backend, tmp) as url, open_store(url) as store:
            week = utcnow() + timedelta(days=7)
            for i in range(count):
                sleeping(store, week)
                if i % 1000 == 999:
                    print(f"  {backend}: {i + 1} sleepers", file=sys.stderr)
            sleeping(store, utcnow() - timedelta(seconds=1))
            times.append(claim_ms(store, repeat))
    base, loaded = times
    return [backend, f"{sleepers:,}", f"{base:.2f}", f"{loaded:.2f}", f"{loaded / base:.2f}x"]


def lateness(backend: str, tmp: Path, naps: int, nap: float, poll: float, slots: int) -> list[str]:
    with scratch(backend, tmp) as url:
        ids = [submit(NAP, {"nap": nap}, store=url).run_id for _ in range(naps)]
        worker = Worker(url, concurrency=slots, poll=poll, lease_ttl=10)
        thread = threading.Thread(target=worker.run, kwargs={"idle_exit": nap + 3 * poll + 2})
        thread.start()
        thread.join()
        late = []
        for run_id in ids:
            (entry,) = [e for e in list_effects(run_id, store=url) if e.kind is EffectKind.SLEEP]
            assert entry.result is not None, f"run {run_id} never woke"
            woke = datetime.fromisoformat(entry.result["woke"])
            due = datetime.fromisoformat(entry.arguments["until"])
            late.append((woke - due).total_seconds() * 1e3)
    within = sum(1 for ms in late if ms < 1000)
    return [
        backend, str(naps), f"{poll:g}", f"{statistics.median(late):.0f}",
        f"{percentile(late, 0.95):.0f}", f"{max(late):.0f}", f"{within}/{naps}",
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="sqlite,postgres,redis")
    parser.add_argument("--sleepers", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--naps", type=int, default=50)
    parser.add_argument("--nap", type=float, default=1.0)
    parser.add_argument("--poll", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    backends = args.backends.split(",")
    print(machine())
    with tempfile.TemporaryDirectory() as tmp:
        rows = [claims(b, Path(tmp), args.sleepers, args.repeat) for b in backends]
        print("\nClaiming the one woken run, with and without runs sleeping a week:\n")
        head = ["store", "sleepers", "no sleepers ms", "with sleepers ms", "ratio"]
        print(markdown(head, rows, numeric_from=1))
        late = [
            lateness(b, Path(tmp), args.naps, args.nap, args.poll, args.concurrency)
            for b in backends
        ]
        print(f"\n{args.naps} runs sleeping {args.nap:g} s, one worker of {args.concurrency}:\n")
        head = ["store", "runs", "poll s", "median late ms", "p95 ms", "max ms", "< 1 s"]
        print(markdown(head, late, numeric_from=1))


if __name__ == "__main__":
    main()
