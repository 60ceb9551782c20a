"""The SQL both SQL backends run, written once, and the dialects it is written in.

SQLite and PostgreSQL keep the same tables with the same columns (see
:mod:`savegame.stores._sql.rows`), so most statements differ only in how a
parameter is written. :class:`Dialect` names each such difference once, the two
dialects side by side at the end; :class:`Statements` builds every shared
statement from one. What only one backend runs (SQLite's claim through
``INDEXED BY`` and its json_each history filter, PostgreSQL's ``SKIP LOCKED``
claim and its journal upsert) lives in that backend's ``_statements`` module.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

from savegame.model import EffectKind, EffectStatus
from savegame.stores import _common
from savegame.stores._sql.rows import EFFECT_COLS, HEADER_COLS, RECORD_COLS, RUN_COLS
from savegame.stores.base import RunPosition

#: Epoch seconds on PostgreSQL's clock: every process judges lease expiry by one clock.
PG_NOW = "extract(epoch FROM clock_timestamp())::float8"


class Dialect:
    """How one SQL backend writes what the shared statements need; one subclass each."""

    p: ClassVar[str]
    """The driver's placeholder."""
    text: ClassVar[str]
    """A text parameter that may be NULL (PostgreSQL must be told its type)."""
    key: ClassVar[str]
    """A parameter that starts a join on an id column, typed like one."""
    json: ClassVar[str]
    """A parameter for a JSON column."""
    array: ClassVar[str]
    """A parameter for ``checkpoints.blobs``, the header's digests in their order."""
    each: ClassVar[str]
    """The ids of one :meth:`ids` parameter as a table whose one column is ``value``."""
    true: ClassVar[str]
    lock: ClassVar[str]
    """Appended to the fence's SELECT of the run row."""
    expiry: ClassVar[str]
    """A lease expiry computed from its parameter (see each dialect for which clock)."""
    clock: ClassVar[str]
    """Appended to the lease row's columns: the lease clock, where the database keeps it."""
    length: ClassVar[str]
    """The byte length of a BLOB / bytea value."""
    each_of: ClassVar[str]
    """``{}`` (an id-list column, written like :attr:`array`) as a table whose one column is ``value``."""
    nul: ClassVar[bool] = True
    """A text value may hold NUL (a PostgreSQL one may not: no stored id has one)."""

    @staticmethod
    def ids(ids: Sequence[str]) -> Any:
        """An id list as the one parameter :attr:`each`, :attr:`array` and :meth:`in_ids` read."""
        raise NotImplementedError

    @staticmethod
    def in_ids(column: str) -> str:
        """``column`` is one of the ids of one :meth:`ids` parameter."""
        raise NotImplementedError

    @staticmethod
    def in_values(column: str, values: Sequence[str]) -> tuple[str, list[Any]]:
        """``column`` is one of ``values`` (none for an empty list): the condition and its parameters."""
        raise NotImplementedError

    @staticmethod
    def if_absent(insert: str) -> str:
        """``insert`` (an ``INSERT INTO``) skipping rows whose key is taken."""
        raise NotImplementedError

    @staticmethod
    def replacing(insert: str, key: str, columns: Sequence[str]) -> str:
        """``insert`` (an ``INSERT INTO``) overwriting ``columns`` of a row whose ``key`` is taken."""
        raise NotImplementedError

    @staticmethod
    def loads(value: Any) -> Any:
        """A JSON column as the driver returns it, parsed."""
        raise NotImplementedError

    @staticmethod
    def limit(n: int) -> int:
        """``list_runs``' and ``list_threads``' LIMIT parameter for the caller's ``limit``."""
        raise NotImplementedError


