"""Rows of the PostgreSQL schema <-> model records, and the SQL the store shares.

Kept apart from :mod:`savegame.stores.postgres` so the store reads as the
transactions it runs, and each column list lives next to the converter that
reads it. JSON columns arrive already parsed (the store registers orjson as
the connection's JSON loader); ``bytea`` arrives as ``bytes``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from savegame.errors import ConflictError, NotFoundError
from savegame.model import (
    CheckpointHeader,
    CheckpointRecord,
    EffectKind,
    EffectRecord,
    EffectStatus,
    RunInfo,
    RunStatus,
)
from savegame.stores import _common
from savegame.stores._sql import rows

if TYPE_CHECKING:
    import psycopg

# The column order is shared with the other SQL backend: see sql_rows.
HEADER_COLS, RECORD_COLS = rows.HEADER_COLS, rows.RECORD_COLS
RUN_COLS, EFFECT_COLS = rows.RUN_COLS, rows.EFFECT_COLS

#: Epoch seconds on the server's clock: every process judges lease expiry by one clock.
NOW = "extract(epoch FROM clock_timestamp())::float8"

INSERT_CHECKPOINT = f"""
    INSERT INTO checkpoints ({RECORD_COLS})
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::json, %s::json, %s, %s, %s, %s, %s, %s,
            %s::text[], %s, %s)
    ON CONFLICT (checkpoint_id) DO NOTHING
"""

# The header may name a digest twice; the reference table holds the set.
INSERT_REFS = """
    INSERT INTO checkpoint_blobs (checkpoint_id, digest)
    SELECT %s, d FROM unnest(%s::text[]) AS d
    ON CONFLICT DO NOTHING
"""

# The digests among %s (a text[]) with no stored blob.
MISSING_BLOBS = """
    SELECT d FROM unnest(%s::text[]) AS d
    WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.digest = d)
"""

INSERT_BLOB = "INSERT INTO blobs (digest, data, size) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"

# rewrite stores its blobs whether or not the digest is there (re-encrypted bytes).
UPSERT_BLOB = """
    INSERT INTO blobs (digest, data, size) VALUES (%s, %s, %s)
    ON CONFLICT (digest) DO UPDATE SET data = EXCLUDED.data, size = EXCLUDED.size
"""

# rewrite replaces a record whole; RETURNING what it belongs to, for the check.
REPLACE_CHECKPOINT = """
    UPDATE checkpoints SET parent_id = %s, step = %s, node = %s, status = %s, next = %s,
        usage = %s::json, metadata = %s::json, created_at = %s, expires_at = %s,
        format_version = %s, state_version = %s, size = %s, base_id = %s, blobs = %s::text[],
        checksum = %s, payload = %s
    WHERE checkpoint_id = %s AND run_id = %s AND thread_id = %s
"""

# The oldest runnable run, locked: queued or running, with no owner or an expired
# lease (expired exactly when acquire_lease would take it over, by the server's
# clock), optionally of some workflows (NULL: any). The status test repeats the
# partial index's predicate word for word so the planner can use runs_claimable;
# FOR UPDATE re-checks a row changed since the snapshot, and SKIP LOCKED passes
# over rows other claimers hold, so LIMIT 1 yields the next free one.
CLAIM = f"""
    SELECT run_id, lease_token FROM runs
    WHERE status IN ({", ".join(f"'{s}'" for s in _common.CLAIMABLE)})
      AND (lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= {NOW})
      AND (%(workflows)s::text[] IS NULL OR workflow = ANY(%(workflows)s::text[]))
    ORDER BY created_at, run_id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
"""

# Insert-if-absent in one statement; the WHERE is _common.keeps in SQL: only a
# NOT_DONE entry is replaced. RETURNING yields nothing when the old entry stays.
UPSERT_EFFECT = f"""
    INSERT INTO effects ({EFFECT_COLS})
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::json, %s, %s, %s)
    ON CONFLICT (run_id, request_id) DO UPDATE SET
        kind = EXCLUDED.kind, name = EXCLUDED.name, step = EXCLUDED.step, node = EXCLUDED.node,
        call_index = EXCLUDED.call_index, status = EXCLUDED.status,
        arguments = EXCLUDED.arguments, result = EXCLUDED.result, error = EXCLUDED.error,
        metadata = EXCLUDED.metadata, created_at = EXCLUDED.created_at,
        completed_at = EXCLUDED.completed_at, checksum = EXCLUDED.checksum
    WHERE effects.status = '{EffectStatus.NOT_DONE.value}'
    RETURNING {EFFECT_COLS}
"""

# chain.cid is the id asked for at each depth; a NULL checkpoint row beside it
# is a missing base. The depth bound stops a cycle (damaged data) from looping.
CHAIN = f"""
    WITH RECURSIVE chain (depth, cid) AS (
        VALUES (0, %s::text COLLATE "C")
        UNION ALL
        SELECT chain.depth + 1, c.base_id FROM chain JOIN checkpoints c ON c.checkpoint_id = chain.cid
        WHERE c.base_id IS NOT NULL AND chain.depth < {_common.MAX_CHAIN}
    )
    SELECT chain.cid, {", ".join("c." + col.strip() for col in RECORD_COLS.split(","))}
    FROM chain LEFT JOIN checkpoints c ON c.checkpoint_id = chain.cid
    ORDER BY chain.depth
