"""The PostgreSQL store; the package docstring (:mod:`savegame.stores.postgres`) describes it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import orjson
import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.json import set_json_loads
from psycopg_pool import ConnectionPool

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
    EffectRecord,
    Lease,
    RunInfo,
    RunStatus,
    utcnow,
)
from savegame.stores import _common
from savegame.stores.base import Capabilities, ThreadInfo, Written
from savegame.stores.postgres import _schema as postgres_schema
from savegame.stores.postgres import _statements as q
from savegame.stores.postgres._engine import PostgresEngine

_CAPABILITIES = Capabilities(persistent=True, multi_process=True)
_SCHEMES = ("postgresql", "postgres")
_DEFAULTS = {"pool_min": 1, "pool_max": 10, "pool_timeout": 30.0}

Conn = psycopg.Connection[tuple[Any, ...]]


def parse_url(url: str) -> tuple[str, dict[str, Any]]:
    """Split a ``postgresql://`` URL into (libpq conninfo URL, PostgresStore keyword options).

    Raises:
        ConfigurationError: another scheme, or a bad value for one of our options.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in _SCHEMES:
        raise ConfigurationError(f"not a PostgreSQL store URL: expected postgresql://, got {url!r}")
    options: dict[str, Any] = {}
    libpq: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "schema":
            options["schema"] = value
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
    query += [(k, str(v)) for k, v in options.items() if v is not None and v != _DEFAULTS.get(k)]
    path = "/" + quote(dbname, safe="") if dbname else ""
    return f"postgresql://{netloc}{path}" + (f"?{urlencode(query)}" if query else "")


