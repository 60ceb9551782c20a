"""Queues on SQLite (``stores/_queues.py`` says what they are): declared queues, a run put in
one, and the claim that keeps every queue's limits.

Every claim runs under ``BEGIN IMMEDIATE`` (the store's ``_tx``): counting what a queue
runs, picking a run and taking its lease happen under one write lock, so claimers in any
number of processes never start more than a queue allows. Times are this process's clock
in epoch seconds, as the lease columns are.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any

from savegame.errors import NotFoundError
from savegame.stores import _common
from savegame.stores._queues import (
    DuplicateRunError,
    Enqueue,
    Queue,
    QueueStats,
    check_queue,
    check_queues,
    with_room,
)

_CLAIMABLE = ", ".join(f"'{s}'" for s in _common.CLAIMABLE)
_UNFINISHED = ", ".join(f"'{s}'" for s in _common.UNFINISHED)

#: Migration 10 of ``_schema.MIGRATIONS``.
MIGRATION = (
    "ALTER TABLE runs ADD COLUMN queue TEXT",
    "ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN dedup_key TEXT",
    # Epoch seconds of the run's first claim: what a queue's rate limit counts.
    "ALTER TABLE runs ADD COLUMN started_at REAL",
    """
    CREATE TABLE queues (
        name TEXT PRIMARY KEY,
        concurrency INTEGER,
        worker_concurrency INTEGER,
        rate_limit INTEGER,
        rate_period REAL NOT NULL
    )
    """,
    # A queue's claimable runs by priority, only those indexed (a plain claim never reads it).
    "CREATE INDEX runs_queue_claim ON runs (queue, priority DESC, created_at, run_id)"
    " WHERE queue IS NOT NULL AND status IN ('queued', 'running')",
    # A queue's live leases (its running count), only leased rows indexed.
    "CREATE INDEX runs_queue_leased ON runs (queue, lease_owner)"
    " WHERE queue IS NOT NULL AND lease_owner IS NOT NULL",
    "CREATE INDEX runs_queue_started ON runs (queue, started_at) WHERE started_at IS NOT NULL",
    "CREATE INDEX runs_queue_dedup ON runs (queue, dedup_key) WHERE dedup_key IS NOT NULL",
    "CREATE INDEX runs_queue_status ON runs (queue, status) WHERE queue IS NOT NULL",
)

UPSERT = """
    INSERT INTO queues (name, concurrency, worker_concurrency, rate_limit, rate_period)
    VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (name) DO UPDATE SET concurrency = excluded.concurrency,
      worker_concurrency = excluded.worker_concurrency, rate_limit = excluded.rate_limit,
      rate_period = excluded.rate_period
"""

# Per queue (?3: a JSON array of names, or NULL for all): its limits and, at ?1 (now),
# the runs with a live lease, those held by ?2 (this claimer), and first starts within
# its rate window.
ROOM = """
    SELECT q.name, q.concurrency, q.worker_concurrency, q.rate_limit,
      (SELECT count(*) FROM runs r INDEXED BY runs_queue_leased WHERE r.queue = q.name
         AND r.lease_owner IS NOT NULL AND r.lease_expires_at > ?1),
      (SELECT count(*) FROM runs r INDEXED BY runs_queue_leased WHERE r.queue = q.name
         AND r.lease_owner = ?2 AND r.lease_expires_at > ?1),
      (SELECT count(*) FROM runs r INDEXED BY runs_queue_started WHERE r.queue = q.name
         AND r.started_at IS NOT NULL AND r.started_at > ?1 - q.rate_period)
    FROM queues q
    WHERE ?3 IS NULL OR q.name IN (SELECT value FROM json_each(?3))
"""

# Of the runs of a queue with room (?4, a JSON array; a first start only in one of ?6,
# those within their rate limit) or, with ?5, of no queue: the soonest woken waiting
# run, then the claimable run of highest priority, oldest first.
_FREE = "(lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= ?1)"
_WHICH = (
    "AND (?2 IS NULL OR workflow IN (SELECT value FROM json_each(?2)))"
    " AND (?7 IS NULL OR version IN (SELECT value FROM json_each(?7)))"
    " AND ((?5 AND queue IS NULL) OR (queue IN (SELECT value FROM json_each(?4))"
    " AND (started_at IS NOT NULL OR queue IN (SELECT value FROM json_each(?6)))))"
)
CLAIM_WOKEN = f"""
    SELECT run_id, lease_token, queue, started_at FROM runs INDEXED BY runs_waking
    WHERE status = 'waiting' AND wake_at IS NOT NULL AND wake_at <= ?3 AND {_FREE} {_WHICH}
    ORDER BY wake_at, run_id LIMIT 1
