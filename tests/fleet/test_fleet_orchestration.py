"""Orchestration on the worker fleet: three workers on three network hosts share PostgreSQL.

* Schedules: every occurrence fired while three workers race for it starts one run,
  counted in the store (runs, the schedules' counts, each worker's own count) and
  outside it (each run's step writes a row to a file no store owns).
* Durable sleep: runs sleeping in ``ctx.sleep_until`` hold no process (waiting, no
  lease) and a fleet worker wakes each soon after its due time; the lateness is
  measured and printed, and only a generous bound is asserted.

Workers run in their own network namespaces (see ``netns.py``), or as plain processes
where namespaces cannot be made.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

import savegame
from savegame import RunStatus, open_store, submit
from savegame.client import list_runs
from savegame.fleet._schedules import occurrence_id
from savegame.runtime import load
from savegame.stores.schedules import schedules_of
from tests import services

from . import netns

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent / "src"
WORKLOAD = str(HERE / "fleet_orchestration.py")
WORKERS = 3
SCHEDULES = 6
ROUNDS = 5
NAPS = 12
PLANNERS = 2
RELAY_PORT = 56432 + os.getpid() % 1000


@pytest.fixture
def schema() -> Iterator[str]:
    with services.postgres_schema("orch") as name:
        yield name


@pytest.fixture
def world(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "world.db"
    os.environ["SAVEGAME_WORLD"] = str(path)
    load(f"{WORKLOAD}:tick")
    module = next(m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == WORKLOAD)
    module.world().close()  # the tables exist before any worker writes
    yield path
    os.environ.pop("SAVEGAME_WORLD", None)


def rows(world: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(world)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@contextmanager
def fleet(
    schema: str, world: Path, *, idle: float, poll: float
) -> Iterator[list[subprocess.Popen[str]]]:
    """``WORKERS`` worker processes, one per test host; stopped (SIGTERM) when the block ends."""
    reason = netns.available()
    with (
        netns.hosts(WORKERS, relay_port=RELAY_PORT, target=("127.0.0.1", 5432))
        if reason is None
        else _no_hosts()
    ) as made:
        where = (
            [(h.command(), f"{h.gateway}:{RELAY_PORT}") for h in made]
            if made
            else [([], "127.0.0.1:5432")] * WORKERS
        )
        procs = []
        for index, (prefix, db) in enumerate(where):
            env = {
                **os.environ,
                "SAVEGAME_WORLD": str(world),
                "SAVEGAME_HOST": f"host-{index}",
                "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            }
            url = f"postgresql://postgres@{db}/test?schema={schema}"
            procs.append(
                subprocess.Popen(
                    [
                        *prefix,
                        sys.executable,
                        str(HERE / "worker_main.py"),
                        url,
                        str(idle),
                        str(poll),
                    ],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        try:
            yield procs
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    out, err = proc.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    out, err = proc.communicate(timeout=10)
                if out or err:  # shown when a test fails
                    print(f"worker {proc.pid}: {out[-1000:]}{err[-3000:]}")


@contextmanager
def _no_hosts() -> Iterator[list[netns.Host]]:
    yield []


def wait_for(what: str, check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def finish(procs: list[subprocess.Popen[str]]) -> list[tuple[str, str]]:
    """Stop the workers gracefully; their (stdout, stderr)."""
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    outputs = [proc.communicate(timeout=30) for proc in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err[-2000:]
    return outputs


def test_three_workers_fire_each_occurrence_of_a_schedule_once(schema: str, world: Path) -> None:
    local = services.postgres_url(schema)
    names = [f"tick-{i}" for i in range(SCHEDULES)]
    for name in names:
        # Once a year, an hour's catch-up: the rounds below set the cursor themselves,
        # so the only occurrences are the ones this test makes due.
        savegame.client.schedule(
            name, f"{WORKLOAD}:tick", cron="0 0 1 1 *", catchup_window=3600, store=local
        )
    expected: set[str] = set()
    with fleet(schema, world, idle=120, poll=0.05) as procs, open_store(local) as handle:
        sched = schedules_of(handle)
        for _ in range(ROUNDS):
            # Every schedule due at the same whole second, a moment from now, so the
            # three workers' ticks race for each occurrence.
            at = datetime.fromtimestamp(int(time.time()) + 1, timezone.utc)
            for name in names:
                sched.put_schedule(replace(sched.get_schedule(name), next_at=at), replace=True)
                expected.add(occurrence_id(name, at))
            wait_for(
                "the round's runs",
                lambda: (
                    len(list_runs(store=handle, workflow="fleet-tick", limit=1000)) == len(expected)
                ),
                30,
            )
        wait_for(
            "every occurrence's step",
            lambda: rows(world, "SELECT count(*) FROM ticks")[0][0] >= len(expected),
            60,
        )
        time.sleep(0.5)  # a second firing, were there one, has time to show
        outputs = finish(procs)
        counts = {name: sched.get_schedule(name).fired for name in names}
    runs = list_runs(store=local, workflow="fleet-tick", limit=1000)
    per_worker = [int(re.findall(r"scheduled=(\d+)", out)[-1]) for out, _ in outputs]
    ticks = rows(world, "SELECT run_id, count(*) FROM ticks GROUP BY run_id")
    print(
        f"\n{len(expected)} occurrences ({SCHEDULES} schedules x {ROUNDS} rounds) on {WORKERS} "
        f"workers: {len(runs)} runs, fired per worker {per_worker}"
    )
    assert {r.run_id for r in runs} == expected
    assert all(r.status is RunStatus.COMPLETED for r in runs)
    assert counts == dict.fromkeys(names, ROUNDS)
    assert sum(per_worker) == len(expected)  # each occurrence created by exactly one worker
    assert dict(ticks) == dict.fromkeys(expected, 1)  # and executed once, outside the store


def test_sleeping_runs_hold_no_process_and_fleet_workers_wake_them_when_due(
    schema: str, world: Path
) -> None:
    local = services.postgres_url(schema)
    nap = load(f"{WORKLOAD}:nap")
    with fleet(schema, world, idle=120, poll=0.1) as procs, open_store(local) as handle:
        # Workers take seconds to start on a busy machine: the naps begin once one runs.
        warm = submit(load(f"{WORKLOAD}:tick"), store=local).run_id
        wait_for(
            "a worker to be up", lambda: handle.get_run(warm).status is RunStatus.COMPLETED, 60
        )
        start = time.time()
        dues = {
            submit(nap, {"due": start + 4 + 0.3 * i}, store=local).run_id: start + 4 + 0.3 * i
            for i in range(NAPS)
        }

        def all_asleep() -> bool:
            found = [handle.get_run(r) for r in dues]
            return all(r.status is RunStatus.WAITING for r in found)

        wait_for("every run to go to sleep", all_asleep, 30)
        asleep_at = time.time()
        sleeping = [handle.get_run(r) for r in dues]
        # No process holds a sleeping run: no lease, a wake time in the store.
        assert all(r.lease is None and r.wake_at is not None for r in sleeping)
        wait_for(
            "every run to wake", lambda: rows(world, "SELECT count(*) FROM wakes")[0][0] >= NAPS, 60
        )
        finish(procs)
    wakes = rows(world, "SELECT run_id, due, woke FROM wakes")
    late = sorted(float(woke) - float(due) for _, due, woke in wakes)  # type: ignore[arg-type]
    print(
        f"\n{NAPS} runs slept on {WORKERS} workers (asleep {asleep_at - start:.1f} s after submit): "
        f"woken late by median {statistics.median(late):.3f} s, max {max(late):.3f} s"
    )
    assert sorted(r for r, _, _ in wakes) == sorted(dues)  # each woke once
    assert min(late) >= 0  # never before its time
    assert max(late) < 10  # generous: the number to watch is the printed one
    assert all(savegame.client.get_run(r, store=local).status is RunStatus.COMPLETED for r in dues)


def test_child_runs_start_once_and_pay_once_across_a_killed_worker(
    schema: str, world: Path
) -> None:
    local = services.postgres_url(schema)
    planner = load(f"{WORKLOAD}:planner")
    parents = [submit(planner, {}, store=local).run_id for _ in range(PLANNERS)]
    with fleet(schema, world, idle=120, poll=0.05) as procs, open_store(local) as handle:
        # Kill one worker (SIGKILL) while the children are under way; the others take its
        # runs over once their leases (2 s) expire.
        wait_for(
            "children at work",
            lambda: rows(world, "SELECT count(*) FROM child_steps")[0][0] >= 4,
            60,
        )
        procs[0].send_signal(signal.SIGKILL)
        procs[0].communicate(timeout=10)

        def parents_done() -> bool:
            return all(handle.get_run(p).status is RunStatus.COMPLETED for p in parents)

        wait_for("every planner to complete", parents_done, 90)
        finish(procs[1:])
    children = [r for r in list_runs(store=local, workflow="fleet-child", limit=1000)]
    hosts = rows(world, "SELECT run_id, count(DISTINCT host) FROM child_steps GROUP BY run_id")
    print(
        f"\n{PLANNERS} planners x 3 children on {WORKERS} workers, one SIGKILLed: "
        f"{len(children)} children, {sum(1 for _, n in hosts if n > 1)} ran on two hosts"
    )
    assert len(children) == 3 * PLANNERS  # each child started once
    assert all(c.status is RunStatus.COMPLETED for c in children)
    assert {c.metadata["parent"]["run"] for c in children} == set(parents)
    payments = rows(world, "SELECT child FROM payments")
    assert sorted(c for (c,) in payments) == sorted(c.run_id for c in children)  # paid once
    for parent in parents:
        state = savegame.client.get_checkpoint(parent, store=local).state
        assert state["total"] == 15 and len(state["paid"]) == 3
