"""The connection discipline, the journal and the storage engine of the PostgreSQL store.

A base of :class:`savegame.stores.postgres.PostgresStore`, kept apart so each
module stays readable: how a transaction, a read and the fence are run on the
pool, then the effect journal, then chains, blobs, pruning, rewrite, sizes and
housekeeping. Lists of ids travel
as one array parameter, so a call is one statement however many ids it names.

Blob collection and checkpoint writes meet on ``checkpoint_blobs``'s table
lock: a writer adding references holds ROW EXCLUSIVE (any INSERT does), and
:meth:`PostgresEngine.delete_unreferenced_blobs` takes SHARE, which waits for
those writers and keeps new ones out until it commits.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from savegame.errors import LeaseLostError, NotFoundError
from savegame.model import (
    CheckpointRecord,
    EffectKind,
    EffectRecord,
    EffectStatus,
    RunInfo,
    RunStatus,
    utcnow,
)
from savegame.stores import _common
from savegame.stores._sql.rows import SqlReads
from savegame.stores.base import RunSize, StoreStats
from savegame.stores.postgres import _statements as q

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

    Conn = psycopg.Connection[tuple[Any, ...]]


class PostgresEngine(SqlReads):
    """Transactions and the fence on the store's pool; the journal and storage-engine methods."""

    _param = "%s"

    _pool: ConnectionPool[Conn]

    @contextmanager
    def _tx(self) -> Iterator[Conn]:
        """One transaction; it commits when the block ends and rolls back when it raises."""
        with self._pool.connection() as conn, conn.transaction():
            yield conn

    def _read(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        with self._pool.connection() as conn:
            return conn.execute(sql, params).fetchall()

    def _json(self, value: Any) -> Any:
        return value  # psycopg has already parsed json columns

    @staticmethod
    def _fence(conn: Conn, run_id: str, lease_token: int | None) -> None:
        """Lock the run row; NotFoundError for an unknown run, LeaseLostError for a stale token.

        ``lease_token`` None locks without fencing (a person acting outside any lease).
        """
        row = conn.execute(
            "SELECT lease_token FROM runs WHERE run_id = %s FOR UPDATE", (run_id,)
        ).fetchone()
        if row is None:
            raise NotFoundError("run", run_id)
        # Equality only: expiry is for acquirers to judge; a writer whose lease
        # lapsed but was not taken over still owns the run.
        if lease_token is not None and row[0] != lease_token:
            raise LeaseLostError(run_id, lease_token)

    # -- journal --------------------------------------------------------------------------
    def record_intent(self, effect: EffectRecord, *, lease_token: int) -> EffectRecord:
        effect = _common.detached_effect(effect)
        with self._tx() as conn:
            self._fence(conn, effect.run_id, lease_token)
            row = conn.execute(q.UPSERT_EFFECT, q.effect_params(effect)).fetchone()
            if row is None:  # an entry that stays: return it as stored
                row = conn.execute(
                    f"SELECT {q.EFFECT_COLS} FROM effects WHERE run_id = %s AND request_id = %s",
                    (effect.run_id, effect.request_id),
                ).fetchone()
        if row is None:  # unreachable: the run row lock keeps the entry in place
            raise NotFoundError("effect", f"{effect.run_id}/{effect.request_id}")
        return q.effect(row)

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
        with self._tx() as conn:
            # The run row's lock serializes settlers, and this read comes after it, so
            # ``expect`` is checked against what the previous settler committed.
            self._fence(conn, run_id, lease_token)
            row = conn.execute(
                f"SELECT {q.EFFECT_COLS} FROM effects WHERE run_id = %s AND request_id = %s",
                (run_id, request_id),
            ).fetchone()
            if row is None:
                raise NotFoundError("effect", f"{run_id}/{request_id}")
            settled = _common.settled(
                q.effect(row),
                status=status,
                result=result,
                error=error,
                metadata=metadata,
                checksum=checksum,
                expect=expect,
            )
            conn.execute(
                "UPDATE effects SET status = %s, result = %s, error = %s, metadata = %s::json,"
                " completed_at = %s, checksum = %s WHERE run_id = %s AND request_id = %s",
                (
                    settled.status.value, settled.result, settled.error,
                    _common.json_dumps(dict(settled.metadata), "effect.metadata").decode(),
                    _common.to_micros(settled.completed_at or utcnow()), checksum,
                    run_id, request_id,
                ),
            )  # fmt: skip
        return settled

    def get_effect(self, run_id: str, request_id: str) -> EffectRecord:
        rows = self._read(
            f"SELECT {q.EFFECT_COLS} FROM effects WHERE run_id = %s AND request_id = %s",
            (run_id, request_id),
        )
        if not rows:
            raise NotFoundError("effect", f"{run_id}/{request_id}")
        return q.effect(rows[0])

    def list_effects(
        self,
        run_id: str | None = None,
        *,
        kinds: Sequence[EffectKind] | None = None,
        statuses: Sequence[EffectStatus] | None = None,
        limit: int = 10_000,
    ) -> list[EffectRecord]:
        """Journal entries oldest first; see :meth:`savegame.stores.base.Store.list_effects`."""
        sql, params = q.effects_query(run_id, kinds, statuses, limit)
        return [q.effect(row) for row in self._read(sql, params)]

    def request_cancel(self, run_id: str) -> None:
        with self._tx() as conn:
            if not conn.execute(
                "UPDATE runs SET cancel_requested = true WHERE run_id = %s", (run_id,)
            ).rowcount:
                raise NotFoundError("run", run_id)

    # -- storage engine -------------------------------------------------------------
    def get_chain(self, checkpoint_id: str) -> list[CheckpointRecord]:
        chain: list[CheckpointRecord] = []
        for row in self._read(q.CHAIN, (checkpoint_id,)):
            if row[1] is None:
                raise NotFoundError("checkpoint", row[0])
            chain.append(q.record(row[1:]))
        if chain[-1].header.base_id is not None:
            raise _common.chain_too_long(checkpoint_id)
        return chain

    def get_blobs(self, digests: Sequence[str]) -> dict[str, bytes]:
        if not digests:
            return {}
        rows = self._read(
            "SELECT digest, data FROM blobs WHERE digest = ANY(%s::text[])", (list(digests),)
        )
        return {digest: bytes(data) for digest, data in rows}

    def missing_blobs(self, digests: Sequence[str]) -> set[str]:
        if not digests:
            return set()
        rows = self._read(
            "SELECT d FROM unnest(%s::text[]) AS d"
            " WHERE NOT EXISTS (SELECT 1 FROM blobs WHERE digest = d)",
            (list(digests),),
        )
        return {row[0] for row in rows}

    def delete_checkpoints(self, checkpoint_ids: Sequence[str]) -> int:
        if not checkpoint_ids:
            return 0
        # checkpoint_blobs rows go with them (ON DELETE CASCADE).
        with self._tx() as conn:
            return conn.execute(
                "DELETE FROM checkpoints WHERE checkpoint_id = ANY(%s::text[])",
                (list(checkpoint_ids),),
            ).rowcount

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        if not run_ids:
            return 0
        # Checkpoints, their blob references and the journal cascade from the run row.
        with self._tx() as conn:
            return conn.execute(
                "DELETE FROM runs WHERE run_id = ANY(%s::text[])", (list(run_ids),)
            ).rowcount

    def delete_unreferenced_blobs(self) -> tuple[int, int]:
        with self._tx() as conn:
            # SHARE waits for writers that are adding references (they hold ROW
            # EXCLUSIVE) and keeps new ones out until we commit, so the anti-join
            # sees every reference that will exist (see put_checkpoint).
            conn.execute("LOCK TABLE checkpoint_blobs IN SHARE MODE")
            row = conn.execute(
                "WITH gone AS (DELETE FROM blobs b WHERE NOT EXISTS"
                " (SELECT 1 FROM checkpoint_blobs r WHERE r.digest = b.digest) RETURNING size)"
                " SELECT count(*), coalesce(sum(size), 0) FROM gone"
            ).fetchone()
        count, freed = row or (0, 0)
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
        with self._tx() as conn:
            if new_blobs:
                with conn.cursor() as cur:
                    cur.executemany(
                        q.UPSERT_BLOB,
                        [(d, new_blobs[d], len(new_blobs[d])) for d in sorted(new_blobs)],
                    )
            for record in records:
                q.replace_checkpoint(conn, record)
            for effect in effects:
                result = None if effect.result is None else bytes(effect.result)
                meta = _common.json_dumps(dict(effect.metadata), "effect.metadata").decode()
                if not conn.execute(
                    "UPDATE effects SET arguments = %s, result = %s, error = %s,"
                    " metadata = %s::json, checksum = %s WHERE run_id = %s AND request_id = %s",
                    (bytes(effect.arguments), result, effect.error, meta, effect.checksum,
                     effect.run_id, effect.request_id),
                ).rowcount:  # fmt: skip
                    raise NotFoundError("effect", f"{effect.run_id}/{effect.request_id}")
            for run in runs:
                if not conn.execute(
                    "UPDATE runs SET metadata = %s::json, error = %s, checksum = %s"
                    " WHERE run_id = %s",
                    (_common.json_dumps(dict(run.metadata), "metadata").decode(), run.error,
                     run.checksum, run.run_id),
                ).rowcount:  # fmt: skip
                    raise NotFoundError("run", run.run_id)

    def run_sizes(self, *, thread_id: str | None = None, limit: int = 1000) -> list[RunSize]:
        rows = self._read(q.RUN_SIZES, {"thread": thread_id, "limit": max(limit, 0)})
        return [
            RunSize(run_id, tid, RunStatus(status), n, int(payload), effects, int(effect_bytes))
            for run_id, tid, status, n, payload, effects, effect_bytes in rows
        ]

    # -- housekeeping -------------------------------------------------------------------
    def delete_thread(self, thread_id: str) -> int:
        with self._tx() as conn:
            deleted = conn.execute(
                "DELETE FROM checkpoints WHERE run_id IN"
                " (SELECT run_id FROM runs WHERE thread_id = %s)",
                (thread_id,),
            ).rowcount
            conn.execute("DELETE FROM runs WHERE thread_id = %s", (thread_id,))
        return deleted

    def stats(self) -> StoreStats:
        runs, checkpoints, payload, blobs, blob_bytes, effects = self._read(q.STATS)[0]
        return StoreStats(
            runs=runs,
            checkpoints=checkpoints,
            payload_bytes=int(payload),
            file_bytes=None,
            blobs=blobs,
            blob_bytes=int(blob_bytes),
            effects=effects,
        )