"""

# Correlated subqueries: each is a range scan of the run's index, so a thread
# filter reads only that thread's rows. octet_length reads a TOASTed value's
# size from its header without fetching it.
RUN_SIZES = """
    SELECT r.run_id, r.thread_id, r.status,
        (SELECT count(*) FROM checkpoints c WHERE c.run_id = r.run_id),
        (SELECT coalesce(sum(octet_length(c.payload)), 0) FROM checkpoints c
            WHERE c.run_id = r.run_id) AS payload_bytes,
        (SELECT count(*) FROM effects e WHERE e.run_id = r.run_id),
        (SELECT coalesce(sum(octet_length(e.arguments) + coalesce(octet_length(e.result), 0)), 0)
            FROM effects e WHERE e.run_id = r.run_id)
    FROM runs r WHERE %(thread)s::text IS NULL OR r.thread_id = %(thread)s
    ORDER BY payload_bytes DESC, r.run_id LIMIT %(limit)s
"""

STATS = """
    SELECT (SELECT count(*) FROM runs),
           (SELECT count(*) FROM checkpoints),
           (SELECT coalesce(sum(octet_length(payload)), 0) FROM checkpoints),
           (SELECT count(*) FROM blobs),
           (SELECT coalesce(sum(size), 0) FROM blobs),
           (SELECT count(*) FROM effects)
"""

# latest_run_id: the most recently created run of the thread (ties by id).
THREADS = """
    SELECT thread_id, count(*), max(updated_at),
           (SELECT r2.run_id FROM runs r2 WHERE r2.thread_id = r.thread_id
            ORDER BY r2.created_at DESC, r2.run_id DESC LIMIT 1)
    FROM runs r GROUP BY thread_id
    ORDER BY max(updated_at) DESC, thread_id DESC LIMIT %s
"""


def insert_checkpoint(
    conn: psycopg.Connection[Any],
    record: CheckpointRecord,
    params: tuple[Any, ...],
    blobs: Mapping[str, bytes],
) -> None:
    """Insert a record with the blobs it brings; call inside the write transaction.

    Raises:
        ConflictError: the id is taken, or the record names a blob neither in
            ``blobs`` nor stored (the transaction then writes nothing).
    """
    if conn.execute(INSERT_CHECKPOINT, params).rowcount == 0:
        raise ConflictError(f"checkpoint {record.checkpoint_id} exists already")
    if record.header.blobs:
        # The reference rows go in before the check: inserting them takes
        # checkpoint_blobs' ROW EXCLUSIVE lock, which waits for (and then
        # excludes) a running delete_unreferenced_blobs, so a blob the check
        # finds present (its statement snapshot is taken after the lock)
        # cannot be collected under this checkpoint.
        conn.execute(INSERT_REFS, (record.checkpoint_id, list(record.header.blobs)))
        wanted = _common.blobs_to_check(record.header, blobs)
        if wanted:
            missing = conn.execute(MISSING_BLOBS, (wanted,)).fetchall()
            if missing:
                raise _common.missing_blob_error(record.checkpoint_id, [row[0] for row in missing])
    if blobs:
        # Sorted: two writers sharing digests wait on each other in one order, never in a cycle.
        with conn.cursor() as cur:
            cur.executemany(INSERT_BLOB, [(d, blobs[d], len(blobs[d])) for d in sorted(blobs)])


def replace_checkpoint(conn: psycopg.Connection[Any], record: CheckpointRecord) -> None:
    """``rewrite``'s part for one record: the stored checkpoint of its id replaced whole,
    its blob references with it; call inside the transaction, blobs already stored.

    Raises:
        NotFoundError: no checkpoint has that id.
        ValueError: the record names another run or thread.
        MissingBlobsError: it names a blob that is not stored.
    """
    h = record.header
    found = conn.execute(
        "SELECT run_id, thread_id FROM checkpoints WHERE checkpoint_id = %s", (h.checkpoint_id,)
    ).fetchone()
    if found is None:
        raise NotFoundError("checkpoint", h.checkpoint_id)
    record = _common.rewritten_record((found[0], found[1]), record)
    params = checkpoint_params(record)
    # checkpoint_params' order is the INSERT's: the id and owners go last here.
    conn.execute(REPLACE_CHECKPOINT, (*params[3:], h.checkpoint_id, h.run_id, h.thread_id))
    conn.execute("DELETE FROM checkpoint_blobs WHERE checkpoint_id = %s", (h.checkpoint_id,))
    if h.blobs:
        # As in insert_checkpoint: the references first, then the check, so a blob
        # found present cannot be collected under this record.
        conn.execute(INSERT_REFS, (h.checkpoint_id, list(h.blobs)))
        missing = conn.execute(MISSING_BLOBS, (list(_common.unique(h.blobs)),)).fetchall()
        if missing:
            raise _common.missing_blob_error(h.checkpoint_id, [row[0] for row in missing])


# -- parameters ------------------------------------------------------------------
def checkpoint_params(record: CheckpointRecord) -> tuple[Any, ...]:
    """INSERT_CHECKPOINT's parameters; raises SerializationError or ValueError for bad input."""
    h = record.header
    return (
        h.thread_id, h.run_id, h.checkpoint_id, h.parent_id, h.step, h.node,
        RunStatus(h.status).value, h.next,
        _common.json_dumps(h.usage.to_dict(), "usage").decode(),
        _common.json_dumps(dict(h.metadata), "metadata").decode(),
        _common.to_micros(h.created_at),
        None if h.expires_at is None else _common.to_micros(h.expires_at),
        h.format_version, h.state_version, h.size, h.base_id, list(_common.header_blobs(h)),
        record.checksum, bytes(record.payload),
    )  # fmt: skip


