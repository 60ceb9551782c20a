"""Queues on PostgreSQL (``stores/_queues.py`` says what they are): declared queues, a run
put in one, and the claim that keeps every queue's limits.

A claim that minds queues locks the rows of the queues it may take from (``FOR UPDATE``,
in name order, so two claimers never deadlock) before it counts what they run: claimers
of one queue take turns for the few statements of a claim, and each counts after the one
before committed its take (READ COMMITTED: each statement sees what was committed before
it began). A create with a dedup key locks its queue's row the same way, so of two
submits with one key the second sees the first's run. Times are the server's clock.
"""

from __future__ import annotations

from collections.abc import Sequence
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
from savegame.stores._sql.statements import PG_NOW as NOW

_CLAIMABLE = ", ".join(f"'{s}'" for s in _common.CLAIMABLE)
_UNFINISHED = ", ".join(f"'{s}'" for s in _common.UNFINISHED)

#: Migration 7 of ``_schema.MIGRATIONS``.
MIGRATION = (
    'ALTER TABLE {s}.runs ADD COLUMN queue text COLLATE "C"',
    "ALTER TABLE {s}.runs ADD COLUMN priority integer NOT NULL DEFAULT 0",
    'ALTER TABLE {s}.runs ADD COLUMN dedup_key text COLLATE "C"',
    # Epoch seconds (the server's clock) of the run's first claim: what a rate limit counts.
    "ALTER TABLE {s}.runs ADD COLUMN started_at double precision",
    """
    CREATE TABLE {s}.queues (
        name text COLLATE "C" PRIMARY KEY,
        concurrency integer,
        worker_concurrency integer,
        rate_limit integer,
        rate_period double precision NOT NULL
    )
    """,
    "CREATE INDEX runs_queue_claim ON {s}.runs (queue, priority DESC, created_at, run_id)"
    " WHERE queue IS NOT NULL AND status IN ('queued', 'running')",
    "CREATE INDEX runs_queue_leased ON {s}.runs (queue, lease_owner)"
    " WHERE queue IS NOT NULL AND lease_owner IS NOT NULL",
    "CREATE INDEX runs_queue_started ON {s}.runs (queue, started_at) WHERE started_at IS NOT NULL",
    "CREATE INDEX runs_queue_dedup ON {s}.runs (queue, dedup_key) WHERE dedup_key IS NOT NULL",
    "CREATE INDEX runs_queue_status ON {s}.runs (queue, status) WHERE queue IS NOT NULL",
)

UPSERT = """
    INSERT INTO queues (name, concurrency, worker_concurrency, rate_limit, rate_period)
    VALUES (%s, %s, %s, %s, %s)
    ON CONFLICT (name) DO UPDATE SET concurrency = excluded.concurrency,
      worker_concurrency = excluded.worker_concurrency, rate_limit = excluded.rate_limit,
      rate_period = excluded.rate_period
"""

LOCK = """
    SELECT name FROM queues
    WHERE %(queues)s::text[] IS NULL OR name = ANY(%(queues)s::text[])
    ORDER BY name FOR UPDATE
"""

ROOM = f"""
    SELECT q.name, q.concurrency, q.worker_concurrency, q.rate_limit,
      (SELECT count(*) FROM runs r WHERE r.queue = q.name
         AND r.lease_owner IS NOT NULL AND r.lease_expires_at > {NOW}),
      (SELECT count(*) FROM runs r WHERE r.queue = q.name
         AND r.lease_owner = %(owner)s AND r.lease_expires_at > {NOW}),
      (SELECT count(*) FROM runs r WHERE r.queue = q.name
         AND r.started_at IS NOT NULL AND r.started_at > {NOW} - q.rate_period)
    FROM queues q WHERE q.name = ANY(%(locked)s::text[])
"""

_FREE = f"(lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= {NOW})"
_WHICH = (
    "AND (%(workflows)s::text[] IS NULL OR workflow = ANY(%(workflows)s::text[]))"
    " AND (%(versions)s::text[] IS NULL OR version = ANY(%(versions)s::text[]))"
    " AND ((%(plain)s AND queue IS NULL) OR (queue = ANY(%(room)s::text[])"
    " AND (started_at IS NOT NULL OR queue = ANY(%(starts)s::text[]))))"
)
CLAIM_WOKEN = f"""
    SELECT run_id, lease_token, queue, started_at FROM runs
    WHERE status = 'waiting' AND wake_at IS NOT NULL AND wake_at <= %(now)s::bigint
      AND {_FREE} {_WHICH}
    ORDER BY wake_at, run_id LIMIT 1
    FOR UPDATE SKIP LOCKED
"""
CLAIM = f"""
    SELECT run_id, lease_token, queue, started_at FROM runs
    WHERE status IN ({_CLAIMABLE}) AND {_FREE} {_WHICH}
    ORDER BY priority DESC, created_at, run_id LIMIT 1
    FOR UPDATE SKIP LOCKED
"""

