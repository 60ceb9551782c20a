"""The default store: one SQLite file, safe for several processes on one machine.

Durability and concurrency come from SQLite itself: WAL mode, ``synchronous=FULL``
by default (a committed checkpoint survives a power loss; ``?synchronous=normal``
trades the last commits on power loss for speed), and every write in a
``BEGIN IMMEDIATE`` transaction so the fencing check and the write it guards
happen under one write lock, across processes as well as threads.

URLs: ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``, each with
an optional ``?synchronous=normal``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from savegame.errors import (
    ConfigurationError,
    ConflictError,
    LeaseHeldError,
    LeaseLostError,
    NotFoundError,
)
from savegame.model import (
    CheckpointHeader,
    CheckpointRecord,
    Lease,
    RunInfo,
    RunStatus,
    Usage,
    utcnow,
)
from savegame.stores import _common, sqlite_schema
from savegame.stores.base import Capabilities, StoreStats, ThreadInfo

_CAPABILITIES = Capabilities(persistent=True, multi_process=True)
_SYNCHRONOUS = ("full", "normal")
_BUSY_TIMEOUT_S = 30.0

_HEADER_COLS = (
    "thread_id, run_id, checkpoint_id, parent_id, step, node, status, next, usage, metadata,"
    " created_at, expires_at, format_version, state_version, size"
)
_RECORD_COLS = _HEADER_COLS + ", checksum, payload"
_RUN_COLS = (
    "run_id, thread_id, workflow, workflow_ref, status, step, head_checkpoint_id, created_at,"
    " updated_at, error, metadata, lease_owner, lease_token, lease_expires_at"
)


def parse_url(url: str) -> tuple[str, str]:
    """Split a ``sqlite://`` URL into (path, synchronous).

    Raises:
        ConfigurationError: the URL is not of a form described in the module docstring.
    """
    parts = urlsplit(url)
    usage = "expected sqlite:///relative/path.db or sqlite:////absolute/path.db"
    if parts.scheme != "sqlite" or parts.netloc or not parts.path.startswith("/"):
        raise ConfigurationError(f"bad SQLite store URL {url!r}: {usage}")
    path = parts.path[1:]
    if not path or path.endswith("/"):
        raise ConfigurationError(f"bad SQLite store URL {url!r}: no file name; {usage}")
    synchronous = "full"
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key != "synchronous" or value.lower() not in _SYNCHRONOUS:
            raise ConfigurationError(
                f"bad SQLite store URL {url!r}: unknown option {key}={value}; "
                "the only option is synchronous=full|normal"
            )
        synchronous = value.lower()
    return path, synchronous


class SqliteStore:
    """A store in one SQLite file.

    One connection serves the whole process, guarded by a lock, because the
    runtime calls the store from its heartbeat and writer threads as well.

    Args:
        path: the database file; missing parent directories are created.
        synchronous: ``"full"`` (default, durable on power loss) or ``"normal"``.

    Raises:
        ConfigurationError: a bad ``synchronous`` value, or a file written by a newer savegame.
    """

    def __init__(self, path: str | os.PathLike[str], *, synchronous: str = "full") -> None:
        if synchronous not in _SYNCHRONOUS:
            raise ConfigurationError(f"synchronous must be 'full' or 'normal', not {synchronous!r}")
        self._path = os.fspath(path)
        self._synchronous = synchronous
        self._lock = threading.Lock()
        Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: the sqlite3 module must not open transactions
        # behind our back; every write says BEGIN IMMEDIATE itself.
        self._conn = sqlite3.connect(
            self._path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            self._conn.execute("PRAGMA foreign_keys = ON")
            sqlite_schema.migrate(self._conn, self._path)
        except BaseException:
            self._conn.close()
            raise

    @classmethod
    def from_url(cls, url: str) -> SqliteStore:
        """Open the store a ``sqlite://`` URL names (see :func:`parse_url`)."""
        path, synchronous = parse_url(url)
        return cls(path, synchronous=synchronous)

    @property
    def url(self) -> str:
        query = "" if self._synchronous == "full" else f"?synchronous={self._synchronous}"
        return f"sqlite:///{self._path}{query}"

    @property
    def path(self) -> str:
        return self._path

    @property
    def capabilities(self) -> Capabilities:
        return _CAPABILITIES

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

    # -- runs -------------------------------------------------------------------
    def create_run(self, run: RunInfo, first: CheckpointRecord, *, owner: str, ttl: float) -> Lease:
        _common.check_first(run.run_id, run.thread_id, first.run_id, first.header.thread_id)
        ttl = _common.check_ttl(ttl)
        meta = _common.json_dumps(dict(run.metadata), "run.metadata").decode()
        header = first.header
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run.run_id,)).fetchone():
                raise ConflictError(f"run {run.run_id} exists already")
            lease = Lease(run.run_id, owner, 1, time.time() + ttl)
            conn.execute(
                f"INSERT INTO runs ({_RUN_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run.run_id, run.thread_id, run.workflow, run.workflow_ref, header.status.value,
                    header.step, first.checkpoint_id, _common.to_micros(run.created_at),
                    _common.to_micros(run.updated_at), run.error, meta, owner, 1, lease.expires_at,
                ),
            )  # fmt: skip
            _insert_checkpoint(conn, first)
        return lease

    def get_run(self, run_id: str) -> RunInfo:
        rows = self._read(f"SELECT {_RUN_COLS} FROM runs WHERE run_id = ?", (run_id,))
        if not rows:
            raise NotFoundError("run", run_id)
        return _run_info(rows[0])

    def list_runs(
        self,
        *,
        thread_id: str | None = None,
        status: RunStatus | None = None,
        limit: int = 100,
    ) -> list[RunInfo]:
        where: list[str] = ["1"]
        params: list[Any] = []
        if thread_id is not None:
            where.append("thread_id = ?")
            params.append(thread_id)
        if status is not None:
            where.append("status = ?")
            params.append(RunStatus(status).value)
        sql = f"SELECT {_RUN_COLS} FROM runs WHERE {' AND '.join(where)}"
        rows = self._read(sql + " ORDER BY created_at DESC, run_id DESC LIMIT ?", (*params, limit))
        return [_run_info(row) for row in rows]

    def list_threads(self, *, limit: int = 100) -> list[ThreadInfo]:
        # latest_run_id: the most recently created run of the thread (ties by id).
        rows = self._read(
            """
            SELECT thread_id, count(*), max(updated_at),
                   (SELECT r2.run_id FROM runs r2 WHERE r2.thread_id = r.thread_id
                    ORDER BY r2.created_at DESC, r2.run_id DESC LIMIT 1)
            FROM runs r GROUP BY thread_id
            ORDER BY max(updated_at) DESC, thread_id DESC LIMIT ?
            """,
            (limit,),
        )
        return [ThreadInfo(tid, n, latest, updated / 1e6) for tid, n, updated, latest in rows]

    # -- checkpoints --------------------------------------------------------------
    def put_checkpoint(
        self, record: CheckpointRecord, *, lease_token: int, error: str | None = None
    ) -> None:
        header = record.header
        with self._write() as conn:
            row = conn.execute(
                "SELECT lease_token FROM runs WHERE run_id = ?", (header.run_id,)
            ).fetchone()
            if row is None:
                raise NotFoundError("run", header.run_id)
            # Fencing: equality only. Expiry is for acquirers to judge; a writer
            # whose lease lapsed but was not taken over still owns the run.
            if row[0] != lease_token:
                raise LeaseLostError(header.run_id, lease_token)
            _insert_checkpoint(conn, record)
            conn.execute(
                "UPDATE runs SET head_checkpoint_id = ?, status = ?, step = ?, error = ?, updated_at = ?"
                " WHERE run_id = ?",
                (
                    header.checkpoint_id,
                    header.status.value,
                    header.step,
                    error,
                    _common.to_micros(utcnow()),
                    header.run_id,
                ),
            )

    def get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord:
        rows = self._read(
            f"SELECT {_RECORD_COLS} FROM checkpoints WHERE checkpoint_id = ?", (checkpoint_id,)
        )
        if not rows:
            raise NotFoundError("checkpoint", checkpoint_id)
        return _record(rows[0])

    def latest_checkpoint(self, run_id: str) -> CheckpointRecord:
        rows = self._read(
            f"SELECT {_RECORD_COLS} FROM checkpoints"
            " WHERE checkpoint_id = (SELECT head_checkpoint_id FROM runs WHERE run_id = ?)",
            (run_id,),
        )
        if not rows:
            raise NotFoundError("run", run_id)
        return _record(rows[0])

    def thread_head(self, thread_id: str) -> CheckpointRecord | None:
        rows = self._read(
            f"SELECT {_RECORD_COLS} FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_id DESC LIMIT 1",
            (thread_id,),
        )
        return _record(rows[0]) if rows else None

    def list_checkpoints(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        before: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[CheckpointHeader]:
        """A run's history, newest first, without payloads.

        The metadata filter compares top-level keys with JSON types kept apart
        (``True`` does not match ``1``; ``None`` matches a present JSON null),
        exactly as :class:`~savegame.stores.memory.MemoryStore` does.
        """
        where: list[str] = ["c.run_id = ?"]
        params: list[Any] = [run_id]
        if before is not None:
            where.append("c.checkpoint_id < ?")
            params.append(before)
        for key, value in _common.check_filter(metadata).items():
            where.append(
                f"EXISTS (SELECT 1 FROM json_each(c.metadata) WHERE key = ? AND {_type_test(value)})"
            )
            params.append(key)
            if value is not None and not isinstance(value, bool):
                params.append(value)
        sql = f"SELECT {_HEADER_COLS} FROM checkpoints c WHERE {' AND '.join(where)} ORDER BY c.checkpoint_id DESC"
        rows = self._read(sql + " LIMIT ?", (*params, -1 if limit is None else limit))
        if not rows and not self._read("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)):
            raise NotFoundError("run", run_id)
        return [_header(row) for row in rows]

    # -- leases ---------------------------------------------------------------------
    def acquire_lease(
        self, run_id: str, owner: str, ttl: float, *, takeover_token: int | None = None
    ) -> Lease:
        ttl = _common.check_ttl(ttl)
        with self._write() as conn:
            holder, token, expires_at = self._lease_row(conn, run_id)
            now = time.time()
            if (
                holder is not None
                and expires_at is not None
                and expires_at > now
                and takeover_token != token
            ):
                raise LeaseHeldError(run_id, holder, expires_at - now)
            lease = Lease(run_id, owner, token + 1, now + ttl)
            conn.execute(
                "UPDATE runs SET lease_owner = ?, lease_token = ?, lease_expires_at = ? WHERE run_id = ?",
                (owner, lease.token, lease.expires_at, run_id),
            )
        return lease

    def renew_lease(self, run_id: str, token: int, ttl: float) -> Lease:
        ttl = _common.check_ttl(ttl)
        with self._write() as conn:
            holder, current, _ = self._lease_row(conn, run_id)
            if holder is None or current != token:
                raise LeaseLostError(run_id, token)
            lease = Lease(run_id, holder, token, time.time() + ttl)
            conn.execute(
                "UPDATE runs SET lease_expires_at = ? WHERE run_id = ?", (lease.expires_at, run_id)
            )
        return lease

    def release_lease(self, run_id: str, token: int) -> None:
        with self._write() as conn:
            self._lease_row(conn, run_id)
            # lease_token stays: the next acquisition must still get a larger one.
            conn.execute(
                "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL WHERE run_id = ? AND lease_token = ?",
                (run_id, token),
            )

    @staticmethod
    def _lease_row(conn: sqlite3.Connection, run_id: str) -> tuple[str | None, int, float | None]:
        row = conn.execute(
            "SELECT lease_owner, lease_token, lease_expires_at FROM runs WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        if row is None:
            raise NotFoundError("run", run_id)
        return row[0], int(row[1]), row[2]

    # -- housekeeping -------------------------------------------------------------------
    def delete_thread(self, thread_id: str) -> int:
        with self._write() as conn:
            deleted = conn.execute(
                "DELETE FROM checkpoints WHERE run_id IN (SELECT run_id FROM runs WHERE thread_id = ?)",
                (thread_id,),
            ).rowcount
            conn.execute("DELETE FROM runs WHERE thread_id = ?", (thread_id,))
        return int(deleted)

    def stats(self) -> StoreStats:
        (runs,) = self._read("SELECT count(*) FROM runs")[0]
        checkpoints, payload = self._read(
            "SELECT count(*), coalesce(sum(length(payload)), 0) FROM checkpoints"
        )[0]
        file_bytes = 0
        for suffix in ("", "-wal"):
            # No WAL file exists after the last connection closed and checkpointed it.
            with suppress(OSError):
                file_bytes += os.path.getsize(self._path + suffix)
        return StoreStats(int(runs), int(checkpoints), int(payload), file_bytes)

    def close(self) -> None:
        """Close the connection; later calls raise ``sqlite3.ProgrammingError``."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteStore({self.url!r})"


def _type_test(value: _common.Scalar) -> str:
    """The json_each condition for one filter value; see MemoryStore for the same rules."""
    if value is None:
        return "type = 'null'"
    if isinstance(value, bool):
        return "type = 'true'" if value else "type = 'false'"
    if isinstance(value, (int, float)):
        return "type IN ('integer', 'real') AND value = ?"
    return "type = 'text' AND value = ?"


def _insert_checkpoint(conn: sqlite3.Connection, record: CheckpointRecord) -> None:
    h = record.header
    if conn.execute(
        "SELECT 1 FROM checkpoints WHERE checkpoint_id = ?", (h.checkpoint_id,)
    ).fetchone():
        raise ConflictError(f"checkpoint {h.checkpoint_id} exists already")
    conn.execute(
        f"INSERT INTO checkpoints ({_RECORD_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            h.thread_id, h.run_id, h.checkpoint_id, h.parent_id, h.step, h.node, h.status.value, h.next,
            _common.json_dumps(h.usage.to_dict(), "usage").decode(),
            _common.json_dumps(dict(h.metadata), "metadata").decode(),
            _common.to_micros(h.created_at),
            None if h.expires_at is None else _common.to_micros(h.expires_at),
            h.format_version, h.state_version, h.size, record.checksum, record.payload,
        ),
    )  # fmt: skip


def _header(row: tuple[Any, ...]) -> CheckpointHeader:
    return CheckpointHeader(
        thread_id=row[0],
        run_id=row[1],
        checkpoint_id=row[2],
        parent_id=row[3],
        step=row[4],
        node=row[5],
        status=RunStatus(row[6]),
        next=row[7],
        usage=Usage.from_dict(_common.json_loads(row[8])),
        metadata=_common.json_loads(row[9]),
        created_at=_common.from_micros(row[10]),
        expires_at=None if row[11] is None else _common.from_micros(row[11]),
        format_version=row[12],
        state_version=row[13],
        size=row[14],
    )


def _record(row: tuple[Any, ...]) -> CheckpointRecord:
    return CheckpointRecord(header=_header(row), checksum=row[15], payload=bytes(row[16]))


def _run_info(row: tuple[Any, ...]) -> RunInfo:
    owner, token, expires_at = row[11], row[12], row[13]
    return RunInfo(
        run_id=row[0],
        thread_id=row[1],
        workflow=row[2],
        workflow_ref=row[3],
        status=RunStatus(row[4]),
        step=row[5],
        head_checkpoint_id=row[6],
        created_at=_common.from_micros(row[7]),
        updated_at=_common.from_micros(row[8]),
        error=row[9],
        lease=None if owner is None else Lease(row[0], owner, token, expires_at),
        metadata=_common.json_loads(row[10]),
    )