def effect_params(e: EffectRecord) -> tuple[Any, ...]:
    """UPSERT_EFFECT's parameters, for an entry from :func:`_common.detached_effect`."""
    return (
        e.run_id, e.request_id, EffectKind(e.kind).value, e.name, e.step, e.node, e.call_index,
        EffectStatus(e.status).value, e.arguments, e.result, e.error,
        _common.json_dumps(dict(e.metadata), "effect.metadata").decode(),
        _common.to_micros(e.created_at),
        None if e.completed_at is None else _common.to_micros(e.completed_at),
        e.checksum,
    )  # fmt: skip


def metadata_filter(wanted: Mapping[str, _common.Scalar]) -> tuple[str, list[Any]] | None:
    """A WHERE condition (on alias ``c``) that narrows a history to a metadata filter.

    A prefilter, not the rule: the caller keeps only rows that pass
    :func:`_common.matches`, so every backend agrees on JSON types (``True``
    never matches ``1``, ``None`` matches a present null). A row whose JSON
    holds ``\\u0000`` passes unchecked, because PostgreSQL's JSON operators
    refuse to de-escape it; CASE fixes the evaluation order, so neither that
    row nor a value of another JSON type ever reaches an operator or cast.

    Returns:
        The condition and its parameters ("true" for no filter), or None when
        no row can match.
    """
    where: list[str] = []
    params: list[Any] = []
    for key, value in wanted.items():
        kind = "json_typeof(c.metadata -> %s::text)"
        if value is None:
            where.append(f"{kind} = 'null'")
            params.append(key)
        elif isinstance(value, bool):
            where.append(f"{kind} = 'boolean' AND (c.metadata ->> %s::text) = %s::text")
            params.extend((key, key, "true" if value else "false"))
        elif isinstance(value, (int, float)):
            if isinstance(value, float) and not math.isfinite(value):
                return None  # stored JSON holds no NaN or infinity
            # numeric compares integers exactly; float8 reads the stored shortest repr exactly.
            cast = "numeric" if isinstance(value, int) else "float8"
            where.append(
                f"CASE WHEN {kind} = 'number'"
                f" THEN (c.metadata ->> %s::text)::{cast} = %s::{cast} ELSE false END"
            )
            params.extend((key, key, value))
        else:
            where.append(f"{kind} = 'string' AND (c.metadata ->> %s::text) = %s::text")
            params.extend((key, key, value))
    if not where:
        return "true", []
    guard = r"strpos(c.metadata::text, '\u0000') > 0"
    return f"CASE WHEN {guard} THEN true ELSE ({' AND '.join(where)}) END", params


def effects_query(
    run_id: str | None,
    kinds: Sequence[EffectKind] | None,
    statuses: Sequence[EffectStatus] | None,
    limit: int,
) -> tuple[str, tuple[Any, ...]]:
    """The SELECT behind ``list_effects``; an empty ``kinds`` or ``statuses`` matches nothing."""
    where: list[str] = ["true"]
    params: list[Any] = []
    if run_id is not None:
        where.append("run_id = %s")
        params.append(run_id)
    if kinds is not None:
        where.append("kind = ANY(%s::text[])")
        params.append([EffectKind(k).value for k in kinds])
    if statuses is not None:
        where.append("status = ANY(%s::text[])")
        params.append([EffectStatus(s).value for s in statuses])
    sql = (
        f"SELECT {EFFECT_COLS} FROM effects WHERE {' AND '.join(where)}"
        " ORDER BY created_at, request_id LIMIT %s"
    )
    return sql, (*params, max(limit, 0))


# -- rows --------------------------------------------------------------------------
def _parsed(value: Any) -> Any:
    """psycopg has already parsed json columns."""
    return value


# Rows decode as in every SQL backend (sql_rows); only JSON columns differ here.
def header(row: Sequence[Any]) -> CheckpointHeader:
    return rows.header(row, _parsed)


def record(row: Sequence[Any]) -> CheckpointRecord:
    return rows.record(row, _parsed)


def run_info(row: Sequence[Any]) -> RunInfo:
    return rows.run_info(row, _parsed)


def effect(row: Sequence[Any]) -> EffectRecord:
    return rows.effect(row, _parsed)
