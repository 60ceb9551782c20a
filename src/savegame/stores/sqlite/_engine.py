"""The connection discipline and the storage-engine half of the SQLite store.

A base of :class:`savegame.stores.sqlite.SqliteStore`, kept apart so each
module stays readable: how a read and a write transaction are run, then
chains, blobs, pruning, rewrite and sizes. Lists of ids travel as one JSON
array parameter (``json_each``), so a call is one statement however many ids
it names and never meets SQLite's limit on bound parameters.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from savegame.errors import NotFoundError
from savegame.model import CheckpointRecord, EffectRecord, RunInfo, RunStatus
from savegame.stores import _common
from savegame.stores._sql.rows import SqlReads
from savegame.stores.base import RunSize, StoreStats
from savegame.stores.sqlite import _statements as conv

# chain.cid is the id asked for at each depth; a NULL checkpoint row beside it
# is a missing base. The depth bound stops a cycle (damaged data) from looping.
_CHAIN_SQL = f"""
    WITH RECURSIVE chain (depth, cid) AS (
        VALUES (0, ?)
        UNION ALL
        SELECT chain.depth + 1, c.base_id FROM chain JOIN checkpoints c ON c.checkpoint_id = chain.cid
        WHERE c.base_id IS NOT NULL AND chain.depth < {_common.MAX_CHAIN}
    )
    SELECT chain.cid, {conv.RECORD_COLS}
    FROM chain LEFT JOIN checkpoints c ON c.checkpoint_id = chain.cid
    ORDER BY chain.depth
"""

# Correlated subqueries: each is a range scan of the run's index, so a thread
# filter reads only that thread's rows.
_SIZES_SQL = """
    SELECT r.run_id, r.thread_id, r.status,
        (SELECT count(*) FROM checkpoints c WHERE c.run_id = r.run_id),
        (SELECT coalesce(sum(length(c.payload)), 0) FROM checkpoints c WHERE c.run_id = r.run_id)
            AS payload_bytes,
        (SELECT count(*) FROM effects e WHERE e.run_id = r.run_id),
        (SELECT coalesce(sum(length(e.arguments) + coalesce(length(e.result), 0)), 0)
            FROM effects e WHERE e.run_id = r.run_id)
    FROM runs r WHERE ?1 IS NULL OR r.thread_id = ?1
    ORDER BY payload_bytes DESC, r.run_id LIMIT ?2