class PostgresStore(PostgresEngine):
    """A store in a PostgreSQL database, shared by any number of processes.

    Args:
        conninfo: a libpq connection string or ``postgresql://`` URL (without our options).
        schema: keep the tables in this schema, created when missing; None uses the
            connection's current schema.
        pool_min: connections the pool keeps open.
        pool_max: most connections the pool opens; more concurrent calls wait.
        pool_timeout: seconds a call waits for a free connection.

    Raises:
        ConfigurationError: the server cannot be reached or refuses the login, a bad
            option, or a schema written by a newer savegame.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str | None = None,
        pool_min: int = 1,
        pool_max: int = 10,
        pool_timeout: float = 30.0,
    ) -> None:
        if not 0 <= pool_min <= pool_max or pool_max < 1 or not pool_timeout > 0:
            raise ConfigurationError(
                f"bad pool settings pool_min={pool_min}, pool_max={pool_max}, "
                f"pool_timeout={pool_timeout}: need 0 <= pool_min <= pool_max, pool_max >= 1, "
                "pool_timeout > 0"
            )
        self._schema = schema
        self._search_path = None if schema is None else postgres_schema.quote_ident(schema)
        options = {"schema": schema, "pool_min": pool_min, "pool_max": pool_max}
        try:
            self._url = public_url(conninfo, {**options, "pool_timeout": pool_timeout})
        except psycopg.ProgrammingError as exc:  # conninfo syntax
            raise ConfigurationError(f"bad PostgreSQL connection string: {exc}") from None
        # Migrate on a connection of its own: a refused login or an unknown
        # database surfaces here, now, with the server's message, rather than
        # as a pool timeout on the first call.
        try:
            with psycopg.connect(conninfo, autocommit=True) as conn:
                postgres_schema.migrate(conn, schema)
        except psycopg.OperationalError as exc:
            raise ConfigurationError(f"cannot open the store {self._url}: {exc}") from exc
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            conninfo,
            min_size=pool_min,
            max_size=pool_max,
            timeout=pool_timeout,
            kwargs={"autocommit": True},
            configure=self._configure,
            name="savegame",
            open=False,
        )
        self._pool.open(wait=False)

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
        if self._search_path is not None:
            conn.execute(f"SET search_path TO {self._search_path}")

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
        header, params = first.header, q.checkpoint_params(first)
        new_blobs = _common.check_blobs(blobs)
        with self._tx() as conn:
            # Unowned (owner None): NULL + ttl leaves no expiry, so the run is claimable at once.
            row = conn.execute(
                f"INSERT INTO runs ({q.RUN_COLS}) VALUES"
                f" (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::json, %s, 1, {q.NOW} + %s, %s, %s)"
                f" ON CONFLICT (run_id) DO NOTHING RETURNING lease_expires_at, {q.NOW}",
                (
                    run.run_id, run.thread_id, run.workflow, run.workflow_ref,
                    RunStatus(header.status).value, header.step, first.checkpoint_id,
                    _common.to_micros(run.created_at), _common.to_micros(run.updated_at),
                    run.error, meta, owner, None if owner is None else ttl,
                    bool(run.cancel_requested), run.checksum,
                ),
            ).fetchone()  # fmt: skip
            if row is None:
                raise ConflictError(f"run {run.run_id} exists already")
            q.insert_checkpoint(conn, first, params, new_blobs)
        # Unowned: a lease nobody holds, expired from the start.
        return Lease(run.run_id, owner or "", 1, row[1] if row[0] is None else row[0])

    def list_runs(
        self,
        *,
        thread_id: str | None = None,
        status: RunStatus | None = None,
        limit: int = 100,
    ) -> list[RunInfo]:
        rows = self._read(
            f"SELECT {q.RUN_COLS} FROM runs"
            " WHERE (%(thread)s::text IS NULL OR thread_id = %(thread)s)"
            " AND (%(status)s::text IS NULL OR status = %(status)s)"
            " ORDER BY created_at DESC, run_id DESC LIMIT %(limit)s",
            {
                "thread": thread_id,
                "status": None if status is None else RunStatus(status).value,
                "limit": max(limit, 0),
            },
        )
        return [q.run_info(row) for row in rows]

    def list_threads(self, *, limit: int = 100) -> list[ThreadInfo]:
        rows = self._read(q.THREADS, (max(limit, 0),))
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
        params = q.checkpoint_params(record)
        move = (
            "UPDATE runs SET head_checkpoint_id = %(id)s, status = %(status)s, step = %(step)s,"
            " error = %(error)s, updated_at = %(now)s WHERE run_id = %(run)s"
        )
        returning = " RETURNING cancel_requested"
        values = {
            "id": header.checkpoint_id, "status": RunStatus(header.status).value,
            "step": header.step, "error": error, "now": _common.to_micros(utcnow()),
            "run": header.run_id, "token": lease_token,
        }  # fmt: skip
        with self._tx() as conn:
            # The fenced UPDATE takes the row lock the fence would and checks the token
            # in the same round trip; only a miss asks why (and raises). A later failure
            # rolls it all back, so the order inside the transaction does not matter.
            fenced = " AND (%(token)s::bigint IS NULL OR lease_token = %(token)s)"
            row = conn.execute(move + fenced + returning, values).fetchone()
            if row is None:
                self._fence(conn, header.run_id, lease_token)
                row = conn.execute(move + returning, values).fetchone()
            q.insert_checkpoint(conn, record, params, new_blobs)
            if journal:
                with conn.cursor() as cur:
                    cur.executemany(q.UPSERT_EFFECT, [q.effect_params(e) for e in journal])
        return Written(bool(row and row[0]))

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
        found = q.metadata_filter(wanted)
        out: list[CheckpointHeader] = []
        while found is not None:
            # Pages until ``limit`` headers pass the exact rule (the SQL only narrows).
            want = None if limit is None else max(limit, 0) - len(out)
            where, params = [found[0], "c.run_id = %s"], [*found[1], run_id]
            if before is not None:
                where.append("c.checkpoint_id < %s")
                params.append(before)
            rows = self._read(
                f"SELECT {q.HEADER_COLS} FROM checkpoints c WHERE {' AND '.join(where)}"
                " ORDER BY c.checkpoint_id DESC LIMIT %s",
                (*params, want),
            )
            kept = [h for h in map(q.header, rows) if _common.matches(h.metadata, wanted)]
            out.extend(kept)
            if want is None or len(rows) < want or len(kept) == len(rows):
                break
            before = rows[-1][2]
        if not out and not self._read("SELECT 1 FROM runs WHERE run_id = %s", (run_id,)):
            raise NotFoundError("run", run_id)
        return out

    # -- leases ---------------------------------------------------------------------
    def claim_run(
        self, owner: str, ttl: float, *, workflows: Sequence[str] | None = None
    ) -> Lease | None:
        ttl = _common.check_ttl(ttl)
        wanted = _common.check_workflows(workflows)
        with self._tx() as conn:
            # SKIP LOCKED: a row another claimer (or acquirer) holds is passed
            # over, not waited for, so concurrent claimers take different runs.
            row = conn.execute(q.CLAIM, {"workflows": wanted}).fetchone()
            if row is None:
                return None
            run_id, token = row
            row = conn.execute(
                f"UPDATE runs SET lease_owner = %s, lease_token = %s,"
                f" lease_expires_at = {q.NOW} + %s WHERE run_id = %s RETURNING lease_expires_at",
                (owner, token + 1, ttl, run_id),
            ).fetchone()
        if row is None:  # unreachable: this transaction held the row locked
            raise NotFoundError("run", run_id)
        return Lease(run_id, owner, token + 1, row[0])

    def acquire_lease(
        self, run_id: str, owner: str, ttl: float, *, takeover_token: int | None = None
    ) -> Lease:
        ttl = _common.check_ttl(ttl)
        with self._tx() as conn:
            # The row lock makes the check and the swap one step against other
            # acquirers; ``now`` read before a lock wait is earlier, never
            # later, so it can only judge a lease live a moment longer.
            row = conn.execute(
                f"SELECT lease_owner, lease_token, lease_expires_at, {q.NOW}"
                " FROM runs WHERE run_id = %s FOR UPDATE",
                (run_id,),
            ).fetchone()
            if row is None:
                raise NotFoundError("run", run_id)
            holder, token, expires_at, now = row
            if (
                holder is not None
                and expires_at is not None
                and expires_at > now
                and takeover_token != token
            ):
                raise LeaseHeldError(run_id, holder, expires_at - now)
            row = conn.execute(
                f"UPDATE runs SET lease_owner = %s, lease_token = %s,"
                f" lease_expires_at = {q.NOW} + %s WHERE run_id = %s RETURNING lease_expires_at",
                (owner, token + 1, ttl, run_id),
            ).fetchone()
        if row is None:  # unreachable: this transaction held the row locked
            raise NotFoundError("run", run_id)
        return Lease(run_id, owner, token + 1, row[0])

    def renew_lease(self, run_id: str, token: int, ttl: float) -> Lease:
        ttl = _common.check_ttl(ttl)
        with self._tx() as conn:
            row = conn.execute(
                f"UPDATE runs SET lease_expires_at = {q.NOW} + %s"
                " WHERE run_id = %s AND lease_token = %s AND lease_owner IS NOT NULL"
                " RETURNING lease_owner, lease_expires_at",
                (ttl, run_id, token),
            ).fetchone()
            if row is None:
                self._fence(conn, run_id, None)
                raise LeaseLostError(run_id, token)
        return Lease(run_id, row[0], token, row[1])

    def release_lease(self, run_id: str, token: int) -> None:
        with self._tx() as conn:
            # lease_token stays: the next acquisition must still get a larger one.
            done = conn.execute(
                "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL"
                " WHERE run_id = %s AND lease_token = %s",
                (run_id, token),
            ).rowcount
            if not done:
                self._fence(conn, run_id, None)

    def close(self) -> None:
        """Close the pool; later calls raise ``psycopg_pool.PoolClosed``."""
        self._pool.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self._url!r})"
