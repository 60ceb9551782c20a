"""The PostgreSQL store; the package docstring (:mod:`savegame.stores.postgres`) describes it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import orjson
import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.types.json import set_json_loads
from psycopg_pool import ConnectionPool

from savegame.errors import (
    ConfigurationError,
    ConflictError,
    LeaseLostError,
    NotFoundError,
    SavegameError,
    StoreUnavailableError,
)
from savegame.model import (
    CheckpointHeader,
    CheckpointRecord,
    EffectRecord,
    Lease,
    RunInfo,
    RunStatus,
    Waiting,
    utcnow,
)
from savegame.redaction import redact, redact_url
from savegame.stores import _common
from savegame.stores._queues import Enqueue, Queue, QueueStats, check_enqueue
from savegame.stores._sql import rows
from savegame.stores._sql.schedules import SqlSchedules
from savegame.stores._sql.store import (
    SqlStore,
    checkpoint_values,
    effect_values,
    executemany,
    run_values,
)
from savegame.stores.base import Capabilities, Delivery, Put, PutResult
from savegame.stores.postgres import _arrays, _queues, _schema
from savegame.stores.postgres._statements import (
    CLAIM,
    CLAIM_WOKEN,
    DELETE_UNREFERENCED,
    INSERT_CHECKPOINT,
    INSERT_RUN,
    LOCK_THREAD,
    MOVE_HEAD,
    MOVE_HEAD_FENCED,
    RENEW_LEASE,
    SQL,
    TAKE_LEASE,
    UPSERT_EFFECT,
    WRITE_ONE,
    WRITE_PLAIN,
    metadata_filter,
)

_CAPABILITIES = Capabilities(
    persistent=True,
    multi_process=True,
    waits=True,
    group_commit=True,
    schedules=True,
    queues=True,
    pooled=True,
)
_SCHEMES = ("postgresql", "postgres")
_DEFAULTS = {"pool_min": 1, "pool_max": 10, "pool_timeout": 30.0}
_PREPARE_THRESHOLD = 5
"""psycopg's own default: a statement run this many times on a connection is prepared."""

Conn = psycopg.Connection[tuple[Any, ...]]


def _head_move(put: _common.CheckedPut) -> tuple[Any, ...]:
    """MOVE_HEAD's parameters for a put (MOVE_HEAD_FENCED's before its token)."""
    header = put.record.header
    until, topics, need = put.wait
    return (
        header.checkpoint_id, RunStatus(header.status).value, header.step, put.error,
        _common.to_micros(utcnow()), until, topics, need, header.run_id,
    )  # fmt: skip


class _Refused(Exception):
    """A pipelined put was refused: roll its batch back, to be written again one by one."""


_BLOBS_COLUMN = 16
"""``checkpoint_values``' index of ``blobs``, which INSERT_CHECKPOINTS leaves out."""
_TOPICS_COLUMN = 6
_COLUMN_TYPES = {sql: _arrays.column_types(sql) for sql in WRITE_PLAIN.values()}
"""WRITE_PLAIN's array parameters' column classes, read from its casts."""
"""``_Sent.move``'s index of the wait topics, which MOVE_HEADS leaves out."""


@dataclass(frozen=True, slots=True)
class _Sent:
    """A put checked and its statements' parameters made, before its transaction."""

    put: _common.CheckedPut
    move: tuple[Any, ...]
    """MOVE_HEADS' columns: the head move's parameters, then the lease token."""
    values: tuple[Any, ...]
    """``checkpoint_values``."""
    journal: list[tuple[Any, ...]]
    """UPSERT_EFFECT's parameters, an entry each."""
    plain: bool
    """No blobs and no waiting: one of MOVE_HEADS' and INSERT_CHECKPOINTS' rows."""

    @classmethod
    def of(cls, put: Put) -> _Sent:
        """Raises: as ``CheckedPut.of`` and ``checkpoint_values`` do."""
        checked = _common.CheckedPut.of(put)
        header = checked.record.header
        topics = checked.wait[1]
        return cls(
            checked,
            (*_head_move(checked), checked.lease_token),
            checkpoint_values(SQL.dialect, checked.record),
            [effect_values(e) for e in checked.journal],
            not header.blobs and not checked.blobs and checked.waiting is None and not topics,
        )


