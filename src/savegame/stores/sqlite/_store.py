"""The SQLite store: one file, safe for several processes on one machine.

What it shares with PostgreSQL (the reads, the journal's settlement, chains,
blobs, deletes, ``rewrite``, sizes) is :class:`~savegame.stores._sql.store.SqlStore`'s;
what is here is how SQLite opens, runs a transaction, writes a checkpoint and
judges a lease.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeGuard
from urllib.parse import parse_qsl, urlsplit

from savegame.errors import (
    ConfigurationError,
    ConflictError,
    CorruptRecordError,
    LeaseLostError,
    NotFoundError,
    StoreNotFoundError,
    StoreUnavailableError,
)
from savegame.model import (
    CheckpointHeader,
    CheckpointRecord,
    EffectRecord,
    Lease,
    RunInfo,
)
from savegame.redaction import redact_url
from savegame.stores import _common
from savegame.stores._queues import Enqueue, Queue, QueueStats, check_enqueue
from savegame.stores._sql import rows
from savegame.stores._sql.schedules import SqlSchedules
from savegame.stores._sql.store import SqlStore, checkpoint_values, effect_values, run_values
from savegame.stores.base import Capabilities, Delivery, Put, PutResult
from savegame.stores.sqlite import _queues, _schema
from savegame.stores.sqlite._statements import (
    CANCEL_FLAG,
    CLAIM,
    CLAIM_WOKEN,
    COUNT_UNREFERENCED,
    DELETE_UNREFERENCED,
    INSERT_EFFECT_IF_ABSENT,
    MOVE_HEAD_KEEPING_STATUS,
    SQL,
    type_test,
)

_CAPABILITIES = Capabilities(
    persistent=True,
    multi_process=True,
    waits=True,
    group_commit=True,
    schedules=True,
    queues=True,
)
_SYNCHRONOUS = ("full", "normal")


def _bind_as_is() -> None:
    """Let ``sqlite3`` bind ``bytes`` and ``None`` without its adaptation protocol.

    The module binds only int, float, str and bytearray as they are; every other value,
    ``bytes`` and ``None`` too, goes through its adaptation lookup, whose miss raises
    and clears an ``AttributeError`` with a formatted message (about 1,000 instructions
    a parameter: a LangGraph checkpoint binds five, each pending write three). A
    registered adapter is found first in the module's registry; these give each value
    back unchanged, so the same values are bound. Registered only where the process has
    none of its own for the type (the registry is the module's, shared).
    """
    same_bytes: Any = getattr(bytes, "__bytes__", bytes)  # 3.11's method: no argument parsing
    none: dict[None, None] = {}
    # ``{}.get``: None for None, a C call without a Python frame.
    adapters: tuple[tuple[type[Any], Any], ...] = ((bytes, same_bytes), (type(None), none.get))
    for kind, same in adapters:
        if (kind, sqlite3.PrepareProtocol) not in sqlite3.adapters:
            sqlite3.register_adapter(kind, same)


_bind_as_is()
_BUSY_TIMEOUT_S = 30.0


def parse_url(url: str) -> tuple[str, str]:
    """Split a ``sqlite://`` URL into (path, synchronous).

    Raises:
        ConfigurationError: the URL is not of a form described in :mod:`savegame.stores.sqlite`.
    """
    parts = urlsplit(url)
    usage = "expected sqlite:///relative/path.db or sqlite:////absolute/path.db"
    if parts.scheme != "sqlite" or parts.netloc or not parts.path.startswith("/"):
        raise ConfigurationError(f"bad SQLite store URL {redact_url(url)!r}: {usage}")
    path = parts.path[1:]
    if not path or path.endswith("/"):
        raise ConfigurationError(f"bad SQLite store URL {redact_url(url)!r}: no file name; {usage}")
    synchronous = "full"
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key != "synchronous":
            raise ConfigurationError(
                f"bad SQLite store URL {redact_url(url)!r}: unknown option {key}; "
                "the only option is synchronous=full|normal"
            )
        if value.lower() not in _SYNCHRONOUS:
            # OFF (and the rest) refused on purpose: with OFF an OS crash or a power
            # loss can corrupt the file, not just lose the last commits as NORMAL may.
            raise ConfigurationError(
                f"bad SQLite store URL {redact_url(url)!r}: synchronous={value} is not "
                "allowed; use synchronous=full (the default) or synchronous=normal"
            )
        synchronous = value.lower()
    return path, synchronous


def _undecodable(
    exc: sqlite3.OperationalError, params: Sequence[Any] = ()
) -> CorruptRecordError | None:
    """A text column edited to bytes that are not UTF-8 (sqlite3 cannot even hand the row
    over) is a damaged record, named by the ids the query asked for; None for other errors."""
    if "Could not decode to UTF-8" not in str(exc):
        return None
    named = ", ".join(p for p in params if isinstance(p, str)) or "a row"
    return CorruptRecordError(named, f"a text column does not hold UTF-8 text ({exc})")


def _why(exc: BaseException, path: str) -> str:
    # sqlite3 says "unable to open database file" without the file; OSError names it already.
    return str(exc) if isinstance(exc, OSError) else f"{exc} ({os.path.abspath(path)})"


def _operational(exc: BaseException | None) -> TypeGuard[sqlite3.OperationalError]:
    return isinstance(exc, sqlite3.OperationalError)


class _Transaction:
    """``SqliteStore._tx``: a class, not a ``@contextmanager`` generator, because every
    put goes through it, and the generator's machinery was 6k instructions of a step's
    put (about 225k, callgrind)."""

    __slots__ = ("_conn", "_lock")

    def __init__(self, lock: threading.Lock, conn: sqlite3.Connection) -> None:
        self._lock, self._conn = lock, conn

    def __enter__(self) -> sqlite3.Connection:
        self._lock.acquire()
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._lock.release()
            raise
        return self._conn

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        conn = self._conn
        try:
            if kind is None:
                try:
                    conn.execute("COMMIT")
                    return
                except BaseException as failed:
                    self._rollback()
                    damaged = _undecodable(failed) if _operational(failed) else None
                    if damaged is None:
                        raise
                    raise damaged from failed
            self._rollback()
            damaged = _undecodable(exc) if _operational(exc) else None
            if damaged is not None:
                raise damaged from exc
        finally:
            self._lock.release()

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")


class _Refused(Exception):
    """A put of an optimistic batch was refused: its transaction rolls back whole."""


class SqliteStore(SqlSchedules, SqlStore):
    """A store in one SQLite file.

    One connection serves the whole process, guarded by a lock, because the
    runtime calls the store from its heartbeat and writer threads as well.
    The methods SQLite runs as PostgreSQL does come from
    :class:`~savegame.stores._sql.store.SqlStore`.

    Args:
        path: the database file; missing parent directories are created.
        synchronous: ``"full"`` (default, durable on power loss) or ``"normal"``.
        create: False to refuse a file that does not exist instead of creating it.

    Raises:
        ConfigurationError: a bad ``synchronous`` value, or a file written by a newer savegame.
        StoreNotFoundError: ``create`` is False and there is no file at ``path``.
        StoreUnavailableError: the file cannot be made or opened (a folder it may not
            write in, a file that is not a database).
    """

    # A value SQLite cannot store (a string or blob over its limit): that put's alone.
    _refusals = (*SqlStore._refusals, sqlite3.DataError)

    _sql = SQL

    def __init__(
        self, path: str | os.PathLike[str], *, synchronous: str = "full", create: bool = True
    ) -> None:
        if synchronous not in _SYNCHRONOUS:
            raise ConfigurationError(f"synchronous must be 'full' or 'normal', not {synchronous!r}")
        self._path = os.fspath(path)
        self._synchronous = synchronous
        self._lock = threading.Lock()
        try:
            if create:
                Path(self._path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = self._connect(create)
        except (OSError, sqlite3.DatabaseError) as exc:  # a folder it may not write in
            raise StoreUnavailableError(self.url, _why(exc, self._path)) from exc
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")
            _schema.enable_wal(self._conn, _BUSY_TIMEOUT_S)
            self._conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            self._conn.execute("PRAGMA foreign_keys = ON")
            _schema.migrate(self._conn, self._path)
        except BaseException as exc:
            self._conn.close()
            # A read-only file or folder (WAL writes its -shm beside the file), a file
            # that is not a database: what opening it said, naming the store.
            if isinstance(exc, sqlite3.DatabaseError):
                raise StoreUnavailableError(self.url, _why(exc, self._path)) from exc
            raise

    def _connect(self, create: bool) -> sqlite3.Connection:
        # mode=rw, not mode=ro, when the file must exist: it opens only a file that is
        # there (no check-then-create race), and the file still takes what every open
        # does: WAL needs its -shm written, and an older schema is migrated.
        target = self._path if create else f"{Path(self._path).absolute().as_uri()}?mode=rw"
        try:
            # isolation_level=None: the sqlite3 module must not open transactions
            # behind our back; every write says BEGIN IMMEDIATE itself.
            return sqlite3.connect(
                target,
                timeout=_BUSY_TIMEOUT_S,
                isolation_level=None,
                check_same_thread=False,
                uri=not create,
            )
        except sqlite3.OperationalError:
            if create or os.path.exists(self._path):
                raise
            raise StoreNotFoundError(self.url, os.path.abspath(self._path)) from None

    @classmethod
    def from_url(cls, url: str, *, create: bool = True) -> SqliteStore:
        """Open the store a ``sqlite://`` URL names (see :func:`parse_url`)."""
        path, synchronous = parse_url(url)
        return cls(path, synchronous=synchronous, create=create)

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

    # -- the connection ---------------------------------------------------------------
    def _tx(self) -> _Transaction:
        """One write transaction under the file's write lock (``BEGIN IMMEDIATE``), so the
        fencing check and the write it guards happen together, across processes too."""
        return _Transaction(self._lock, self._conn)

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.OperationalError as exc:
                damaged = _undecodable(exc, params)
                if damaged is None:
                    raise
                raise damaged from exc

    def _file_bytes(self) -> int:
        file_bytes = 0
        for suffix in ("", "-wal"):
            # No WAL file exists after the last connection closed and checkpointed it.
            with suppress(OSError):
                file_bytes += os.path.getsize(self._path + suffix)
        return file_bytes

    # -- runs and checkpoints -----------------------------------------------------------
    def create_run(
        self,
        run: RunInfo,
        first: CheckpointRecord,
        *,
        owner: str | None,
        ttl: float,
        blobs: Mapping[str, bytes] | None = None,
        sole: bool = False,
        queue: Enqueue | None = None,
    ) -> Lease:
        _common.check_first(run.run_id, run.thread_id, first.run_id, first.header.thread_id)
        ttl = _common.check_ttl(ttl)
        new_blobs = _common.check_blobs(blobs)
        where = None if queue is None else check_enqueue(queue)
        with self._tx() as conn:
            if conn.execute(SQL.run_exists, (run.run_id,)).fetchone():
                raise ConflictError(f"run {run.run_id} exists already")
            if sole:
                # Under BEGIN IMMEDIATE: no other process writes between these reads and
                # the insert.
                busy = conn.execute(SQL.thread_busy, (run.thread_id, run.run_id)).fetchone()
                [newest] = conn.execute(SQL.thread_newest, (run.thread_id,)).fetchall()
                _common.check_sole(first, busy=busy, newest=newest[0])
            now = time.time()
            expires = None if owner is None else now + ttl
            conn.execute(SQL.insert_run, run_values(run, first.header, owner=owner, expiry=expires))
            if where is not None:
                _queues.enqueue(conn, run.run_id, where)
            self._insert_checkpoint(conn, first, new_blobs)
        # Unowned: a lease nobody holds, expired from the start.
        return Lease(run.run_id, owner or "", 1, now if expires is None else expires)

    def _insert_queued(
        self, conn: sqlite3.Connection, run: RunInfo, first: CheckpointRecord, queue: Enqueue | None
    ) -> bool:
        # A schedule's occurrence (SqlSchedules.fire_schedule), in its transaction.
        if conn.execute(SQL.run_exists, (run.run_id,)).fetchone():
            return False
        conn.execute(SQL.insert_run, run_values(run, first.header, owner=None, expiry=None))
        if queue is not None:
            _queues.enqueue(conn, run.run_id, queue)
        self._insert_checkpoint(conn, first, {})
        return True

    def put_checkpoints(self, puts: Sequence[Put]) -> list[PutResult | Exception]:
        """Write the puts in one transaction, without a savepoint each; if one is refused,
        nothing is kept and they are written again one by one, each under a savepoint
        (``SqlStore.put_checkpoints``), so each refusal is its own, as on PostgreSQL.

        A savepoint is two statements more a put (SAVEPOINT, RELEASE), and ``sqlite3``
        gives the GIL up around every statement: under 64 runs on one event loop, the io
        thread waited for it back after each while the loop encoded other runs' steps
        (``benchmarks/batch_gil.py``). Refusals (a lost lease, a taken id) are rare."""
        try:
            checked = [_common.CheckedPut.of(put) for put in puts]
        except self._refusals:
            return SqlStore.put_checkpoints(self, puts)
        try:
            with self._tx() as conn:
                try:
                    return [self._put(conn, put) for put in checked]
                except self._refusals as exc:
                    raise _Refused() from exc  # out of the block: the batch rolls back
        except _Refused:
            return SqlStore.put_checkpoints(self, puts)

    @contextmanager
    def _savepoint(self, conn: sqlite3.Connection) -> Iterator[None]:
        conn.execute("SAVEPOINT put")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK TO put")
            raise
        finally:
            conn.execute("RELEASE put")

    def _put(self, conn: sqlite3.Connection, put: _common.CheckedPut) -> PutResult:
        """Write one checked put; call inside a write transaction."""
        header, error, waiting = put.record.header, put.error, put.waiting
        until, topics, need = put.wait
        now = time.time_ns() // 1000  # to_micros(utcnow()) without the datetime
        # The status as its plain str: ``_value_`` is an attribute, ``.value`` a
        # Python-level property on 3.11, and sqlite3 binds a str subclass (the member)
        # only after its adapter lookup.
        status = header.status._value_
        # The usual step takes one UPDATE (see MOVE_HEAD_KEEPING_STATUS); anything
        # else takes the long way, a waiting record always (it sets the wait columns),
        # and so does a run asked to cancel (the flag is then read at the end).
        # A later failure rolls the whole transaction back, so the order inside does
        # not matter, but for the wake check, which reads the journal entries below.
        moved = waiting is None and conn.execute(
            MOVE_HEAD_KEEPING_STATUS,
            (
                header.checkpoint_id, header.step, error, now, header.run_id,
                put.lease_token, status,
            ),
        ).rowcount  # fmt: skip
        if not moved:
            self._fence(conn, header.run_id, lease_token=put.lease_token)
            conn.execute(
                SQL.move_head,
                (
                    header.checkpoint_id, status, header.step, error, now,
                    until, SQL.dialect.ids(topics), need, header.run_id,
                ),
            )  # fmt: skip
        self._insert_checkpoint(conn, put.record, put.blobs)
        # In the checkpoint's transaction: the entries land with it or not at all.
        for effect in put.journal:
            self._journal(conn, effect)
        if waiting is not None:
            conn.execute(SQL.wake, (header.run_id,))
        for event in put.events:
            self._deliver(conn, event, missing_ok=True)
        if moved:  # its UPDATE matched only a run whose cancel flag is clear
            return PutResult(False)
        (cancel,) = conn.execute(CANCEL_FLAG, (header.run_id,)).fetchone()
        return PutResult(bool(cancel))

    def _deliver(
        self, conn: sqlite3.Connection, event: EffectRecord, *, missing_ok: bool
    ) -> Delivery | None:
        """Journal a checked event and wake its run; call inside a write transaction.
        None for a run that does not exist when ``missing_ok``."""
        if missing_ok and not conn.execute(SQL.run_exists, (event.run_id,)).fetchone():
            return None
        self._fence(conn, event.run_id, lease_token=None)
        stored = self._journal(conn, event)
        conn.execute(SQL.wake, (event.run_id,))
        return Delivery(stored, stored is event)

    def _insert_checkpoint(
        self, conn: sqlite3.Connection, record: CheckpointRecord, blobs: Mapping[str, bytes]
    ) -> None:
        """Insert a record with the blobs it brings; call inside a write transaction.

        The write lock keeps ``delete_unreferenced_blobs`` out until commit, so a
        blob found stored here stays stored.

        Raises:
            ConflictError: the id is taken, or the record names a blob neither in
                ``blobs`` nor stored (nothing is written).
        """
        h = record.header
        # The row first: its primary key says whether the id is taken, where a SELECT
        # before it was one statement more on every step. A refusal below rolls it back
        # with the transaction (or the batch's savepoint).
        try:
            conn.execute(SQL.insert_checkpoint, checkpoint_values(SQL.dialect, record))
        except sqlite3.IntegrityError as exc:
            if "UNIQUE constraint failed: checkpoints.checkpoint_id" not in str(exc):
                raise
            raise ConflictError(f"checkpoint {h.checkpoint_id} exists already") from None
        # Most records (deltas) name no blob: nothing to look up, no statement.
        wanted = _common.blobs_to_check(h, blobs) if h.blobs else None
        if wanted:
            missing = conn.execute(SQL.missing_blobs, (SQL.dialect.ids(wanted),)).fetchall()
            if missing:
                raise _common.missing_blob_error(h.checkpoint_id, [row[0] for row in missing])
        if blobs:
            conn.executemany(SQL.insert_blob, [(d, data, len(data)) for d, data in blobs.items()])
        if h.blobs:
            conn.execute(SQL.insert_refs, (h.checkpoint_id, SQL.dialect.ids(h.blobs)))

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
        where: list[str] = []
        params: list[Any] = []
        for key, value in _common.check_filter(metadata).items():
            where.append(
                f"EXISTS (SELECT 1 FROM json_each(c.metadata) WHERE key = ? AND {type_test(value)})"
            )
            params.append(key)
            if value is not None and not isinstance(value, bool):
                params.append(value)
        # LIMIT -1: no limit.
        found = self._read(
            *SQL.history(run_id, before, where, params, -1 if limit is None else limit)
        )
        if not found and not self._read(SQL.run_exists, (run_id,)):
            raise NotFoundError("run", run_id)
        return [rows.header(row, SQL.dialect.loads) for row in found]

    # -- leases -------------------------------------------------------------------------
    def claim_run(
        self,
        owner: str,
        ttl: float,
        *,
        workflows: Sequence[str] | None = None,
        queues: Sequence[str] | None = None,
        versions: Sequence[str] | None = None,
    ) -> Lease | None:
        ttl = _common.check_ttl(ttl)
        wanted = _common.check_workflows(workflows)
        of = _common.check_workflows(versions, "versions")
        codes = None if of is None else _common.json_dumps(of, "versions").decode()
        # BEGIN IMMEDIATE: the pick and the take happen under one write lock,
        # so claimers in other threads and processes never take the same run
        # (and never start more runs of a queue than it allows).
        with self._tx() as conn:
            now = time.time()
            names = None if wanted is None else _common.json_dumps(wanted, "workflows").decode()
            if _queues.in_play(conn, queues):
                row = _queues.claim(conn, owner, now, names, queues, codes)
            else:
                params = (now, names, round(now * 1e6), codes)
                row = conn.execute(CLAIM_WOKEN, params).fetchone()
                if row is None:
                    row = conn.execute(CLAIM, params).fetchone()
            if row is None:
                return None
            return self._take(conn, row[0], owner, int(row[1]) + 1, now + ttl)

    # -- queues (sqlite/_queues.py) -------------------------------------------------------
    def declare_queue(self, queue: Queue) -> None:
        with self._tx() as conn:
            _queues.declare(conn, queue)

    def list_queues(self) -> list[QueueStats]:
        return _queues.stats(self._read)

    def acquire_lease(
        self, run_id: str, owner: str, ttl: float, *, takeover_token: int | None = None
    ) -> Lease:
        ttl = _common.check_ttl(ttl)
        with self._tx() as conn:
            holder, token, expires_at = self._lease_row(conn, run_id)
            now = time.time()
            _common.check_lease_free(run_id, holder, token, expires_at, now, takeover_token)
            return self._take(conn, run_id, owner, token + 1, now + ttl)

    def renew_lease(self, run_id: str, token: int, ttl: float) -> Lease:
        ttl = _common.check_ttl(ttl)
        with self._tx() as conn:
            holder, current, _ = self._lease_row(conn, run_id)
            if holder is None or current != token:
                raise LeaseLostError(run_id, token)
            lease = Lease(run_id, holder, token, time.time() + ttl)
            conn.execute(SQL.renew_lease, (lease.expires_at, run_id, token))
        return lease

    @staticmethod
    def _lease_row(conn: sqlite3.Connection, run_id: str) -> tuple[str | None, int, float | None]:
        row = conn.execute(SQL.lease_row, (run_id,)).fetchone()
        if row is None:
            raise NotFoundError("run", run_id)
        return row[0], int(row[1]), row[2]

    @staticmethod
    def _take(
        conn: sqlite3.Connection, run_id: str, owner: str, token: int, expires: float
    ) -> Lease:
        """Lease the run to ``owner`` with ``token`` until ``expires`` (this process's clock)."""
        conn.execute(SQL.take_lease, (owner, token, expires, run_id))
        return Lease(run_id, owner, token, expires)

    # -- journal --------------------------------------------------------------------------
    def record_intent(self, effect: EffectRecord, *, lease_token: int) -> EffectRecord:
        return self.record_intents([effect], lease_token=lease_token)[0]

    def record_intents(
        self, effects: Sequence[EffectRecord], *, lease_token: int
    ) -> list[EffectRecord]:
        entries = _common.check_intents(effects)
        if not entries:
            return []
        with self._tx() as conn:
            self._fence(conn, entries[0].run_id, lease_token=lease_token)
            return [self._journal(conn, entry) for entry in entries]

    def _journal(self, conn: sqlite3.Connection, entry: EffectRecord) -> EffectRecord:
        """Insert-if-absent (see :func:`_common.keeps`); return what the journal holds afterwards.

        ``entry`` must come from :func:`_common.detached_effect` or, for a put's entries
        (whose return is not kept), :func:`_common.check_effects`. Call inside a write
        transaction, so the read and the write it decides see the same row.
        """
        values = effect_values(entry)
        if conn.execute(INSERT_EFFECT_IF_ABSENT, values).rowcount:
            return entry
        existing = self._select_effect(conn, entry.run_id, entry.request_id)
        if _common.keeps(existing):
            return existing
        conn.execute(SQL.replace_effect, values)
        return entry

    # -- housekeeping -------------------------------------------------------------------
    def delete_unreferenced_blobs(self) -> tuple[int, int]:
        # Counted and deleted under one write lock, so the two agree
        # (RETURNING would need SQLite 3.35, newer than some supported Pythons ship).
        with self._tx() as conn:
            count, freed = conn.execute(COUNT_UNREFERENCED).fetchone()
            conn.execute(DELETE_UNREFERENCED)
        return int(count), int(freed)

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
