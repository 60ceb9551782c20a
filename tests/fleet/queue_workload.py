"""The workload of the queue test: each run's one step marks its start and end in a ledger
outside savegame (tables in PostgreSQL, ``SAVEGAME_LEDGER`` = conninfo, ``SAVEGAME_LEDGER_SCHEMA``),
so the test counts how many ran at once across worker processes.

``gauge`` holds the runs executing now and the most there ever were, moved by one UPDATE
each (a row lock): what it says is exact, whatever the processes' clocks.
"""

from __future__ import annotations

import os
import time
from typing import Any

import psycopg

from savegame import END, StepContext, Workflow

STEP_SECONDS = 0.02


def ledger() -> psycopg.Connection[Any]:
    conn = psycopg.connect(os.environ["SAVEGAME_LEDGER"], autocommit=True)
    conn.execute(f'SET search_path TO "{os.environ["SAVEGAME_LEDGER_SCHEMA"]}"')
    return conn


def prepare() -> None:
    """The ledger's tables, made once before any worker starts."""
    schema = os.environ["SAVEGAME_LEDGER_SCHEMA"]
    with psycopg.connect(os.environ["SAVEGAME_LEDGER"], autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute("CREATE TABLE gauge (running integer NOT NULL, peak integer NOT NULL)")
        conn.execute("INSERT INTO gauge VALUES (0, 0)")
        conn.execute(
            "CREATE TABLE marks (run_id text, mark text, running integer, pid integer,"
            " at timestamptz DEFAULT clock_timestamp())"
        )


wf = Workflow("queued-job")


@wf.step(entry=True)
def job(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    with ledger() as conn:
        (now,) = conn.execute(
            "UPDATE gauge SET running = running + 1, peak = greatest(peak, running + 1)"
            " RETURNING running"
        ).fetchone() or (0,)
        conn.execute(
            "INSERT INTO marks (run_id, mark, running, pid) VALUES (%s, 'start', %s, %s)",
            (ctx.run_id, now, os.getpid()),
        )
        time.sleep(STEP_SECONDS)
        (now,) = conn.execute(
            "UPDATE gauge SET running = running - 1 RETURNING running"
        ).fetchone() or (0,)
        conn.execute(
            "INSERT INTO marks (run_id, mark, running, pid) VALUES (%s, 'end', %s, %s)",
            (ctx.run_id, now, os.getpid()),
        )
    return {"done": True}, END