"""

_UNREFERENCED = "NOT EXISTS (SELECT 1 FROM checkpoint_blobs cb WHERE cb.digest = blobs.digest)"


def _ids(ids: Sequence[str]) -> str:
    """The JSON array parameter ``json_each`` expands."""
    return _common.json_dumps(list(ids), "ids").decode()


class SqliteEngine(SqlReads):
    """Transactions on the store's one connection, and the storage-engine methods."""

    _param = "?"
    _path: str
    _lock: threading.Lock
    _conn: sqlite3.Connection

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def _json(self, value: Any) -> Any:
        return _common.json_loads(value)

    # -- storage engine -------------------------------------------------------------
    def get_chain(self, checkpoint_id: str) -> list[CheckpointRecord]:
        rows = self._read(_CHAIN_SQL, (checkpoint_id,))
        chain: list[CheckpointRecord] = []
        for row in rows:
            if row[1] is None:
                raise NotFoundError("checkpoint", row[0])
            chain.append(conv.record(row[1:]))
        if chain[-1].header.base_id is not None:
            raise _common.chain_too_long(checkpoint_id)
        return chain

    def get_blobs(self, digests: Sequence[str]) -> dict[str, bytes]:
        rows = self._read(
            "SELECT digest, data FROM blobs WHERE digest IN (SELECT value FROM json_each(?))",
            (_ids(digests),),
        )
        return {digest: bytes(data) for digest, data in rows}

    def missing_blobs(self, digests: Sequence[str]) -> set[str]:
        rows = self._read(
            "SELECT value FROM json_each(?)"
            " WHERE NOT EXISTS (SELECT 1 FROM blobs WHERE digest = value)",
            (_ids(digests),),
        )
        return {row[0] for row in rows}

    def delete_checkpoints(self, checkpoint_ids: Sequence[str]) -> int:
        # checkpoint_blobs rows go with them (ON DELETE CASCADE).
        with self._write() as conn:
            deleted = conn.execute(
                "DELETE FROM checkpoints WHERE checkpoint_id IN (SELECT value FROM json_each(?))",
                (_ids(checkpoint_ids),),
            ).rowcount
        return int(deleted)

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        # Checkpoints, their blob references and the journal cascade from the run row.
        with self._write() as conn:
            deleted = conn.execute(
                "DELETE FROM runs WHERE run_id IN (SELECT value FROM json_each(?))",
                (_ids(run_ids),),
            ).rowcount
        return int(deleted)

    def delete_unreferenced_blobs(self) -> tuple[int, int]:
        # Counted and deleted under one write lock, so the two agree
        # (RETURNING would need SQLite 3.35, newer than some supported Pythons ship).
        with self._write() as conn:
            count, freed = conn.execute(
                f"SELECT count(*), coalesce(sum(size), 0) FROM blobs WHERE {_UNREFERENCED}"
            ).fetchone()
            conn.execute(f"DELETE FROM blobs WHERE {_UNREFERENCED}")
        return int(count), int(freed)

    def rewrite(
        self,
        records: Sequence[CheckpointRecord] = (),
        effects: Sequence[EffectRecord] = (),
        blobs: Mapping[str, bytes] | None = None,
        runs: Sequence[RunInfo] = (),
    ) -> None:
        new_blobs = _common.check_blobs(blobs)
        # One transaction: an unknown id rolls every replacement back. Blobs first, so a
        # record rewritten to name a new digest finds it stored.
        with self._write() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO blobs (digest, data, size) VALUES (?, ?, ?)",
                [(digest, data, len(data)) for digest, data in new_blobs.items()],
            )
            for record in records:
                conv.replace_checkpoint(conn, record)
            for effect in effects:
                result = None if effect.result is None else bytes(effect.result)
                meta = _common.json_dumps(dict(effect.metadata), "effect.metadata").decode()
                done = conn.execute(
                    "UPDATE effects SET arguments = ?, result = ?, error = ?, metadata = ?,"
                    " checksum = ? WHERE run_id = ? AND request_id = ?",
                    (bytes(effect.arguments), result, effect.error, meta, effect.checksum,
                     effect.run_id, effect.request_id),
                ).rowcount  # fmt: skip
                if not done:
                    raise NotFoundError("effect", f"{effect.run_id}/{effect.request_id}")
            for run in runs:
                done = conn.execute(
                    "UPDATE runs SET metadata = ?, error = ?, checksum = ? WHERE run_id = ?",
                    (_common.json_dumps(dict(run.metadata), "metadata").decode(), run.error,
                     run.checksum, run.run_id),
                ).rowcount  # fmt: skip
                if not done:
                    raise NotFoundError("run", run.run_id)

    def run_sizes(self, *, thread_id: str | None = None, limit: int = 1000) -> list[RunSize]:
        rows = self._read(_SIZES_SQL, (thread_id, max(limit, 0)))
        return [
            RunSize(run_id, tid, RunStatus(status), n, payload, effects, effect_bytes)
            for run_id, tid, status, n, payload, effects, effect_bytes in rows
        ]

    def stats(self) -> StoreStats:
        with self._lock:
            (runs,) = self._conn.execute("SELECT count(*) FROM runs").fetchone()
            checkpoints, payload = self._conn.execute(
                "SELECT count(*), coalesce(sum(length(payload)), 0) FROM checkpoints"
            ).fetchone()
            blobs, blob_bytes = self._conn.execute(
                "SELECT count(*), coalesce(sum(size), 0) FROM blobs"
            ).fetchone()
            (effects,) = self._conn.execute("SELECT count(*) FROM effects").fetchone()
        file_bytes = 0
        for suffix in ("", "-wal"):
            # No WAL file exists after the last connection closed and checkpointed it.
            with suppress(OSError):
                file_bytes += os.path.getsize(self._path + suffix)
        return StoreStats(
            runs=int(runs),
            checkpoints=int(checkpoints),
            payload_bytes=int(payload),
            file_bytes=file_bytes,
            blobs=int(blobs),
            blob_bytes=int(blob_bytes),
            effects=int(effects),
        )
