"""Issue 5's multi-host test: workers on separate network hosts share one PostgreSQL store.

Two worker processes run in their own network namespaces (test hosts with
their own addresses, reaching PostgreSQL over a veth link), or as plain
processes where namespaces cannot be made. One is SIGKILLed mid-run; the
other takes its runs over once their leases expire. Every run must complete
exactly once, and every charge must happen exactly once: checked in the
journal and in a counter outside the store.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from savegame import RunStatus, open_store, submit
from savegame.client import get_checkpoint, list_effects, list_runs
from savegame.model import EffectKind
from savegame.runtime import load
from tests import services

from . import netns

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent / "src"
RUNS = 8
RELAY_PORT = 55432 + os.getpid() % 1000


@pytest.fixture
def schema() -> Iterator[str]:
    with services.postgres_schema("fleet") as name:
        yield name


@contextmanager
def worker_hosts() -> Iterator[list[tuple[list[str], str]]]:
    """(command prefix, database host:port) for two workers, on separate hosts when possible."""
    reason = netns.available()
    if reason is not None:
        # Separate processes on one host still prove takeover and fencing.
        yield [([], "127.0.0.1:5432"), ([], "127.0.0.1:5432")]
        return
    with netns.hosts(2, relay_port=RELAY_PORT, target=("127.0.0.1", 5432)) as made:
        yield [(host.command(), f"{host.gateway}:{RELAY_PORT}") for host in made]


def world_module() -> Any:
    load(str(HERE / "fleet_workload.py") + ":wf")
    return next(
        m
        for m in list(sys.modules.values())
        if getattr(m, "__file__", None) == str(HERE / "fleet_workload.py")
    )


def world_rows(world: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(world)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def start_worker(prefix: list[str], url: str, world: Path, host: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "SAVEGAME_WORLD": str(world),
        "SAVEGAME_HOST": host,
        "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    return subprocess.Popen(
        [*prefix, sys.executable, str(HERE / "worker_main.py"), url, "4"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_workers_on_two_hosts_take_over_a_killed_worker(tmp_path: Path, schema: str) -> None:
    world = tmp_path / "world.db"
    os.environ["SAVEGAME_WORLD"] = str(world)
    wf = load(str(HERE / "fleet_workload.py") + ":wf")
    # The outside world's tables exist before any worker polls them.
    world_module().world().close()
    local = services.postgres_url(schema)
    run_ids = [submit(wf, {"order": f"o-{i}"}, store=local).run_id for i in range(RUNS)]
    assert {r.status for r in list_runs(store=local)} == {RunStatus.QUEUED}
    with worker_hosts() as hosts:
        (prefix_a, db_a), (prefix_b, db_b) = hosts
        url_a = f"postgresql://postgres@{db_a}/test?schema={schema}"
        url_b = f"postgresql://postgres@{db_b}/test?schema={schema}"
        doomed = start_worker(prefix_a, url_a, world, "host-a")
        survivor: subprocess.Popen[str] | None = None
        try:
            # Let the first worker get going, then kill it in the middle of its runs.
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if world_rows(world, "SELECT count(*) FROM steps")[0][0] >= 5:
                    break
                time.sleep(0.02)
            survivor = start_worker(prefix_b, url_b, world, "host-b")
            time.sleep(0.2)
            doomed.send_signal(signal.SIGKILL)
            doomed.communicate(timeout=10)
            _out, err = survivor.communicate(timeout=90)
            assert survivor.returncode == 0, err[-2000:]
        finally:
            for proc in (doomed, survivor):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.communicate(timeout=10)
    statuses = {r.run_id: r.status for r in list_runs(store=local)}
    errors = {r.run_id: r.error for r in list_runs(store=local) if r.error}
    assert statuses == dict.fromkeys(run_ids, RunStatus.COMPLETED), (errors, err[-3000:])
    # Each run ended in the state an uninterrupted run has.
    for run_id in run_ids:
        state = get_checkpoint(run_id, store=local).state
        assert state["trail"] == [1, 2, 3, 4, 5, 6] and state["receipt"]["amount"] == 103
    # Exactly once: one journaled charge per run, one real charge per request id.
    for run_id in run_ids:
        writes = [e for e in list_effects(run_id, store=local) if e.kind is EffectKind.WRITE]
        assert len(writes) == 1 and writes[0].status.value == "done"
    charges = world_rows(world, "SELECT request_id, run_id FROM charges")
    assert sorted(run for _, run in charges) == sorted(f"o-{i}" for i in range(RUNS))
    # The kill really interrupted work: some runs have steps from both hosts.
    hosts_per_run = world_rows(
        world, "SELECT run_id, count(DISTINCT host) FROM steps GROUP BY run_id"
    )
    assert any(count == 2 for _, count in hosts_per_run), hosts_per_run
    store = open_store(local)
    try:
        assert all(r.lease is None for r in store.list_runs())
    finally:
        store.close()
