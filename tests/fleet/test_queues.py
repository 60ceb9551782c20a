"""Issue 18's queue test: a queue with concurrency 2 never runs 3, measured over 200 runs
on 3 worker processes (``savegame worker --queue``) sharing one PostgreSQL store.

Each run's step moves a gauge in a ledger outside savegame's tables (``queue_workload``):
the most runs it ever saw executing at once is the measured concurrency.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from savegame import RunStatus, submit
from savegame.client import declare_queue, list_queues, list_runs
from savegame.runtime import load
from tests import services

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent / "src"
RUNS = 200
WORKERS = 3


@pytest.fixture
def schema() -> Iterator[str]:
    with services.postgres_schema("queues") as name:
        yield name


@pytest.fixture
def ledger_schema() -> Iterator[str]:
    with services.postgres_schema("ledger") as name:
        yield name


def _worker(url: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable, "-m", "savegame", "worker", "--store", url, "--queue", "emails",
            "--concurrency", "3", "--poll", "0.02", "--lease-ttl", "10",
            "--exit-when-idle", "3",
        ],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.timeout(300)
def test_a_queue_with_concurrency_2_never_runs_3_on_3_workers(
    schema: str, ledger_schema: str
) -> None:
    conninfo = services.postgres_conninfo()
    env = {
        **os.environ,
        "SAVEGAME_LEDGER": conninfo,
        "SAVEGAME_LEDGER_SCHEMA": ledger_schema,
        "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    os.environ.update(SAVEGAME_LEDGER=conninfo, SAVEGAME_LEDGER_SCHEMA=ledger_schema)
    wf = load(str(HERE / "queue_workload.py") + ":wf")
    from tests.fleet import queue_workload

    queue_workload.prepare()
    url = services.postgres_url(schema)
    declare_queue("emails", concurrency=2, store=url)
    run_ids = [submit(wf, {"n": i}, store=url, queue="emails").run_id for i in range(RUNS)]
    workers = [_worker(url, env) for _ in range(WORKERS)]
    outs = []
    try:
        for proc in workers:
            out, err = proc.communicate(timeout=240)
            outs.append((proc.returncode, out, err[-2000:]))
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
    assert all(code == 0 for code, _, _ in outs), outs
    runs = {r.run_id: r.status for r in list_runs(store=url, limit=RUNS + 10)}
    assert runs == dict.fromkeys(run_ids, RunStatus.COMPLETED)
    with psycopg.connect(conninfo) as conn:
        conn.execute(f'SET search_path TO "{ledger_schema}"')
        running, peak = conn.execute("SELECT running, peak FROM gauge").fetchone() or (-1, -1)
        marks = conn.execute("SELECT run_id, mark, pid FROM marks").fetchall()
    print(f"measured: {RUNS} runs on {WORKERS} workers, most at once {peak} (limit 2)")
    assert running == 0 and 1 <= peak <= 2
    # Every run's step executed once: one start and one end each.
    assert Counter((run, mark) for run, mark, _ in marks) == Counter(
        {(run, mark): 1 for run in run_ids for mark in ("start", "end")}
    )
    (emails,) = list_queues(store=url)
    assert (emails.queued, emails.running, emails.unfinished) == (0, 0, 0)
