"""The SQLite store; the package docstring (:mod:`savegame.stores.sqlite`) describes it."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
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
    EffectKind,
    EffectRecord,
    EffectStatus,
    Lease,
    RunInfo,
    RunStatus,
    utcnow,
)
from savegame.stores import _common
from savegame.stores.base import Capabilities, ThreadInfo, Written
from savegame.stores.sqlite import _schema as sqlite_schema
from savegame.stores.sqlite import _statements as conv
from savegame.stores.sqlite._engine import SqliteEngine

_CAPABILITIES = Capabilities(persistent=True, multi_process=True)
_SYNCHRONOUS = ("full", "normal")
_BUSY_TIMEOUT_S = 30.0


def parse_url(url: str) -> tuple[str, str]:
    """Split a ``sqlite://`` URL into (path, synchronous).

    Raises:
        ConfigurationError: the URL is not of a form described in :mod:`savegame.stores.sqlite`.
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


class SqliteStore(SqliteEngine):
    """A store in one SQLite file.

    Transactions and the storage-engine methods (chains, blobs, pruning,
    rewrite, sizes, stats) come from :class:`~savegame.stores.sqlite._engine.SqliteEngine`.

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
            sqlite_schema.enable_wal(self._conn, _BUSY_TIMEOUT_S)
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

    # -- runs -------------------------------------------------------------------
    def create_run(
        self,
        run: RunInfo,
        first: CheckpointRecord,
        *,
        owner: str | None,
        ttl: float,
        blobs: Mapping[str, bytes] | None = None,
    ) -> Lease:
        _common.check_first(run.run_id, run.thread_id, first.run_id, first.header.thread_id)
        ttl = _common.check_ttl(ttl)
        meta = _common.json_dumps(dict(run.metadata), "run.metadata").decode()
        new_blobs = _common.check_blobs(blobs)
        header = first.header
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run.run_id,)).fetchone():
                raise ConflictError(f"run {run.run_id} exists already")
            now = time.time()
            expires = None if owner is None else now + ttl
            conn.execute(
                f"INSERT INTO runs ({conv.RUN_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run.run_id, run.thread_id, run.workflow, run.workflow_ref, header.status.value,
                    header.step, first.checkpoint_id, _common.to_micros(run.created_at),
                    _common.to_micros(run.updated_at), run.error, meta, owner, 1, expires,
                    int(run.cancel_requested), run.checksum,
                ),
            )  # fmt: skip
            conv.insert_checkpoint(conn, first, new_blobs)
        # Unowned: a lease nobody holds, expired from the start.
        return Lease(run.run_id, owner or "", 1, now if expires is None else expires)

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
        sql = f"SELECT {conv.RUN_COLS} FROM runs WHERE {' AND '.join(where)}"
        rows = self._read(sql + " ORDER BY created_at DESC, run_id DESC LIMIT ?", (*params, limit))
        return [conv.run_info(row) for row in rows]

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
        self,
        record: CheckpointRecord,
        *,
        lease_token: int,
        error: str | None = None,
        effects: Sequence[EffectRecord] = (),
        blobs: Mapping[str, bytes] | None = None,
    ) -> Written:
        header = record.header
        journal = _common.check_effects(header.run_id, effects)
        new_blobs = _common.check_blobs(blobs)
        now = _common.to_micros(utcnow())
        with self._write() as conn:
            # The usual step keeps the lease and the status: one UPDATE both fences and
            # moves the head, and leaving status out of SET spares the two status indexes
            # a rewrite (fewer pages to fsync). Anything else takes the long way. A later
            # failure rolls the whole transaction back, so the order inside does not matter.
            moved = conn.execute(
                "UPDATE runs SET head_checkpoint_id = ?1, step = ?2, error = ?3, updated_at = ?4"
                " WHERE run_id = ?5 AND (?6 IS NULL OR lease_token = ?6) AND status = ?7",
                (
                    header.checkpoint_id, header.step, error, now, header.run_id,
                    lease_token, header.status.value,
                ),
            ).rowcount  # fmt: skip
            if not moved:
                self._fence(conn, header.run_id, lease_token)
                conn.execute(
                    "UPDATE runs SET head_checkpoint_id = ?, status = ?, step = ?, error = ?,"
                    " updated_at = ? WHERE run_id = ?",
                    (
                        header.checkpoint_id,
                        header.status.value,
                        header.step,
                        error,
                        now,
                        header.run_id,
                    ),
                )
            conv.insert_checkpoint(conn, record, new_blobs)
            # In the checkpoint's transaction: the entries land with it or not at all.
            for effect in journal:
                conv.journal(conn, effect)
            # A plain read (not UPDATE ... RETURNING, which needs SQLite 3.35).
            (cancel,) = conn.execute(
                "SELECT cancel_requested FROM runs WHERE run_id = ?", (header.run_id,)
            ).fetchone()
        return Written(bool(cancel))

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
                f"EXISTS (SELECT 1 FROM json_each(c.metadata) WHERE key = ? AND {conv.type_test(value)})"
            )
            params.append(key)
            if value is not None and not isinstance(value, bool):
                params.append(value)
        sql = f"SELECT {conv.HEADER_COLS} FROM checkpoints c WHERE {' AND '.join(where)} ORDER BY c.checkpoint_id DESC"
        rows = self._read(sql + " LIMIT ?", (*params, -1 if limit is None else limit))
        if not rows and not self._read("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)):
            raise NotFoundError("run", run_id)
        return [conv.header(row) for row in rows]

    @staticmethod
    def _fence(conn: sqlite3.Connection, run_id: str, lease_token: int | None) -> None:
        """Raise NotFoundError for an unknown run, LeaseLostError for a stale token
        (None: unfenced)."""
        row = conn.execute("SELECT lease_token FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise NotFoundError("run", run_id)
        # Fencing: equality only. Expiry is for acquirers to judge; a writer
        # whose lease lapsed but was not taken over still owns the run.
        if lease_token is not None and row[0] != lease_token:
            raise LeaseLostError(run_id, lease_token)

    # -- leases ---------------------------------------------------------------------
    def claim_run(
        self, owner: str, ttl: float, *, workflows: Sequence[str] | None = None
    ) -> Lease | None:
        ttl = _common.check_ttl(ttl)
        wanted = _common.check_workflows(workflows)
        # BEGIN IMMEDIATE: the pick and the take happen under one write lock,
        # so claimers in other threads and processes never take the same run.
        with self._write() as conn:
            now = time.time()
            names = None if wanted is None else _common.json_dumps(wanted, "workflows").decode()
            row = conn.execute(conv.CLAIM, (now, names)).fetchone()
            if row is None:
                return None
            lease = Lease(row[0], owner, int(row[1]) + 1, now + ttl)
            conn.execute(
                "UPDATE runs SET lease_owner = ?, lease_token = ?, lease_expires_at = ? WHERE run_id = ?",
                (owner, lease.token, lease.expires_at, lease.run_id),
            )
        return lease

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

    # -- journal --------------------------------------------------------------------------
    def record_intent(self, effect: EffectRecord, *, lease_token: int) -> EffectRecord:
        effect = _common.detached_effect(effect)
        with self._write() as conn:
            self._fence(conn, effect.run_id, lease_token)
            return conv.journal(conn, effect)

    def record_result(
        self,
        run_id: str,
        request_id: str,
        *,
        status: EffectStatus,
        result: bytes | None = None,
        error: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        checksum: str,
        lease_token: int | None,
        expect: EffectStatus | None = None,
    ) -> EffectRecord:
        with self._write() as conn:
            self._fence(conn, run_id, lease_token)
            current = conv.select_effect(conn, run_id, request_id)
            if current is None:
                raise NotFoundError("effect", f"{run_id}/{request_id}")
            settled = _common.settled(
                current,
                status=status,
                result=result,
                error=error,
                metadata=metadata,
                checksum=checksum,
                expect=expect,
            )
            conv.write_effect(conn, settled)
        return settled

    def get_effect(self, run_id: str, request_id: str) -> EffectRecord:
        with self._lock:
            found = conv.select_effect(self._conn, run_id, request_id)
        if found is None:
            raise NotFoundError("effect", f"{run_id}/{request_id}")
        return found

    def list_effects(
        self,
        run_id: str | None = None,
        *,
        kinds: Sequence[EffectKind] | None = None,
        statuses: Sequence[EffectStatus] | None = None,
        limit: int = 10_000,
    ) -> list[EffectRecord]:
        """Journal entries oldest first; see :meth:`savegame.stores.base.Store.list_effects`."""
        sql, params = conv.effects_query(run_id, kinds, statuses, limit)
        return [conv.effect(row) for row in self._read(sql, params)]

    def request_cancel(self, run_id: str) -> None:
        with self._write() as conn:
            self._fence(conn, run_id, None)
            conn.execute("UPDATE runs SET cancel_requested = 1 WHERE run_id = ?", (run_id,))

    # -- housekeeping -------------------------------------------------------------------
    def delete_thread(self, thread_id: str) -> int:
        with self._write() as conn:
            deleted = conn.execute(
                "DELETE FROM checkpoints WHERE run_id IN (SELECT run_id FROM runs WHERE thread_id = ?)",
                (thread_id,),
            ).rowcount
            conn.execute("DELETE FROM runs WHERE thread_id = ?", (thread_id,))
        return int(deleted)

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
