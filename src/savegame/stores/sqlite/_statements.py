"""Rows of the SQLite schema <-> model records, and the journal's SQL.

Kept apart from :mod:`savegame.stores.sqlite` so the store reads as the
transactions it runs, and the column lists and their order live in one place:
a row converter and the SELECT that feeds it must agree column for column.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from savegame.errors import ConflictError, NotFoundError
from savegame.model import (
    CheckpointHeader,
    CheckpointRecord,
    EffectKind,
    EffectRecord,
    EffectStatus,
    RunInfo,
)
from savegame.stores import _common
from savegame.stores._sql import rows

# The column order is shared with the other SQL backend: see sql_rows.
HEADER_COLS, RECORD_COLS = rows.HEADER_COLS, rows.RECORD_COLS
RUN_COLS, EFFECT_COLS = rows.RUN_COLS, rows.EFFECT_COLS
# The oldest runnable run: queued or running, with no owner or an expired lease
# (expired exactly when acquire_lease would take it over), optionally of some
# workflows (?2: a JSON array, or NULL for any). The status test repeats the
# partial index's WHERE word for word, so runs_claimable applies; INDEXED BY
# because without table statistics SQLite prefers runs_by_status and sorts
# every queued and running run, where the partial index walks them oldest
# first and stops at the first runnable one.
CLAIM = f"""
    SELECT run_id, lease_token FROM runs INDEXED BY runs_claimable
    WHERE status IN ({", ".join(f"'{s}'" for s in _common.CLAIMABLE)})
      AND (lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= ?1)
      AND (?2 IS NULL OR workflow IN (SELECT value FROM json_each(?2)))
    ORDER BY created_at, run_id LIMIT 1