"""
CLAIM = f"""
    SELECT run_id, lease_token, queue, started_at FROM runs
    WHERE status IN ({_CLAIMABLE}) AND {_FREE} {_WHICH}
    ORDER BY priority DESC, created_at, run_id LIMIT 1
"""

DEDUP = (
    "SELECT run_id FROM runs INDEXED BY runs_queue_dedup WHERE queue = ? AND dedup_key = ?"
    f" AND status IN ({_UNFINISHED}) LIMIT 1"
)

STATS = f"""
    SELECT q.name, q.concurrency, q.worker_concurrency, q.rate_limit, q.rate_period,
      (SELECT count(*) FROM runs r WHERE r.queue = q.name AND r.status = 'queued'
         AND (r.lease_owner IS NULL OR r.lease_expires_at <= ?1)),
      (SELECT count(*) FROM runs r INDEXED BY runs_queue_leased WHERE r.queue = q.name
         AND r.lease_owner IS NOT NULL AND r.lease_expires_at > ?1),
      (SELECT count(*) FROM runs r INDEXED BY runs_queue_started WHERE r.queue = q.name
         AND r.started_at IS NOT NULL AND r.started_at > ?1 - q.rate_period),
      (SELECT count(*) FROM runs r WHERE r.queue = q.name AND r.status IN ({_UNFINISHED}))
    FROM queues q ORDER BY q.name
"""


def declare(conn: sqlite3.Connection, queue: Queue) -> None:
    """Create ``queue`` or replace its limits."""
    q = check_queue(queue)
    conn.execute(UPSERT, (q.name, q.concurrency, q.worker_concurrency, q.limit, float(q.period)))


def stats(read: Callable[[str, Sequence[Any]], list[Any]]) -> list[QueueStats]:
    """Every queue with its counts now, by name (a plain read: no write lock)."""
    found = read(STATS, (time.time(),))
    return [QueueStats(Queue(r[0], r[1], r[2], r[3], r[4]), r[5], r[6], r[7], r[8]) for r in found]


def enqueue(conn: sqlite3.Connection, run_id: str, where: Enqueue) -> None:
    """Put the new run ``run_id`` in its queue, in its create transaction (under BEGIN
    IMMEDIATE: no other create passes the dedup check meanwhile)."""
    if conn.execute("SELECT 1 FROM queues WHERE name = ?", (where.queue,)).fetchone() is None:
        raise NotFoundError("queue", where.queue)
    if where.dedup_key is not None:
        row = conn.execute(DEDUP, (where.queue, where.dedup_key)).fetchone()
        if row is not None:
            raise DuplicateRunError(where.queue, where.dedup_key, row[0])
    conn.execute(
        "UPDATE runs SET queue = ?, priority = ?, dedup_key = ? WHERE run_id = ?",
        (where.queue, where.priority, where.dedup_key, run_id),
    )


def in_play(conn: sqlite3.Connection, queues: Sequence[str] | None) -> bool:
    """Whether a claim must mind queues: it names some, or some are declared."""
    return queues is not None or conn.execute("SELECT 1 FROM queues LIMIT 1").fetchone() is not None


def claim(
    conn: sqlite3.Connection,
    owner: str,
    now: float,
    workflows: str | None,
    queues: Sequence[str] | None,
    versions: str | None = None,
) -> tuple[str, int] | None:
    """The run (id, lease token) a claim takes when queues are in play, a run of no queue
    only when ``queues`` is None; its first start marked. In the claim's transaction."""
    wanted = check_queues(queues)
    names = None if wanted is None else _common.json_dumps(wanted, "queues").decode()
    room, starts = with_room(conn.execute(ROOM, (now, owner, names)).fetchall())
    params: tuple[Any, ...] = (
        now, workflows, round(now * 1e6), _common.json_dumps(room, "queues").decode(),
        wanted is None, _common.json_dumps(starts, "queues").decode(), versions,
    )  # fmt: skip
    row = conn.execute(CLAIM_WOKEN, params).fetchone()
    if row is None:
        row = conn.execute(CLAIM, params).fetchone()
    if row is None:
        return None
    if row[2] is not None and row[3] is None:
        conn.execute("UPDATE runs SET started_at = ? WHERE run_id = ?", (now, row[0]))
    return str(row[0]), int(row[1])
