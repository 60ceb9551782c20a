"""The Store methods SQLite and PostgreSQL run alike, written once over :class:`Statements`.

:class:`SqlStore` is the base of :class:`~savegame.stores.sqlite.SqliteStore`
and :class:`~savegame.stores.postgres.PostgresStore`. It holds every method
whose body is the same on both but for the SQL dialect: the reads, the
journal's reads and settlement, the fence, cancel and release, chains, blobs,
deletes, ``rewrite``, sizes. A backend keeps what it does its own way (how it
opens, runs a transaction and a savepoint, and reads; ``create_run``, one put's writes,
``list_checkpoints``, ``record_intent``, claims, acquisition and renewal,
blob collection) and gives its :class:`Statements` as ``_sql``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, closing
from typing import Any, ClassVar, Protocol

from savegame.errors import LeaseLostError, NotFoundError, SavegameError
from savegame.model import (
    CheckpointHeader,
    CheckpointRecord,
    EffectKind,
    EffectRecord,
    EffectStatus,
    RunInfo,
    RunStatus,
    Waiting,
    utcnow,
)
from savegame.stores import _common
from savegame.stores._queues import Enqueue
from savegame.stores._sql import rows
from savegame.stores._sql.statements import Dialect, Statements
from savegame.stores.base import (
    Delivery,
    Put,
    PutResult,
    RunPosition,
    RunSize,
    StoreStats,
    ThreadInfo,
)


class Cursor(Protocol):
    """What the stores use of a sqlite3 or psycopg cursor."""

    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def executemany(self, sql: str, params: Iterable[Any], /) -> Any: ...
    def close(self) -> None: ...


class Connection(Protocol):
    """What the stores use of a sqlite3 or psycopg connection."""

    def execute(self, sql: str, params: Any = ..., /) -> Any: ...
    def cursor(self) -> Any: ...


def executemany(conn: Connection, sql: str, params: Iterable[Sequence[Any]]) -> None:
    """``sql`` once per parameter tuple, on a cursor of its own (psycopg has no
    ``Connection.executemany``)."""
    cursor: Cursor
    with closing(conn.cursor()) as cursor:
        cursor.executemany(sql, params)


def run_values(
    run: RunInfo, first: CheckpointHeader, *, owner: str | None, expiry: float | None
) -> tuple[Any, ...]:
    """``insert_run``'s parameters: the run, its first record's status, step and id, its lease.

    ``expiry`` is the :attr:`Dialect.expiry` parameter (None: an unowned run, no expiry).

    Raises:
        ValueError: a naive datetime.
        SerializationError: metadata that is not JSON data.
    """
    meta = _common.json_dumps(dict(run.metadata), "run.metadata").decode()
    return (
        run.run_id, run.thread_id, run.workflow, run.workflow_ref,
        RunStatus(first.status).value, first.step, first.checkpoint_id,
        _common.to_micros(run.created_at), _common.to_micros(run.updated_at), run.error, meta,
        owner, expiry, bool(run.cancel_requested), run.checksum, run.version,
    )  # fmt: skip


def checkpoint_values(d: Dialect, record: CheckpointRecord) -> tuple[Any, ...]:
    """``insert_checkpoint``'s parameters.

    Raises:
        ValueError: a naive datetime or a blob digest that is not a string.
        SerializationError: metadata that is not JSON data.
    """
    h = record.header
    # ``_value_``, as Enum stores it: ``.value`` is a Python-level property on 3.11 (a
    # call a member; every put builds these, every LangGraph task write an entry's).
    status = _common.member(RunStatus, h.status)._value_
    return (
        h.thread_id, h.run_id, h.checkpoint_id, h.parent_id, h.step, h.node, status, h.next,
        _common.json_dumps(h.usage.to_dict(), "usage").decode(),
        _common.json_dumps(dict(h.metadata), "metadata").decode(),
        _common.to_micros(h.created_at),
        None if h.expires_at is None else _common.to_micros(h.expires_at),
        h.format_version, h.state_version, h.size, h.base_id, d.ids(_common.header_blobs(h)),
        record.checksum, bytes(record.payload),
    )  # fmt: skip


def effect_values(e: EffectRecord) -> tuple[Any, ...]:
    """A whole journal entry as ``replace_effect`` (and PostgreSQL's upsert) take it, for an
    entry from :func:`_common.detached_effect` or ``check_effects`` (whose entries it
    checks: a naive datetime, metadata that is not JSON data).

    Raises:
        ValueError: a naive datetime, a kind or status no member has.
        SerializationError: metadata that is not JSON data.
    """
    return (
        e.run_id, e.request_id, _common.member(EffectKind, e.kind)._value_, e.name, e.step,
        e.node, e.call_index, _common.member(EffectStatus, e.status)._value_, e.arguments,
        e.result, e.error,
        "{}" if type(e.metadata) is dict and not e.metadata
        else _common.json_dumps(dict(e.metadata), "effect.metadata").decode(),
        _common.to_micros(e.created_at),
        None if e.completed_at is None else _common.to_micros(e.completed_at),
        e.checksum,
    )  # fmt: skip


class SqlStore:
    """The methods both SQL stores share; a backend provides ``_sql``, ``_tx`` and ``_read``."""

    _sql: ClassVar[Statements]
    _refusals: ClassVar[tuple[type[Exception], ...]] = (SavegameError, ValueError)
    """What refuses one put of a batch, not the batch: savegame's own refusals and the
    driver's for a value it cannot store (its DataError). Anything else (the connection
    gone, a full disk) fails every put of the batch."""

    def _tx(self) -> AbstractContextManager[Connection]:
        """One write transaction: it commits when the block ends and rolls back when it raises."""
        raise NotImplementedError

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one read statement, outside any write transaction."""
        raise NotImplementedError

    def _savepoint(self, conn: Any) -> AbstractContextManager[None]:
        """A savepoint inside ``_tx``: rolled back to when the block raises (and the
        exception goes on), released when it ends."""
        raise NotImplementedError

    def _put(self, conn: Any, put: _common.CheckedPut) -> PutResult:
        """Write one checked put (its record, head move, journal entries, events);
        call inside a write transaction."""
        raise NotImplementedError

    # -- checkpoints ------------------------------------------------------------------------
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
        put = Put(record, lease_token, error, effects, blobs, waiting, events)
        checked = _common.CheckedPut.of(put)
        with self._tx() as conn:
            return self._put(conn, checked)

    def put_checkpoints(self, puts: Sequence[Put]) -> list[PutResult | Exception]:
        done: list[PutResult | Exception] = []
        with self._tx() as conn:
            for put in puts:
                try:
                    # A savepoint per put: one refused rolls back alone, the others
                    # commit with the transaction.
                    with self._savepoint(conn):
                        done.append(self._put(conn, _common.CheckedPut.of(put)))
                except self._refusals as exc:
                    done.append(exc)
        return done

    def _file_bytes(self) -> int | None:
        """What ``stats`` reports as the store's size on disk; None where it cannot tell."""
        return None

    # -- runs -------------------------------------------------------------------------
    def get_run(self, run_id: str) -> RunInfo:
        found = self._read(self._sql.get_run, (run_id,))
        if not found:
            raise NotFoundError("run", run_id)
        return rows.run_info(found[0], self._sql.dialect.loads)

    def run_queue(self, run_id: str) -> Enqueue | None:
        # QueueStore.run_queue: the columns the queue migration added, alike on both.
        p = self._sql.dialect.p
        found = self._read(
            f"SELECT queue, priority, dedup_key FROM runs WHERE run_id = {p}", (run_id,)
        )
        if not found:
            raise NotFoundError("run", run_id)
        queue, priority, dedup_key = found[0]
        return None if queue is None else Enqueue(queue, int(priority), dedup_key)

    def list_runs(
        self,
        *,
        thread_id: str | None = None,
        status: RunStatus | None = None,
        limit: int = 100,
        workflow: str | None = None,
        search: str | None = None,
        before: RunPosition | None = None,
    ) -> list[RunInfo]:
        wanted = None if status is None else RunStatus(status).value
        sql, params = self._sql.list_runs(
            thread_id, wanted, limit, workflow=workflow, search=search, before=before
        )
        return [rows.run_info(row, self._sql.dialect.loads) for row in self._read(sql, params)]

    def list_threads(self, *, limit: int = 100) -> list[ThreadInfo]:
        found = self._read(self._sql.threads, (self._sql.dialect.limit(limit),))
        return [ThreadInfo(tid, n, latest, updated / 1e6) for tid, n, updated, latest in found]

    def _fence(self, conn: Connection, run_id: str, *, lease_token: int | None) -> None:
        """Raise NotFoundError for an unknown run, LeaseLostError for a stale token.

        ``lease_token`` None checks only that the run exists (a person acting
        outside any lease). On PostgreSQL the read locks the run row until commit.
        """
        row = conn.execute(self._sql.fence, (run_id,)).fetchone()
        if row is None:
            raise NotFoundError("run", run_id)
        # Fencing: equality only. Expiry is for acquirers to judge; a writer
        # whose lease lapsed but was not taken over still owns the run.
        if lease_token is not None and row[0] != lease_token:
            raise LeaseLostError(run_id, lease_token)

    def _deliver(self, conn: Any, event: EffectRecord, *, missing_ok: bool) -> Delivery | None:
        """Journal a checked event and wake its run, inside a write transaction that orders
        it with a put of the run's waiting record; None for a missing run when ``missing_ok``."""
        raise NotImplementedError

    def deliver_event(self, event: EffectRecord) -> Delivery:
        event = _common.check_event(event)
        with self._tx() as conn:
            delivery = self._deliver(conn, event, missing_ok=False)
        assert delivery is not None  # not missing_ok: a missing run raised NotFoundError
        return delivery

    def request_cancel(self, run_id: str) -> None:
        with self._tx() as conn:
            if not conn.execute(self._sql.cancel, (run_id,)).rowcount:
                raise NotFoundError("run", run_id)

    def release_lease(self, run_id: str, token: int) -> None:
        with self._tx() as conn:
            if not conn.execute(self._sql.release_lease, (run_id, token)).rowcount:
                self._fence(
                    conn, run_id, lease_token=None
                )  # a stale token is a no-op; an unknown run is not

    # -- checkpoints ----------------------------------------------------------------------
    def get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord:
        found = self._read(self._sql.get_checkpoint, (checkpoint_id,))
        if not found:
            raise NotFoundError("checkpoint", checkpoint_id)
        return rows.record(found[0], self._sql.dialect.loads)

    def latest_checkpoint(self, run_id: str) -> CheckpointRecord:
        found = self._read(self._sql.latest_checkpoint, (run_id,))
        if not found:
            raise NotFoundError("run", run_id)
        return rows.record(found[0], self._sql.dialect.loads)

    def thread_head(self, thread_id: str) -> CheckpointRecord | None:
        found = self._read(self._sql.thread_head, (thread_id,))
        return rows.record(found[0], self._sql.dialect.loads) if found else None

    # -- journal --------------------------------------------------------------------------
    def _select_effect(self, conn: Connection, run_id: str, request_id: str) -> EffectRecord | None:
        row = conn.execute(self._sql.get_effect, (run_id, request_id)).fetchone()
        return None if row is None else rows.effect(row, self._sql.dialect.loads)

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
        expect_checksum: str | None = None,
    ) -> EffectRecord:
        with self._tx() as conn:
            # The fence serializes settlers (SQLite's write lock, PostgreSQL's run row
            # lock) and this read comes after it, so ``expect`` is checked against what
            # the previous settler committed.
            self._fence(conn, run_id, lease_token=lease_token)
            current = self._select_effect(conn, run_id, request_id)
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
                expect_checksum=expect_checksum,
            )
            conn.execute(
                self._sql.settle_effect,
                (
                    settled.status.value, settled.result, settled.error,
                    _common.json_dumps(dict(settled.metadata), "effect.metadata").decode(),
                    _common.to_micros(settled.completed_at or utcnow()), settled.checksum,
                    run_id, request_id,
                ),
            )  # fmt: skip
        return settled

    def get_effect(self, run_id: str, request_id: str) -> EffectRecord:
        found = self._read(self._sql.get_effect, (run_id, request_id))
        if not found:
            raise NotFoundError("effect", f"{run_id}/{request_id}")
        return rows.effect(found[0], self._sql.dialect.loads)

    def list_effects(
        self,
        run_id: str | None = None,
        *,
        kinds: Sequence[EffectKind] | None = None,
        statuses: Sequence[EffectStatus] | None = None,
        request_prefix: str | None = None,
        limit: int = 10_000,
    ) -> list[EffectRecord]:
        """Journal entries oldest first; see :meth:`savegame.stores.base.Store.list_effects`."""
        query = self._sql.list_effects(run_id, kinds, statuses, request_prefix, limit)
        if query is None:
            return []
        found = [rows.effect(row, self._sql.dialect.loads) for row in self._read(*query)]
        if request_prefix is not None:
            # A prefix's rows come in request-id order (see Statements.list_effects).
            found = sorted(found, key=_common.effect_order)[: max(limit, 0)]
        return found

    # -- storage engine -------------------------------------------------------------------
    def get_chain(self, checkpoint_id: str) -> list[CheckpointRecord]:
        chain: list[CheckpointRecord] = []
        for row in self._read(self._sql.chain, (checkpoint_id,)):
            if row[1] is None:
                raise NotFoundError("checkpoint", row[0])
            chain.append(rows.record(row[1:], self._sql.dialect.loads))
        if chain[-1].header.base_id is not None:
            raise _common.chain_too_long(checkpoint_id)
        return chain

    def get_blobs(self, digests: Sequence[str]) -> dict[str, bytes]:
        if not digests:
            return {}
        found = self._read(self._sql.get_blobs, (self._sql.dialect.ids(digests),))
        return {digest: bytes(data) for digest, data in found}

    def missing_blobs(self, digests: Sequence[str]) -> set[str]:
        if not digests:
            return set()
        return {
            row[0] for row in self._read(self._sql.missing_blobs, (self._sql.dialect.ids(digests),))
        }

    def delete_checkpoints(self, checkpoint_ids: Sequence[str]) -> int:
        if not checkpoint_ids:
            return 0
        # checkpoint_blobs rows go with them (ON DELETE CASCADE).
        with self._tx() as conn:
            ids = self._sql.dialect.ids(checkpoint_ids)
            return int(conn.execute(self._sql.delete_checkpoints, (ids,)).rowcount)

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        if not run_ids:
            return 0
        # Checkpoints, their blob references and the journal cascade from the run row.
        with self._tx() as conn:
            ids = self._sql.dialect.ids(run_ids)
            return int(conn.execute(self._sql.delete_runs, (ids,)).rowcount)

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
        with self._tx() as conn:
            if new_blobs:
                # Sorted: two writers sharing digests wait on each other in one order, never in a cycle.
                executemany(
                    conn,
                    self._sql.upsert_blob,
                    [(d, new_blobs[d], len(new_blobs[d])) for d in sorted(new_blobs)],
                )
            for record in records:
                self._replace_checkpoint(conn, record)
            for effect in effects:
                result = None if effect.result is None else bytes(effect.result)
                meta = _common.json_dumps(dict(effect.metadata), "effect.metadata").decode()
                if not conn.execute(
                    self._sql.rewrite_effect,
                    (bytes(effect.arguments), result, effect.error, meta, effect.checksum,
                     effect.run_id, effect.request_id),
                ).rowcount:  # fmt: skip
                    raise NotFoundError("effect", f"{effect.run_id}/{effect.request_id}")
            for run in runs:
                if not conn.execute(
                    self._sql.rewrite_run,
                    (_common.json_dumps(dict(run.metadata), "metadata").decode(), run.error,
                     run.checksum, run.run_id),
                ).rowcount:  # fmt: skip
                    raise NotFoundError("run", run.run_id)

    def _replace_checkpoint(self, conn: Connection, record: CheckpointRecord) -> None:
        """``rewrite``'s part for one record: the stored checkpoint of its id replaced whole,
        its blob references with it; call inside the transaction, blobs already stored.

        Raises:
            NotFoundError: no checkpoint has that id.
            ValueError: the record names another run or thread.
            MissingBlobsError: it names a blob that is not stored.
        """
        h = record.header
        found = conn.execute(self._sql.checkpoint_owner, (h.checkpoint_id,)).fetchone()
        if found is None:
            raise NotFoundError("checkpoint", h.checkpoint_id)
        record = _common.rewritten_record((found[0], found[1]), record)
        values = checkpoint_values(self._sql.dialect, record)
        # checkpoint_values' order is the insert's: the id and owners go last here.
        conn.execute(
            self._sql.replace_checkpoint, (*values[3:], h.checkpoint_id, h.run_id, h.thread_id)
        )
        conn.execute(self._sql.delete_refs, (h.checkpoint_id,))
        if h.blobs:
            # The references first, then the check, so on PostgreSQL a blob found present
            # cannot be collected under this record (see its _insert_checkpoint).
            ids = self._sql.dialect.ids
            conn.execute(self._sql.insert_refs, (h.checkpoint_id, ids(h.blobs)))
            missing = conn.execute(self._sql.missing_blobs, (ids(_common.unique(h.blobs)),))
            found_missing = missing.fetchall()
            if found_missing:
                raise _common.missing_blob_error(h.checkpoint_id, [row[0] for row in found_missing])

    def run_sizes(self, *, thread_id: str | None = None, limit: int = 1000) -> list[RunSize]:
        found = self._read(self._sql.run_sizes, (thread_id, thread_id, max(limit, 0)))
        return [
            RunSize(run_id, tid, RunStatus(status), n, int(payload), fx, int(fx_bytes))
            for run_id, tid, status, n, payload, fx, fx_bytes in found
        ]

    # -- housekeeping -----------------------------------------------------------------------
    def delete_thread(self, thread_id: str) -> int:
        with self._tx() as conn:
            deleted = conn.execute(self._sql.delete_thread_checkpoints, (thread_id,)).rowcount
            conn.execute(self._sql.delete_thread_runs, (thread_id,))
        return int(deleted)

    def stats(self) -> StoreStats:
        runs, checkpoints, payload, blobs, blob_bytes, effects = self._read(self._sql.stats)[0]
        return StoreStats(
            runs=int(runs),
            checkpoints=int(checkpoints),
            payload_bytes=int(payload),
            file_bytes=self._file_bytes(),
            blobs=int(blobs),
            blob_bytes=int(blob_bytes),
            effects=int(effects),
        )