DEDUP = (
    "SELECT run_id FROM runs WHERE queue = %s AND dedup_key = %s"
    f" AND status IN ({_UNFINISHED}) LIMIT 1"
)

STATS = f"""
    SELECT q.name, q.concurrency, q.worker_concurrency, q.rate_limit, q.rate_period,
      (SELECT count(*) FROM runs r WHERE r.queue = q.name AND r.status = 'queued'
         AND (r.lease_owner IS NULL OR r.lease_expires_at <= {NOW})),
      (SELECT count(*) FROM runs r WHERE r.queue = q.name
         AND r.lease_owner IS NOT NULL AND r.lease_expires_at > {NOW}),
      (SELECT count(*) FROM runs r WHERE r.queue = q.name
         AND r.started_at IS NOT NULL AND r.started_at > {NOW} - q.rate_period),
      (SELECT count(*) FROM runs r WHERE r.queue = q.name AND r.status IN ({_UNFINISHED}))
    FROM queues q ORDER BY q.name
"""


def declare(conn: Any, queue: Queue) -> None:
    """Create ``queue`` or replace its limits."""
    q = check_queue(queue)
    conn.execute(UPSERT, (q.name, q.concurrency, q.worker_concurrency, q.limit, float(q.period)))


def stats(conn: Any) -> list[QueueStats]:
    """Every queue with its counts now, by name."""
    found = conn.execute(STATS).fetchall()
    return [QueueStats(Queue(r[0], r[1], r[2], r[3], r[4]), r[5], r[6], r[7], r[8]) for r in found]


def enqueue(conn: Any, run_id: str, where: Enqueue) -> None:
    """Put the new run ``run_id`` in its queue, in its create transaction; with a dedup key
    under the queue row's lock, so no other create passes the check meanwhile."""
    lock = " FOR UPDATE" if where.dedup_key is not None else ""
    found = conn.execute(f"SELECT 1 FROM queues WHERE name = %s{lock}", (where.queue,))
    if found.fetchone() is None:
        raise NotFoundError("queue", where.queue)
    if where.dedup_key is not None:
        row = conn.execute(DEDUP, (where.queue, where.dedup_key)).fetchone()
        if row is not None:
            raise DuplicateRunError(where.queue, where.dedup_key, row[0])
    conn.execute(
        "UPDATE runs SET queue = %s, priority = %s, dedup_key = %s WHERE run_id = %s",
        (where.queue, where.priority, where.dedup_key, run_id),
    )


def in_play(conn: Any, queues: Sequence[str] | None) -> bool:
    """Whether a claim must mind queues: it names some, or some are declared."""
    return queues is not None or conn.execute("SELECT 1 FROM queues LIMIT 1").fetchone() is not None


def claim(
    conn: Any,
    owner: str,
    now: int,
    workflows: list[str] | None,
    queues: Sequence[str] | None,
    versions: list[str] | None = None,
) -> tuple[str, int] | None:
    """The run (id, lease token) a claim takes when queues are in play, a run of no queue
    only when ``queues`` is None; its first start marked. In the claim's transaction."""
    wanted = check_queues(queues)
    locked = [r[0] for r in conn.execute(LOCK, {"queues": wanted}).fetchall()]
    counted = conn.execute(ROOM, {"owner": owner, "locked": locked}).fetchall()
    room, starts = with_room(counted)
    params = {
        "now": now, "workflows": workflows, "room": room, "starts": starts,
        "plain": wanted is None, "versions": versions,
    }  # fmt: skip
    row = conn.execute(CLAIM_WOKEN, params).fetchone()
    if row is None:
        row = conn.execute(CLAIM, params).fetchone()
    if row is None:
        return None
    if row[2] is not None and row[3] is None:
        conn.execute(f"UPDATE runs SET started_at = {NOW} WHERE run_id = %s", (row[0],))
    return str(row[0]), int(row[1])