"""


def type_test(value: _common.Scalar) -> str:
    """The json_each condition for one metadata filter value; see MemoryStore for the same rules."""
    if value is None:
        return "type = 'null'"
    if isinstance(value, bool):
        return "type = 'true'" if value else "type = 'false'"
    if isinstance(value, (int, float)):
        return "type IN ('integer', 'real') AND value = ?"
    return "type = 'text' AND value = ?"


# -- checkpoints and runs -----------------------------------------------------------
def insert_checkpoint(
    conn: sqlite3.Connection, record: CheckpointRecord, blobs: Mapping[str, bytes]
) -> None:
    """Insert a record with the blobs it brings; call inside a write transaction.

    The write lock keeps ``delete_unreferenced_blobs`` out until commit, so a
    blob found stored here stays stored.

    Raises:
        ConflictError: the id is taken, or the record names a blob neither in
            ``blobs`` nor stored (nothing is written).
    """
    h = record.header
    if conn.execute(
        "SELECT 1 FROM checkpoints WHERE checkpoint_id = ?", (h.checkpoint_id,)
    ).fetchone():
        raise ConflictError(f"checkpoint {h.checkpoint_id} exists already")
    wanted = _common.blobs_to_check(h, blobs)
    if wanted:
        missing = conn.execute(
            "SELECT value FROM json_each(?) WHERE NOT EXISTS (SELECT 1 FROM blobs WHERE digest = value)",
            (_common.json_dumps(wanted, "blobs").decode(),),
        ).fetchall()
        if missing:
            raise _common.missing_blob_error(h.checkpoint_id, [row[0] for row in missing])
    # Insert-if-absent: a digest names its content, so stored bytes never change.
    if blobs:
        conn.executemany(
            "INSERT OR IGNORE INTO blobs (digest, data, size) VALUES (?, ?, ?)",
            [(digest, data, len(data)) for digest, data in blobs.items()],
        )
    names = _common.header_blobs(h)
    digests = _common.json_dumps(list(names), "blobs").decode()
    conn.execute(
        f"INSERT INTO checkpoints ({RECORD_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            h.thread_id, h.run_id, h.checkpoint_id, h.parent_id, h.step, h.node, h.status.value, h.next,
            _common.json_dumps(h.usage.to_dict(), "usage").decode(),
            _common.json_dumps(dict(h.metadata), "metadata").decode(),
            _common.to_micros(h.created_at),
            None if h.expires_at is None else _common.to_micros(h.expires_at),
            h.format_version, h.state_version, h.size, h.base_id, digests,
            record.checksum, record.payload,
        ),
    )  # fmt: skip
    # The header may name a digest twice; the reference table holds the set.
    # Most records (deltas) name none: a statement spared on every step.
    if names:
        conn.execute(
            "INSERT OR IGNORE INTO checkpoint_blobs (checkpoint_id, digest)"
            " SELECT ?, value FROM json_each(?)",
            (h.checkpoint_id, digests),
        )


def replace_checkpoint(conn: sqlite3.Connection, record: CheckpointRecord) -> None:
    """``rewrite``'s part for one record: the stored checkpoint of its id replaced whole,
    its blob references with it; call inside a write transaction, blobs already stored.

    Raises:
        NotFoundError: no checkpoint has that id.
        ValueError: the record names another run or thread.
        MissingBlobsError: it names a blob that is not stored.
    """
    h = record.header
    row = conn.execute(
        "SELECT run_id, thread_id FROM checkpoints WHERE checkpoint_id = ?", (h.checkpoint_id,)
    ).fetchone()
    if row is None:
        raise NotFoundError("checkpoint", h.checkpoint_id)
    record = _common.rewritten_record((row[0], row[1]), record)
    names = _common.header_blobs(h)
    digests = _common.json_dumps(list(names), "blobs").decode()
    if names:
        missing = conn.execute(
            "SELECT value FROM json_each(?) WHERE NOT EXISTS (SELECT 1 FROM blobs WHERE digest = value)",
            (digests,),
        ).fetchall()
        if missing:
            raise _common.missing_blob_error(h.checkpoint_id, [m[0] for m in missing])
    conn.execute(
        "UPDATE checkpoints SET parent_id = ?, step = ?, node = ?, status = ?, next = ?, usage = ?,"
        " metadata = ?, created_at = ?, expires_at = ?, format_version = ?, state_version = ?,"
        " size = ?, base_id = ?, blobs = ?, checksum = ?, payload = ? WHERE checkpoint_id = ?",
        (
            h.parent_id, h.step, h.node, h.status.value, h.next,
            _common.json_dumps(h.usage.to_dict(), "usage").decode(),
            _common.json_dumps(dict(h.metadata), "metadata").decode(),
            _common.to_micros(h.created_at),
            None if h.expires_at is None else _common.to_micros(h.expires_at),
            h.format_version, h.state_version, h.size, h.base_id, digests,
            record.checksum, bytes(record.payload), h.checkpoint_id,
        ),
    )  # fmt: skip
    conn.execute("DELETE FROM checkpoint_blobs WHERE checkpoint_id = ?", (h.checkpoint_id,))
    if names:
        conn.execute(
            "INSERT OR IGNORE INTO checkpoint_blobs (checkpoint_id, digest)"
            " SELECT ?, value FROM json_each(?)",
            (h.checkpoint_id, digests),
        )


# Rows decode as in every SQL backend (sql_rows); only JSON columns differ here.
def header(row: tuple[Any, ...]) -> CheckpointHeader:
    return rows.header(row, _common.json_loads)


def record(row: tuple[Any, ...]) -> CheckpointRecord:
    return rows.record(row, _common.json_loads)


def run_info(row: tuple[Any, ...]) -> RunInfo:
    return rows.run_info(row, _common.json_loads)


def effect(row: tuple[Any, ...]) -> EffectRecord:
    return rows.effect(row, _common.json_loads)


# -- journal ------------------------------------------------------------------------


def select_effect(conn: sqlite3.Connection, run_id: str, request_id: str) -> EffectRecord | None:
    row = conn.execute(
        f"SELECT {EFFECT_COLS} FROM effects WHERE run_id = ? AND request_id = ?",
        (run_id, request_id),
    ).fetchone()
    return None if row is None else effect(row)


def write_effect(conn: sqlite3.Connection, e: EffectRecord) -> None:
    """Insert or overwrite the entry; the caller decides (inside its transaction) that it may."""
    conn.execute(
        f"INSERT OR REPLACE INTO effects ({EFFECT_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            e.run_id, e.request_id, EffectKind(e.kind).value, e.name, e.step, e.node, e.call_index,
            EffectStatus(e.status).value, e.arguments, e.result, e.error,
            _common.json_dumps(dict(e.metadata), "effect.metadata").decode(),
            _common.to_micros(e.created_at),
            None if e.completed_at is None else _common.to_micros(e.completed_at),
            e.checksum,
        ),
    )  # fmt: skip


def journal(conn: sqlite3.Connection, entry: EffectRecord) -> EffectRecord:
    """Insert-if-absent (see :func:`_common.keeps`); return what the journal holds afterwards.

    ``entry`` must come from :func:`_common.detached_effect`. Call inside a write
    transaction, so the read and the write it decides see the same row.
    """
    existing = select_effect(conn, entry.run_id, entry.request_id)
    if _common.keeps(existing):
        return existing
    write_effect(conn, entry)
    return entry


def effects_query(
    run_id: str | None,
    kinds: Sequence[EffectKind] | None,
    statuses: Sequence[EffectStatus] | None,
    limit: int,
) -> tuple[str, tuple[Any, ...]]:
    """The SELECT behind ``list_effects``; an empty ``kinds`` or ``statuses`` matches nothing."""
    where: list[str] = ["1"]
    params: list[Any] = []
    if run_id is not None:
        where.append("run_id = ?")
        params.append(run_id)
    if kinds is not None:
        where.append(f"kind IN ({', '.join('?' for _ in kinds)})")
        params.extend(EffectKind(k).value for k in kinds)
    if statuses is not None:
        where.append(f"status IN ({', '.join('?' for _ in statuses)})")
        params.extend(EffectStatus(s).value for s in statuses)
    sql = (
        f"SELECT {EFFECT_COLS} FROM effects WHERE {' AND '.join(where)}"
        " ORDER BY created_at, request_id LIMIT ?"
    )
    return sql, (*params, max(limit, 0))