class SqliteDialect(Dialect):
    """sqlite3: JSON and id lists travel as text; every write holds the file's write lock."""

    p = text = key = json = array = "?"
    each = "json_each(?)"
    # 1, not TRUE: the keyword needs SQLite 3.23.
    true = "1"
    # BEGIN IMMEDIATE already holds the file's write lock for the whole transaction.
    lock = ""
    # Epoch seconds from the caller: every process of a SQLite store shares one machine's clock.
    expiry = "?"
    clock = ""
    length = "length"
    each_of = "json_each({})"

    @staticmethod
    def ids(ids: Sequence[str]) -> Any:
        # One JSON array parameter, however many ids: never SQLite's limit on bound parameters.
        return _common.json_dumps(list(ids), "ids").decode()

    @staticmethod
    def in_ids(column: str) -> str:
        return f"{column} IN (SELECT value FROM json_each(?))"

    @staticmethod
    def in_values(column: str, values: Sequence[str]) -> tuple[str, list[Any]]:
        # A list of placeholders, which the planner matches against an index column by column.
        return f"{column} IN ({', '.join('?' for _ in values)})", list(values)

    @staticmethod
    def if_absent(insert: str) -> str:
        return insert.replace("INSERT INTO", "INSERT OR IGNORE INTO", 1)

    @staticmethod
    def replacing(insert: str, key: str, columns: Sequence[str]) -> str:
        # The whole row is given, so replacing it (ON CONFLICT needs SQLite 3.24) does the same.
        return insert.replace("INSERT INTO", "INSERT OR REPLACE INTO", 1)

    @staticmethod
    def loads(value: Any) -> Any:
        return _common.json_loads(value)

    @staticmethod
    def limit(n: int) -> int:
        return n  # a negative LIMIT is no limit in SQLite, as these listings have always read it