def parse_url(url: str) -> tuple[str, dict[str, Any]]:
    """Split a ``postgresql://`` URL into (libpq conninfo URL, PostgresStore keyword options).

    Raises:
        ConfigurationError: another scheme, or a bad value for one of our options.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in _SCHEMES:
        raise ConfigurationError(
            f"not a PostgreSQL store URL: expected postgresql://, got {redact_url(url)!r}"
        )
    options: dict[str, Any] = {}
    libpq: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "schema":
            options["schema"] = value
        elif key == "prepare_threshold":
            options[key] = _prepare_threshold(value)
        elif key in _DEFAULTS:
            try:
                options[key] = type(_DEFAULTS[key])(value)
            except ValueError:
                raise ConfigurationError(
                    f"bad PostgreSQL store URL option {key}={value!r}: expected a number"
                ) from None
        else:
            libpq.append((key, value))
    conninfo = parts._replace(scheme="postgresql", query=urlencode(libpq)).geturl()
    return conninfo, options


def _prepare_threshold(value: str) -> int | None:
    if value.lower() == "none":
        return None
    try:
        found = int(value)
    except ValueError:
        found = -1
    if found < 0:
        raise ConfigurationError(
            f"bad PostgreSQL store URL option prepare_threshold={value!r}: expected a count "
            "of executions (0: prepare at once) or none (never prepare)"
        )
    return found


def public_url(conninfo: str, options: Mapping[str, Any]) -> str:
    """A ``postgresql://`` URL for ``conninfo`` plus our options, without the password."""
    params = conninfo_to_dict(conninfo)
    params.pop("password", None)
    host, port = str(params.pop("host", "") or ""), str(params.pop("port", "") or "")
    user, dbname = str(params.pop("user", "") or ""), str(params.pop("dbname", "") or "")
    if host.startswith("/") or "," in host:  # a socket directory or a host list
        params["host"], host = host, ""
        if port:
            params["port"], port = port, ""
    netloc = (quote(user, safe="") + "@" if user else "") + host + (f":{port}" if port else "")
    query = [(k, str(v)) for k, v in params.items()]
    query += [
        (k, str(v))
        for k, v in options.items()
        if v is not None and v != _DEFAULTS.get(k) and k != "prepare_threshold"
    ]
    prepare = options.get("prepare_threshold", _PREPARE_THRESHOLD)
    if prepare != _PREPARE_THRESHOLD:  # None included: "none"
        query.append(("prepare_threshold", str(prepare).lower()))
    path = "/" + quote(dbname, safe="") if dbname else ""
    # redact_url: what else libpq takes that is a secret (sslpassword=).
    return redact_url(f"postgresql://{netloc}{path}" + (f"?{urlencode(query)}" if query else ""))