class PostgresDialect(Dialect):
    """psycopg: typed parameters, arrays for id lists, row locks, the server's clock."""

    p = "%s"
    text = "%s::text"
    key = '%s::text COLLATE "C"'
    json = "%s::json"
    array = "%s::text[]"
    each = "unnest(%s::text[]) AS value"
    true = "true"
    # The run row's lock orders a fenced write after a takeover of that run, and
    # settlers of one journal after each other.
    lock = " FOR UPDATE"
    # The ttl from the caller, added to the server's clock, which every machine shares.
    expiry = f"{PG_NOW} + %s"
    clock = f", {PG_NOW}"
    length = "octet_length"  # reads a TOASTed value's size from its header without fetching it
    each_of = "unnest({}) AS value"
    nul = False

    @staticmethod
    def ids(ids: Sequence[str]) -> Any:
        return list(ids)

    @staticmethod
    def in_ids(column: str) -> str:
        return f"{column} = ANY(%s::text[])"

    @staticmethod
    def in_values(column: str, values: Sequence[str]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(%s::text[])", [list(values)]

    @staticmethod
    def if_absent(insert: str) -> str:
        return f"{insert} ON CONFLICT DO NOTHING"

    @staticmethod
    def replacing(insert: str, key: str, columns: Sequence[str]) -> str:
        sets = ", ".join(f"{column} = EXCLUDED.{column}" for column in columns)
        return f"{insert} ON CONFLICT ({key}) DO UPDATE SET {sets}"

    @staticmethod
    def loads(value: Any) -> Any:
        return value  # the store registers orjson as psycopg's JSON loader: already parsed

    @staticmethod
    def limit(n: int) -> int:
        return max(n, 0)  # PostgreSQL refuses a negative LIMIT


def _values(*params: str) -> str:
    return f"({', '.join(params)})"


EFFECT_FIELDS = tuple(c.strip() for c in EFFECT_COLS.split(","))[2:]
"""The journal's columns after its key (run_id, request_id)."""


class Statements:
    """The shared statements in one dialect; a backend builds its one instance at import."""

    def __init__(self, d: Dialect) -> None:
        self.dialect = d
        self._runs(d, d.p)
        self._leases(d, d.p)
        self._checkpoints(d, d.p)
        self._blobs(d, d.p)
        self._journal(d, d.p)
        self._sizes(d, d.p)

    def _runs(self, d: Dialect, p: str) -> None:
        self.get_run = f"SELECT {RUN_COLS} FROM runs WHERE run_id = {p}"
        # lease_token 1: every run starts with the first token.
        # wake_at NULL: a run is never created waiting.
        # version: the code version in the row's metadata, as a column the claims filter
        # on (written once here; RunInfo.version reads the metadata, under the check).
        self.insert_run = f"INSERT INTO runs ({RUN_COLS}, version) VALUES " + _values(
            *[p] * 10, d.json, p, "1", d.expiry, p, p, "NULL", p
        )
        # latest_run_id: the most recently created run of the thread (ties by id).
        self.threads = f"""
            SELECT thread_id, count(*), max(updated_at),
                   (SELECT r2.run_id FROM runs r2 WHERE r2.thread_id = r.thread_id
                    ORDER BY r2.created_at DESC, r2.run_id DESC LIMIT 1)
            FROM runs r GROUP BY thread_id
            ORDER BY max(updated_at) DESC, thread_id DESC LIMIT {p}
        """
        # The wait columns are set by a waiting record and cleared by any other.
        self.move_head = (
            f"UPDATE runs SET head_checkpoint_id = {p}, status = {p}, step = {p}, error = {p},"
            f" updated_at = {p}, wake_at = {p}, wait_topics = {d.array}, wait_need = {p}"
            f" WHERE run_id = {p}"
        )
        # A waiting run wakes once ``wait_need`` of its topics have a pending event (the
        # event's name is its topic); effects_pending_events holds just those entries.
        self.wake = f"""
            UPDATE runs SET wake_at = {_common.WOKEN_MICROS}
            WHERE run_id = {p} AND status = 'waiting' AND wait_need > 0
              AND (wake_at IS NULL OR wake_at > {_common.WOKEN_MICROS})
              AND (SELECT count(*) FROM {d.each_of.format("runs.wait_topics")}
                   WHERE EXISTS (SELECT 1 FROM effects e WHERE e.run_id = runs.run_id
                     AND e.kind = '{EffectKind.EVENT.value}'
                     AND e.status = '{EffectStatus.PENDING.value}' AND e.name = value)
                  ) >= wait_need
        """
        self.fence = f"SELECT lease_token FROM runs WHERE run_id = {p}{d.lock}"
        self.cancel = f"UPDATE runs SET cancel_requested = {d.true} WHERE run_id = {p}"
        self.run_exists = f"SELECT 1 FROM runs WHERE run_id = {p}"
        # create_run(sole=True): what keeps a new run off its thread (runs_by_thread),
        # but the run itself (its create then finds it taken: a ConflictError).
        unfinished = ", ".join(f"'{s}'" for s in _common.UNFINISHED)
        self.thread_busy = (
            f"SELECT run_id, status FROM runs WHERE thread_id = {p} AND run_id <> {p}"
            f" AND status IN ({unfinished}) ORDER BY created_at DESC, run_id DESC LIMIT 1"
        )

    def _leases(self, d: Dialect, p: str) -> None:
        """The row (acquire, renew), a take (acquire, claim), a renewal, a release."""
        self.lease_row = (
            f"SELECT lease_owner, lease_token, lease_expires_at{d.clock}"
            f" FROM runs WHERE run_id = {p}{d.lock}"
        )
        self.take_lease = (
            f"UPDATE runs SET lease_owner = {p}, lease_token = {p}, lease_expires_at = {d.expiry}"
            f" WHERE run_id = {p}"
        )
        self.renew_lease = (
            f"UPDATE runs SET lease_expires_at = {d.expiry}"
            f" WHERE run_id = {p} AND lease_token = {p} AND lease_owner IS NOT NULL"
        )
        # lease_token stays: the next acquisition must still get a larger one.
        self.release_lease = (
            "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL"
            f" WHERE run_id = {p} AND lease_token = {p}"
        )

    def _checkpoints(self, d: Dialect, p: str) -> None:
        self.get_checkpoint = f"SELECT {RECORD_COLS} FROM checkpoints WHERE checkpoint_id = {p}"
        self.latest_checkpoint = (
            f"SELECT {RECORD_COLS} FROM checkpoints WHERE checkpoint_id ="
            f" (SELECT head_checkpoint_id FROM runs WHERE run_id = {p})"
        )
        self.thread_head = (
            f"SELECT {RECORD_COLS} FROM checkpoints WHERE thread_id = {p}"
            " ORDER BY checkpoint_id DESC LIMIT 1"
        )
        self.thread_newest = f"SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = {p}"
        self.checkpoint_exists = f"SELECT 1 FROM checkpoints WHERE checkpoint_id = {p}"
        self.insert_checkpoint = f"INSERT INTO checkpoints ({RECORD_COLS}) VALUES " + _values(
            *[p] * 8, d.json, d.json, *[p] * 6, d.array, p, p
        )
        self.checkpoint_owner = (
            f"SELECT run_id, thread_id FROM checkpoints WHERE checkpoint_id = {p}"
        )
        # rewrite replaces a record whole: every column but the id and what it belongs to,
        # in insert_checkpoint's order, then the id and owners the record was checked against.
        self.replace_checkpoint = f"""
            UPDATE checkpoints SET parent_id = {p}, step = {p}, node = {p}, status = {p},
                next = {p}, usage = {d.json}, metadata = {d.json}, created_at = {p},
                expires_at = {p}, format_version = {p}, state_version = {p}, size = {p},
                base_id = {p}, blobs = {d.array}, checksum = {p}, payload = {p}
            WHERE checkpoint_id = {p} AND run_id = {p} AND thread_id = {p}
        """
        # chain.cid is the id asked for at each depth; a NULL checkpoint row beside it
        # is a missing base. The depth bound stops a cycle (damaged data) from looping.
        self.chain = f"""
            WITH RECURSIVE chain (depth, cid) AS (
                VALUES (0, {d.key})
                UNION ALL
                SELECT chain.depth + 1, c.base_id FROM chain
                JOIN checkpoints c ON c.checkpoint_id = chain.cid
                WHERE c.base_id IS NOT NULL AND chain.depth < {_common.MAX_CHAIN}
            )
            SELECT chain.cid, {", ".join("c." + col.strip() for col in RECORD_COLS.split(","))}
            FROM chain LEFT JOIN checkpoints c ON c.checkpoint_id = chain.cid
            ORDER BY chain.depth
        """
        self.delete_checkpoints = f"DELETE FROM checkpoints WHERE {d.in_ids('checkpoint_id')}"
        self.delete_runs = f"DELETE FROM runs WHERE {d.in_ids('run_id')}"
        self.delete_thread_checkpoints = f"DELETE FROM checkpoints WHERE run_id IN (SELECT run_id FROM runs WHERE thread_id = {p})"
        self.delete_thread_runs = f"DELETE FROM runs WHERE thread_id = {p}"

    def _blobs(self, d: Dialect, p: str) -> None:
        """Blobs, and the references to them (``checkpoint_blobs``)."""
        self.get_blobs = f"SELECT digest, data FROM blobs WHERE {d.in_ids('digest')}"
        self.missing_blobs = (
            f"SELECT value FROM {d.each}"
            " WHERE NOT EXISTS (SELECT 1 FROM blobs WHERE blobs.digest = value)"
        )
        insert_blob = f"INSERT INTO blobs (digest, data, size) VALUES ({p}, {p}, {p})"
        # Insert-if-absent: a digest names its content, so stored bytes never change ...
        self.insert_blob = d.if_absent(insert_blob)
        # ... except in rewrite, which stores re-encrypted bytes under the same digest.
        self.upsert_blob = d.replacing(insert_blob, "digest", ("data", "size"))
        # The header may name a digest twice; the reference table holds the set.
        self.insert_refs = d.if_absent(
            f"INSERT INTO checkpoint_blobs (checkpoint_id, digest) SELECT {p}, value FROM {d.each}"
        )
        self.delete_refs = f"DELETE FROM checkpoint_blobs WHERE checkpoint_id = {p}"
        # One anti-join on the reference table's digest index, never a scan per blob.
        self.unreferenced_blob = (
            "NOT EXISTS (SELECT 1 FROM checkpoint_blobs cb WHERE cb.digest = blobs.digest)"
        )

    def _journal(self, d: Dialect, p: str) -> None:
        """Journal entries, and ``rewrite``'s replacements of entries and run rows."""
        self.get_effect = (
            f"SELECT {EFFECT_COLS} FROM effects WHERE run_id = {p} AND request_id = {p}"
        )
        insert_effect = f"INSERT INTO effects ({EFFECT_COLS}) VALUES " + _values(
            *[p] * 11, d.json, p, p, p
        )
        # The whole entry, over a stored one; the caller decides (in its transaction) that it may.
        self.replace_effect = d.replacing(insert_effect, "run_id, request_id", EFFECT_FIELDS)
        self.settle_effect = (
            f"UPDATE effects SET status = {p}, result = {p}, error = {p}, metadata = {d.json},"
            f" completed_at = {p}, checksum = {p} WHERE run_id = {p} AND request_id = {p}"
        )
        self.rewrite_effect = (
            f"UPDATE effects SET arguments = {p}, result = {p}, error = {p}, metadata = {d.json},"
            f" checksum = {p} WHERE run_id = {p} AND request_id = {p}"
        )
        self.rewrite_run = (
            f"UPDATE runs SET metadata = {d.json}, error = {p}, checksum = {p} WHERE run_id = {p}"
        )

    def _sizes(self, d: Dialect, p: str) -> None:
        # Correlated subqueries: each is a range scan of the run's index, so a thread
        # filter reads only that thread's rows.
        n = d.length
        self.run_sizes = f"""
            SELECT r.run_id, r.thread_id, r.status,
                (SELECT count(*) FROM checkpoints c WHERE c.run_id = r.run_id),
                (SELECT coalesce(sum({n}(c.payload)), 0) FROM checkpoints c
                    WHERE c.run_id = r.run_id) AS payload_bytes,
                (SELECT count(*) FROM effects e WHERE e.run_id = r.run_id),
                (SELECT coalesce(sum({n}(e.arguments) + coalesce({n}(e.result), 0)), 0)
                    FROM effects e WHERE e.run_id = r.run_id)
            FROM runs r WHERE {d.text} IS NULL OR r.thread_id = {p}
            ORDER BY payload_bytes DESC, r.run_id LIMIT {p}
        """
        self.stats = f"""
            SELECT (SELECT count(*) FROM runs),
                   (SELECT count(*) FROM checkpoints),
                   (SELECT coalesce(sum({n}(payload)), 0) FROM checkpoints),
                   (SELECT count(*) FROM blobs),
                   (SELECT coalesce(sum(size), 0) FROM blobs),
                   (SELECT count(*) FROM effects)
        """

    def list_runs(
        self,
        thread_id: str | None,
        status: str | None,
        limit: int,
        *,
        workflow: str | None = None,
        search: str | None = None,
        before: RunPosition | None = None,
    ) -> tuple[str, tuple[Any, ...]]:
        """The SELECT behind ``list_runs``: newest first, filtered, a page after ``before``.

        The keyset is ``(created_at, run_id)``, the ORDER BY's columns, so a page deep
        in the list reads as few index entries as the first (no OFFSET).
        """
        p = self.dialect.p
        where: list[str] = [self.dialect.true]
        params: list[Any] = []
        for column, value in (("thread_id", thread_id), ("status", status), ("workflow", workflow)):
            if value is not None:
                where.append(f"{column} = {p}")
                params.append(value)
        if search is not None:
            # LIKE's own wildcards in the text are matched as themselves.
            pattern = "%" + re.sub(r"([\\%_])", r"\\\1", search.lower()) + "%"
            where.append(
                f"(lower(run_id) LIKE {p} ESCAPE '\\' OR lower(thread_id) LIKE {p} ESCAPE '\\')"
            )
            params.extend((pattern, pattern))
        if before is not None:
            # A row value, which both planners turn into one range of the index.
            where.append(f"(created_at, run_id) < ({p}, {self.dialect.key})")
            params.extend((_common.to_micros(before.created_at), before.run_id))
        sql = (
            f"SELECT {RUN_COLS} FROM runs WHERE {' AND '.join(where)}"
            f" ORDER BY created_at DESC, run_id DESC LIMIT {p}"
        )
        return sql, (*params, self.dialect.limit(limit))

    def history(
        self,
        run_id: str,
        before: str | None,
        conditions: Sequence[str],
        params: Sequence[Any],
        limit: int | None,
    ) -> tuple[str, tuple[Any, ...]]:
        """The SELECT of a page of a run's headers (alias ``c``), newest first.

        ``before`` pages; ``conditions`` (with their ``params``, in order) filter.
        """
        p = self.dialect.p
        where, values = [f"c.run_id = {p}", *conditions], [run_id, *params]
        if before is not None:
            where.append(f"c.checkpoint_id < {p}")
            values.append(before)
        sql = (
            f"SELECT {HEADER_COLS} FROM checkpoints c WHERE {' AND '.join(where)}"
            f" ORDER BY c.checkpoint_id DESC LIMIT {p}"
        )
        return sql, (*values, limit)

    def list_effects(
        self,
        run_id: str | None,
        kinds: Sequence[EffectKind] | None,
        statuses: Sequence[EffectStatus] | None,
        request_prefix: str | None,
        limit: int,
    ) -> tuple[str, tuple[Any, ...]] | None:
        """The SELECT behind ``list_effects``; an empty ``kinds`` or ``statuses`` matches
        nothing, and so does a ``request_prefix`` no stored id can start with (None).

        With a ``request_prefix`` the rows come in request-id order and unlimited: the
        caller sorts and cuts them (see ``SqlStore.list_effects``)."""
        d = self.dialect
        where: list[str] = [d.true]
        params: list[Any] = []
        if run_id is not None:
            where.append(f"run_id = {d.p}")
            params.append(run_id)
        if request_prefix is not None:
            bounds = _common.prefix_range(request_prefix)
            if bounds is None or (not d.nul and "\x00" in request_prefix):
                return None
            # A range of the primary key (run_id, request_id), never LIKE: a literal prefix.
            where.append(f"request_id >= {d.key}")
            params.append(bounds[0])
            if bounds[1] is not None:
                where.append(f"request_id < {d.key}")
                params.append(bounds[1])
        for column, values in (
            ("kind", None if kinds is None else [EffectKind(k).value for k in kinds]),
            ("status", None if statuses is None else [EffectStatus(s).value for s in statuses]),
        ):
            if values is not None:
                condition, values_params = d.in_values(column, values)
                where.append(condition)
                params.extend(values_params)
        sql = f"SELECT {EFFECT_COLS} FROM effects WHERE {' AND '.join(where)}"
        if request_prefix is not None:
            # The primary key's own order, so the planner reads the range from it even
            # without statistics (a fresh PostgreSQL table): ordered by created_at it
            # may pick effects_by_run and walk the whole run's part of that index.
            return f"{sql} ORDER BY request_id", tuple(params)
        return f"{sql} ORDER BY created_at, request_id LIMIT {d.p}", (*params, max(limit, 0))