class PostgresStore(SqlSchedules, SqlStore):
    """A store in a PostgreSQL database, shared by any number of processes.

    The methods PostgreSQL runs as SQLite does come from
    :class:`~savegame.stores._sql.store.SqlStore`. Blob collection and checkpoint
    writes meet on ``checkpoint_blobs``'s table lock: a writer adding references
    holds ROW EXCLUSIVE (any INSERT does), and :meth:`delete_unreferenced_blobs`
    takes SHARE, which waits for those writers and keeps new ones out until it commits.

    Args:
        conninfo: a libpq connection string or ``postgresql://`` URL (without our options).
        schema: keep the tables in this schema, created when missing; None uses the
            connection's current schema.
        pool_min: connections the pool keeps open.
        pool_max: most connections the pool opens; more concurrent calls wait.
        pool_timeout: seconds a call waits for a free connection.
        prepare_threshold: executions of a statement on a connection after which it is
            prepared on the server (psycopg's ``prepare_threshold``; 0: at once); None
            never prepares, for a pooler in transaction mode that does not track
            prepared statements (PgBouncer before 1.21, or ``max_prepared_statements=0``).

    Raises:
        StoreUnavailableError: the server cannot be reached or refuses the login.
        ConfigurationError: a bad option, or a schema written by a newer savegame.
    """

    # A NUL in a text column, a number out of its column's range: that put's alone.
    _refusals = (*SqlStore._refusals, psycopg.DataError)

    _sql = SQL

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str | None = None,
        pool_min: int = 1,
        pool_max: int = 10,
        pool_timeout: float = 30.0,
        prepare_threshold: int | None = _PREPARE_THRESHOLD,
    ) -> None:
        if not 0 <= pool_min <= pool_max or pool_max < 1 or not pool_timeout > 0:
            raise ConfigurationError(
                f"bad pool settings pool_min={pool_min}, pool_max={pool_max}, "
                f"pool_timeout={pool_timeout}: need 0 <= pool_min <= pool_max, pool_max >= 1, "
                "pool_timeout > 0"
            )
        self._schema = schema
        self._search_path = None if schema is None else _schema.quote_ident(schema)
        if prepare_threshold is not None and prepare_threshold < 0:
            raise ConfigurationError(
                f"bad prepare_threshold={prepare_threshold}: need >= 0, or None (never prepare)"
            )
        options = {"schema": schema, "pool_min": pool_min, "pool_max": pool_max}
        try:
            self._url = public_url(
                conninfo,
                {**options, "pool_timeout": pool_timeout, "prepare_threshold": prepare_threshold},
            )
        except psycopg.ProgrammingError as exc:  # conninfo syntax
            raise ConfigurationError(
                f"bad PostgreSQL connection string: {redact(str(exc), conninfo)}"
            ) from None
        # Migrate on a connection of its own: a refused login or an unknown
        # database surfaces here, now, with the server's message, rather than
        # as a pool timeout on the first call.
        try:
            conn = psycopg.connect(conninfo, autocommit=True)
        except psycopg.OperationalError as exc:
            raise self._unreachable(exc, conninfo) from None
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            conninfo,
            min_size=pool_min,
            max_size=pool_max,
            timeout=pool_timeout,
            kwargs={"autocommit": True, "prepare_threshold": prepare_threshold},
            configure=self._configure,
            name="savegame",
            open=False,
        )
        # The login worked: the pool's first connection is made while the schema is
        # checked, not on the first call (which waited for it: 6-8 ms here).
        self._pool.open(wait=False)
        try:
            with conn:
                _schema.migrate(conn, schema)
        except BaseException as exc:
            self._pool.close()
            if isinstance(exc, psycopg.OperationalError):
                raise self._unreachable(exc, conninfo) from None
            raise

    def _unreachable(self, exc: psycopg.OperationalError, conninfo: str) -> StoreUnavailableError:
        # Not chained: a traceback (--debug) prints the driver's own message, unredacted.
        return StoreUnavailableError(self._url, redact(str(exc), conninfo))

    @classmethod
    def from_url(cls, url: str) -> PostgresStore:
        """Open the store a ``postgresql://`` URL names (see :mod:`savegame.stores.postgres`)."""
        conninfo, options = parse_url(url)
        return cls(conninfo, **options)

    @property
    def url(self) -> str:
        return self._url

    @property
    def schema(self) -> str | None:
        return self._schema

    @property
    def capabilities(self) -> Capabilities:
        return _CAPABILITIES

    def _configure(self, conn: Conn) -> None:
        set_json_loads(orjson.loads, conn)
        _arrays.register(conn)
        if self._search_path is not None:
            conn.execute(f"SET search_path TO {self._search_path}")

    # -- the pool -----------------------------------------------------------------------
    @contextmanager
    def _tx(self) -> Iterator[Conn]:
        """One transaction; it commits when the block ends and rolls back when it raises."""
        with self._pool.connection() as conn, conn.transaction():
            yield conn

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        # Results in binary: a bytea column (payloads, blobs) in text format travels as hex,
        # twice its size, decoded on arrival (332 KB of blobs: 1.3-1.7 ms in text, 0.5 binary).
        with self._pool.connection() as conn:
            return conn.execute(sql, params, binary=True).fetchall()

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
        values = run_values(run, first.header, owner=owner, expiry=None if owner is None else ttl)
        params = checkpoint_values(SQL.dialect, first)
        new_blobs = _common.check_blobs(blobs)
        where = None if queue is None else check_enqueue(queue)
        with self._tx() as conn:
            if sole:
                # Read committed sees another start's run only once it committed: the
                # thread's lock (held to this commit) makes two sole starts take turns.
                conn.execute(LOCK_THREAD, (self._schema, run.thread_id))
                busy = conn.execute(SQL.thread_busy, (run.thread_id, run.run_id)).fetchone()
                [newest] = conn.execute(SQL.thread_newest, (run.thread_id,)).fetchall()
                _common.check_sole(first, busy=busy, newest=newest[0])
            row = conn.execute(INSERT_RUN, values).fetchone()
            if row is None:
                raise ConflictError(f"run {run.run_id} exists already")
            if where is not None:
                _queues.enqueue(conn, run.run_id, where)
            self._insert_checkpoint(conn, first, params, new_blobs)
        # Unowned: a lease nobody holds, expired from the start.
        return Lease(run.run_id, owner or "", 1, row[1] if row[0] is None else row[0])

    def _insert_queued(
        self, conn: Conn, run: RunInfo, first: CheckpointRecord, queue: Enqueue | None
    ) -> bool:
        # A schedule's occurrence (SqlSchedules.fire_schedule), in its transaction.
        if (
            conn.execute(
                INSERT_RUN, run_values(run, first.header, owner=None, expiry=None)
            ).fetchone()
            is None
        ):
            return False
        if queue is not None:
            _queues.enqueue(conn, run.run_id, queue)
        self._insert_checkpoint(conn, first, checkpoint_values(SQL.dialect, first), {})
        return True

    # -- group commit: pipelined, with the one-by-one writes as the fallback ---------------
    def put_checkpoint(
        self,
        record: CheckpointRecord,
        *,
        lease_token: int,
        error: str | None = None,
        effects: Sequence[EffectRecord] = (),
        blobs: Mapping[str, bytes] | None = None,
        waiting: Waiting | None = None,
        events: Sequence[EffectRecord] = (),
    ) -> PutResult:
        """A plain put without a journal (a run's usual step) is one statement, WRITE_ONE,
        one round trip in autocommit, where the transaction of :meth:`_put` takes four
        (BEGIN, the head's move, the insert, COMMIT) and the client's CPU for each. Any
        other put, or a plain one refused (the guarded statement wrote nothing), goes the
        way it always did, and raises what it always raised."""
        put = Put(record, lease_token, error, effects, blobs, waiting, events)
        sent = _Sent.of(put)
        if sent.plain and not events and not sent.journal:
            written = self._write_one(sent)
            if written is not None:
                return written
        with self._tx() as conn:
            return self._put(conn, sent.put)

    def _write_one(self, sent: _Sent) -> PutResult | None:
        """WRITE_ONE for a plain put without a journal; None when it wrote nothing."""
        token = sent.put.lease_token
        with self._pool.connection() as conn:
            try:
                row = conn.execute(WRITE_ONE, (*sent.move[:-1], token, token, *sent.values))
                return PutResult(bool(row.fetchone()[1]))  # type: ignore[index]  # one row
            except psycopg.Error:
                if conn.broken:
                    raise
                return None  # refused (the guard), or failed: the statement wrote nothing

    def put_checkpoints(self, puts: Sequence[Put]) -> list[PutResult | Exception]:
        """Write the puts in one transaction, each refused one alone (see :meth:`_pipelined`)."""
        done: list[PutResult | Exception | None] = [None] * len(puts)
        ready: list[tuple[int, _Sent]] = []
        for i, put in enumerate(puts):
            try:
                ready.append((i, _Sent.of(put)))
            except (SavegameError, ValueError) as exc:  # refused before it reaches the database
                done[i] = exc
        if (
            len(ready) == 1
            and (sent := ready[0][1]).plain
            and not (sent.journal or sent.put.events)
        ):
            alone = self._write_one(sent)  # a batch of one: see put_checkpoint
            if alone is not None:
                done[ready[0][0]] = alone
                return [x for x in done if x is not None]
        written = self._pipelined([sent for _, sent in ready]) if ready else []
        if written is None:
            # A put was refused, or a statement failed: the transaction wrote nothing.
            # Again one by one, each put under a savepoint, so each refusal is its own
            # and raised as it always was.
            return SqlStore.put_checkpoints(self, puts)
        for (i, _), one in zip(ready, written, strict=True):
            done[i] = one
        return [one for one in done if one is not None]

    def _pipelined(self, puts: Sequence[_Sent]) -> list[PutResult] | None:
        """Write every put in one transaction, or nothing and None.

        The plain puts (no blobs, no waiting, their run's only put in the batch) go
        as one statement whatever their number (WRITE_PLAIN). A batch of only those
        is that statement in autocommit, guarded (it fails unless every put was
        written): one round trip. Otherwise pipeline mode sends BEGIN, that statement
        and the other puts' statements (:meth:`_send`) without waiting for any;
        whether every fence held, every id was free and every blob is stored is read
        from the results, and COMMIT goes in a second round trip.

        If a put was refused (or a statement failed, or a put sends events, whose
        writes branch on what they read), nothing was written: the caller writes
        the batch again one put at a time.
        """
        if any(put.put.events for put in puts):
            return None
        runs = Counter(put.put.record.run_id for put in puts)
        plain = [i for i, put in enumerate(puts) if put.plain and runs[put.put.record.run_id] == 1]
        rest = sorted(set(range(len(puts))) - set(plain))
        written: list[PutResult | None] = [None] * len(puts)
        with self._pool.connection() as conn:
            try:
                if not rest:
                    cancelled = self._write_plain(conn, puts, guarded=True).fetchone()
                else:
                    with conn.pipeline() as pipeline, conn.transaction():
                        mine = [puts[i] for i in plain]
                        bulk = self._write_plain(conn, mine, guarded=False) if plain else None
                        sent = [(i, self._send(conn, puts[i])) for i in rest]
                        pipeline.sync()
                        cancelled = None if bulk is None else bulk.fetchone()
                        if cancelled is not None and not cancelled[0]:
                            raise _Refused
                        for i, cursors in sent:
                            written[i] = self._written(*cursors)
                        if any(written[i] is None for i in rest):
                            raise _Refused
            except _Refused:
                return None
            except psycopg.Error:
                if conn.broken:
                    raise
                if conn.info.transaction_status != TransactionStatus.IDLE:
                    conn.rollback()  # a failure inside the pipeline leaves it aborted
                return None
        if cancelled is not None:
            for i in plain:
                written[i] = PutResult(puts[i].put.record.run_id in cancelled[1])
        return cast("list[PutResult]", written)

    @staticmethod
    def _write_plain(conn: Conn, puts: Sequence[_Sent], *, guarded: bool) -> Any:
        """Run (or, in a pipeline, queue) WRITE_PLAIN for the plain puts; its cursor."""
        moves = list(zip(*(put.move for put in puts), strict=True))
        del moves[_TOPICS_COLUMN]  # every plain put's is empty
        values = list(zip(*(put.values for put in puts), strict=True))
        del values[_BLOBS_COLUMN]  # and so is every plain record's
        journal = [entry for put in puts for entry in put.journal]
        entries = list(zip(*journal, strict=True))
        columns = [*moves, moves[-2], *values, *entries]  # the run ids again: ANY()
        sql = WRITE_PLAIN[bool(journal), guarded]
        # Each column as its SQL type's array (_arrays.py: psycopg's list dumping cost more
        # than the rest of the put).
        params: list[Any] = [
            kind(column) for kind, column in zip(_COLUMN_TYPES[sql], columns, strict=True)
        ]
        return conn.execute(sql, [*params, len(puts), len(puts)])

    @staticmethod
    def _send(conn: Conn, sent: _Sent) -> tuple[Any, Any, Any]:
        """Queue one put's writes on a pipeline; :meth:`_written` reads the outcome.

        The statements :meth:`_put` runs when the fence holds, the id is free and the
        blobs are there, sent without looking: a miss is seen in the results and the
        transaction then rolls back whole (so the checkpoint inserted past a fence
        that did not hold is never committed).
        """
        put = sent.put
        header, record = put.record.header, put.record
        token = put.lease_token
        moved = conn.execute(MOVE_HEAD_FENCED, (*sent.move[:-1], token, token))
        inserted = conn.execute(INSERT_CHECKPOINT, sent.values)
        missing = None
        if header.blobs:
            # References before the check, as in _insert_checkpoint (the collector's lock).
            conn.execute(SQL.insert_refs, (record.checkpoint_id, list(header.blobs)))
            wanted = _common.blobs_to_check(header, put.blobs)
            if wanted:
                missing = conn.execute(SQL.missing_blobs, (wanted,))
        if put.blobs:
            conn.cursor().executemany(
                SQL.insert_blob, [(d, put.blobs[d], len(put.blobs[d])) for d in sorted(put.blobs)]
            )
        if sent.journal:
            conn.cursor().executemany(UPSERT_EFFECT, sent.journal)
        if put.waiting is not None:
            conn.execute(SQL.wake, (header.run_id,))  # after the row lock: see _put
        return moved, inserted, missing

    @staticmethod
    def _written(moved: Any, inserted: Any, missing: Any) -> PutResult | None:
        """A sent put's outcome from its results; None when :meth:`_put` would have raised."""
        row = moved.fetchone()
        if row is None or inserted.rowcount != 1 or (missing is not None and missing.fetchall()):
            return None
        return PutResult(bool(row[0]))

    @contextmanager
    def _savepoint(self, conn: Conn) -> Iterator[None]:
        with conn.transaction():  # a nested transaction is a savepoint
            yield

    def _put(self, conn: Conn, put: _common.CheckedPut) -> PutResult:
        """Write one checked put; call inside a transaction."""
        header, record = put.record.header, put.record
        params = checkpoint_values(SQL.dialect, record)
        move = _head_move(put)
        # See MOVE_HEAD_FENCED. A later failure rolls it all back, so the order
        # inside the transaction does not matter.
        token = put.lease_token
        row = conn.execute(MOVE_HEAD_FENCED, (*move, token, token)).fetchone()
        if row is None:
            self._fence(conn, header.run_id, lease_token=token)
            row = conn.execute(MOVE_HEAD, move).fetchone()
        self._insert_checkpoint(conn, record, params, put.blobs)
        if put.journal:
            executemany(conn, UPSERT_EFFECT, [effect_values(e) for e in put.journal])
        if put.waiting is not None:
            # After the row lock the UPDATE took: an event delivered meanwhile has
            # committed (this statement's snapshot sees it) or waits for our commit
            # (and then finds the run waiting).
            conn.execute(SQL.wake, (header.run_id,))
        # Other runs' rows are locked after this one's: a child's row, then its
        # parent's, never the other way round.
        for event in put.events:
            self._deliver(conn, event, missing_ok=True)
        return PutResult(bool(row and row[0]))

    def _deliver(self, conn: Conn, event: EffectRecord, *, missing_ok: bool) -> Delivery | None:
        """Journal a checked event and wake its run, its row locked first (so the wake
        check and a put of a waiting record are ordered); None for a missing run when
        ``missing_ok``."""
        try:
            self._fence(conn, event.run_id, lease_token=None)
        except NotFoundError:
            if missing_ok:
                return None
            raise
        row = conn.execute(UPSERT_EFFECT, effect_values(event)).fetchone()
        stored = None if row is None else rows.effect(row, SQL.dialect.loads)
        if stored is None:
            stored = self._select_effect(conn, event.run_id, event.request_id)
            assert stored is not None  # the run row lock keeps the entry in place
        conn.execute(SQL.wake, (event.run_id,))
        return Delivery(stored, row is not None)

    def _insert_checkpoint(
        self,
        conn: Conn,
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
            conn.execute(SQL.insert_refs, (record.checkpoint_id, list(record.header.blobs)))
            wanted = _common.blobs_to_check(record.header, blobs)
            if wanted:
                missing = conn.execute(SQL.missing_blobs, (wanted,)).fetchall()
                if missing:
                    raise _common.missing_blob_error(record.checkpoint_id, [r[0] for r in missing])
        if blobs:
            # Sorted: two writers sharing digests wait on each other in one order, never in a cycle.
            executemany(
                conn, SQL.insert_blob, [(d, blobs[d], len(blobs[d])) for d in sorted(blobs)]
            )

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
        wanted = _common.check_filter(metadata)
        found = metadata_filter(wanted)
        out: list[CheckpointHeader] = []
        while found is not None:
            # Pages until ``limit`` headers pass the exact rule (the SQL only narrows).
            want = None if limit is None else max(limit, 0) - len(out)
            page = self._read(*SQL.history(run_id, before, [found[0]], found[1], want))  # NULL: all
            headers = [rows.header(row, SQL.dialect.loads) for row in page]
            kept = [h for h in headers if _common.matches(h.metadata, wanted)]
            out.extend(kept)
            if want is None or len(page) < want or len(kept) == len(page):
                break
            before = page[-1][2]
        if not out and not self._read(SQL.run_exists, (run_id,)):
            raise NotFoundError("run", run_id)
        return out

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
        codes = _common.check_workflows(versions, "versions")
        with self._tx() as conn:
            # SKIP LOCKED: a row another claimer (or acquirer) holds is passed
            # over, not waited for, so concurrent claimers take different runs.
            now = _common.to_micros(utcnow())
            row: tuple[str, int] | None
            if _queues.in_play(conn, queues):
                # Under the queues' row locks (postgres/_queues.py): a queue's limits hold.
                row = _queues.claim(conn, owner, now, wanted, queues, codes)
            else:
                which = {"workflows": wanted, "versions": codes, "now": now}
                plain = conn.execute(CLAIM_WOKEN, which).fetchone()
                if plain is None:
                    plain = conn.execute(CLAIM, which).fetchone()
                row = None if plain is None else (plain[0], plain[1])
                if plain is not None and plain[2] is not None:
                    # A queue was declared, and a run put in it, since in_play looked
                    # (another statement, another snapshot): that run's limits apply.
                    row = _queues.claim(conn, owner, now, wanted, queues, codes)
            if row is None:
                return None
            return self._take(conn, row[0], owner, row[1] + 1, ttl)

    # -- queues (postgres/_queues.py) -----------------------------------------------------
    def declare_queue(self, queue: Queue) -> None:
        with self._tx() as conn:
            _queues.declare(conn, queue)

    def list_queues(self) -> list[QueueStats]:
        with self._tx() as conn:
            return _queues.stats(conn)

    def acquire_lease(
        self, run_id: str, owner: str, ttl: float, *, takeover_token: int | None = None
    ) -> Lease:
        ttl = _common.check_ttl(ttl)
        with self._tx() as conn:
            # The row lock makes the check and the swap one step against other
            # acquirers; ``now`` read before a lock wait is earlier, never
            # later, so it can only judge a lease live a moment longer.
            row = conn.execute(SQL.lease_row, (run_id,)).fetchone()
            if row is None:
                raise NotFoundError("run", run_id)
            holder, token, expires_at, now = row
            _common.check_lease_free(run_id, holder, token, expires_at, now, takeover_token)
            return self._take(conn, run_id, owner, token + 1, ttl)

    def renew_lease(self, run_id: str, token: int, ttl: float) -> Lease:
        ttl = _common.check_ttl(ttl)
        with self._tx() as conn:
            row = conn.execute(RENEW_LEASE, (ttl, run_id, token)).fetchone()
            if row is None:
                self._fence(conn, run_id, lease_token=None)
                raise LeaseLostError(run_id, token)
        return Lease(run_id, row[0], token, row[1])

    @staticmethod
    def _take(conn: Conn, run_id: str, owner: str, token: int, ttl: float) -> Lease:
        """Lease the locked run to ``owner`` with ``token`` for ``ttl`` seconds of the server's clock."""
        row = conn.execute(TAKE_LEASE, (owner, token, ttl, run_id)).fetchone()
        if row is None:  # unreachable: the caller's transaction holds the row locked
            raise NotFoundError("run", run_id)
        return Lease(run_id, owner, token, row[0])

    # -- journal --------------------------------------------------------------------------
    def record_intent(self, effect: EffectRecord, *, lease_token: int) -> EffectRecord:
        return self.record_intents([effect], lease_token=lease_token)[0]

    def record_intents(
        self, effects: Sequence[EffectRecord], *, lease_token: int
    ) -> list[EffectRecord]:
        entries = _common.check_intents(effects)
        if not entries:
            return []
        out: list[EffectRecord] = []
        with self._tx() as conn:
            self._fence(conn, entries[0].run_id, lease_token=lease_token)
            for effect in entries:
                row = conn.execute(UPSERT_EFFECT, effect_values(effect)).fetchone()
                # None: an entry that stays; return it as stored.
                stored = (
                    rows.effect(row, SQL.dialect.loads)
                    if row is not None
                    else self._select_effect(conn, effect.run_id, effect.request_id)
                )
                if stored is None:  # unreachable: the run row lock keeps the entry in place
                    raise NotFoundError("effect", f"{effect.run_id}/{effect.request_id}")
                out.append(stored)
        return out

    # -- housekeeping -------------------------------------------------------------------
    def delete_unreferenced_blobs(self) -> tuple[int, int]:
        with self._tx() as conn:
            # SHARE waits for writers that are adding references (they hold ROW
            # EXCLUSIVE) and keeps new ones out until we commit, so the anti-join
            # sees every reference that will exist (see _insert_checkpoint).
            conn.execute("LOCK TABLE checkpoint_blobs IN SHARE MODE")
            row = conn.execute(DELETE_UNREFERENCED).fetchone()
        count, freed = row or (0, 0)
        return int(count), int(freed)

    def close(self) -> None:
        """Close the pool; later calls raise ``psycopg_pool.PoolClosed``."""
        self._pool.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self._url!r})"
