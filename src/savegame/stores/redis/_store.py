"""The Redis store; the package docstring (:mod:`savegame.stores.redis`) describes it."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import orjson
import redis

from savegame.errors import (
    ConfigurationError,
    ConflictError,
    CorruptRecordError,
    LeaseHeldError,
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
from savegame.stores.base import Capabilities, Put, PutResult, RunPosition, ThreadInfo
from savegame.stores.redis import _rows as rows
from savegame.stores.redis._client import BATCH
from savegame.stores.redis._journal import RedisJournal
from savegame.stores.redis._layout import check_layout
from savegame.stores.redis._scripts import SCRIPTS
from savegame.stores.redis._storage import RedisStorage

DEFAULT_PREFIX = "savegame"
_PREFIX = re.compile(r"[A-Za-z0-9_.\-]+")

_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()

#: Says, once per process and server, when the server's persistence cannot promise
#: that a saved checkpoint survives (a log line: a library's warning is the
#: application's to show or silence, with no source line of ours in it).
log = logging.getLogger("savegame.stores.redis")


def parse_url(url: str) -> tuple[str, str]:
    """Split a ``redis://`` or ``rediss://`` URL into (the URL for redis-py, key prefix).

    Raises:
        ConfigurationError: another scheme, or a prefix other than letters, digits, ``_.-``.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        raise ConfigurationError(
            f"not a Redis store URL: {redact_url(url)!r} (expected redis:// or rediss://)"
        )
    driver_url, ours = _split_query(url, ("prefix",))
    prefix = ours.get("prefix", DEFAULT_PREFIX)
    if not _PREFIX.fullmatch(prefix):
        raise ConfigurationError(
            f"bad Redis store URL {redact_url(url)!r}: prefix must be letters, digits, '_', '.' or '-'"
        )
    return driver_url, prefix


def _split_query(url: str, names: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """``url`` without the query parameters ``names``, and their values (the last of a
    repeated one)."""
    parts = urlsplit(url)
    rest, taken = [], {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in names:
            taken[key] = value
        else:
            rest.append((key, value))
    return urlunsplit(parts._replace(query=urlencode(rest))), taken


_POOL_OPTIONS = ("pool_max", "max_connections", "pool_timeout")


def _client(driver_url: str) -> redis.Redis:
    """The client of a driver URL. With a bounded pool (``pool_max``, as on PostgreSQL, or
    redis-py's ``max_connections``) a call waits up to ``pool_timeout`` seconds (30) for a
    free connection: a worker's slots share one handle, and redis-py's plain pool raises
    "Too many connections" past its max instead. Without, the plain unbounded pool.

    Raises:
        ValueError: a pool option that is not a number.
    """
    rest, given = _split_query(driver_url, _POOL_OPTIONS)
    if not given:
        return redis.Redis.from_url(driver_url)
    size = given.get("pool_max") or given.get("max_connections") or "50"
    pool = redis.BlockingConnectionPool.from_url(
        rest, max_connections=int(size), timeout=float(given.get("pool_timeout") or 30.0)
    )
    return redis.Redis.from_pool(pool)


def durability(client: redis.Redis) -> tuple[bool, str | None]:
    """(whether the server persists every write, what is missing when it does not)."""
    try:
        config = cast(dict[str, str], client.config_get("append*"))
    except redis.ResponseError:  # CONFIG renamed or denied, as on most managed services
        return False, "its persistence settings cannot be read (CONFIG GET is not allowed)"
    if config.get("appendonly") != "yes":
        return False, "appendonly is no, so a restart loses writes since the last snapshot"
    fsync = config.get("appendfsync")
    if fsync not in ("always", "everysec"):
        return False, f"appendfsync is {fsync}, so the OS decides when writes reach the disk"
    return True, None


def _micros(seconds: float) -> str:
    return str(round(seconds * 1_000_000))


_UNFINISHED = orjson.dumps(list(_common.UNFINISHED))


def _blob_args(blobs: Mapping[str, bytes] | None) -> list[str | bytes | int]:
    """The blobs a write brings, as the scripts' ``put_blobs`` reads them: a count, then pairs."""
    given = _common.check_blobs(blobs)
    return [len(given), *(x for item in given.items() for x in item)]


def _check_missing(reply: list[Any], checkpoint_id: str) -> None:
    """Raises ConflictError when the script refused a record naming blobs neither given nor stored."""
    if reply[0] == b"missing":
        raise _common.missing_blob_error(checkpoint_id, [d.decode() for d in reply[1:]])


class RedisStore(RedisJournal, RedisStorage):
    """A store in a Redis database, under one key prefix.

    Script and pipeline calls come from :class:`~savegame.stores.redis._client.RedisClient`,
    the journal from :class:`~savegame.stores.redis._journal.RedisJournal`, the
    storage-engine methods (chains, blobs, pruning, rewrite, sizes, stats) from
    :class:`~savegame.stores.redis._storage.RedisStorage`.

    Args:
        client: a redis-py client made with ``decode_responses=False`` (the default).
        prefix: the key prefix; stores with different prefixes never see each other.
        url: the URL to report as :attr:`url` (without secrets); built from the client if None.
        owns_client: close the client in :meth:`close`.

    Raises:
        ConfigurationError: a bad prefix, or keys written by a newer savegame.
        StoreUnavailableError: the server cannot be reached or refuses the login.
    """

    def __init__(
        self,
        client: redis.Redis,
        *,
        prefix: str = DEFAULT_PREFIX,
        url: str | None = None,
        owns_client: bool = False,
    ) -> None:
        kwargs = client.connection_pool.connection_kwargs
        if not _PREFIX.fullmatch(prefix):
            raise ConfigurationError(f"bad Redis key prefix {prefix!r}")
        if kwargs.get("decode_responses"):
            raise ConfigurationError("RedisStore needs a client with decode_responses=False")
        self._client = client
        self._prefix = prefix
        self._p = f"{{{prefix}}}:"
        where = (
            kwargs.get("path") or f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
        )
        self._server = f"{where}/{kwargs.get('db', 0)}"
        self._url = url or f"redis://{self._server}?prefix={prefix}"
        self._owns_client = owns_client
        self._scripts = {name: client.register_script(src) for name, src in SCRIPTS.items()}
        try:
            check_layout(client, self._p, prefix)
            persistent, problem = durability(client)
        except BaseException as exc:
            self.close()
            # AuthenticationError is a ConnectionError too; a TimeoutError is a server
            # that accepted the connection and never answered.
            if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
                raise StoreUnavailableError(self._url, str(exc)) from exc
            raise
        self._capabilities = Capabilities(
            persistent=persistent, multi_process=True, waits=True, group_commit=True, pooled=True
        )
        if problem is not None:
            self._warn_once(problem)

    @classmethod
    def from_url(cls, url: str) -> RedisStore:
        """Open the store a ``redis://`` or ``rediss://`` URL names (see :func:`parse_url`)."""
        driver_url, prefix = parse_url(url)
        try:
            client = _client(driver_url)
        except (ValueError, TypeError) as exc:
            raise ConfigurationError(
                f"bad Redis store URL {redact_url(url)!r}: {redact(str(exc), url)}"
            ) from None  # the driver's message, unredacted, would be in a traceback
        return cls(client, prefix=prefix, url=redact_url(url), owns_client=True)

    @property
    def url(self) -> str:
        return self._url

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def capabilities(self) -> Capabilities:
        return self._capabilities

    def _warn_once(self, problem: str) -> None:
        # Once per server and problem: reopening a store (every CLI command, a
        # second handle) must not repeat what the process was already told.
        with _warned_lock:
            if (self._server, problem) in _warned:
                return
            _warned.add((self._server, problem))
        log.warning(
            "Redis at %s may lose saved checkpoints: %s; set appendonly yes and "
            "appendfsync always (or everysec) on the server",
            self._server,
            problem,
        )

    # -- runs -------------------------------------------------------------------
    def create_run(
        self,
        run: RunInfo,
        first: CheckpointRecord,
        *,
        owner: str | None,
        ttl: float,
        blobs: Mapping[str, bytes] | None = None,
        sole: bool = False,
    ) -> Lease:
        _common.check_first(run.run_id, run.thread_id, first.run_id, first.header.thread_id)
        ttl = _common.check_ttl(ttl)
        fields = rows.run_fields(run, first.header)
        flat = [x for pair in fields.items() for x in pair]
        reply = self._call(
            "create_run", run.run_id, run.thread_id, fields["status"], fields["created_at"],
            fields["updated_at"], owner or "", "" if owner is None else _micros(ttl), len(fields),
            *flat, *rows.checkpoint_args(first), *_blob_args(blobs),
            "1" if sole else "", first.header.parent_id or "", _UNFINISHED,
        )  # fmt: skip
        if reply[0] == b"conflict":
            if reply[1] == b"run":
                raise ConflictError(f"run {run.run_id} exists already")
            raise ConflictError(f"checkpoint {first.checkpoint_id} exists already")
        if reply[0] == b"busy":
            _common.check_sole(first, busy=(reply[1].decode(), reply[2].decode()), newest=None)
        if reply[0] == b"moved":
            _common.check_sole(first, busy=None, newest=reply[1].decode() or None)
        _check_missing(reply, first.checkpoint_id)
        return Lease(run.run_id, owner or "", 1, rows.expires_at(reply[1]))

    def get_run(self, run_id: str) -> RunInfo:
        row = cast(dict[bytes, bytes], self._client.hgetall(self._key("run", run_id)))
        if not row:
            raise NotFoundError("run", run_id)
        return rows.run_info(row)

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
        if thread_id is not None:
            index = self._key("truns", thread_id)
        elif status is not None:
            index = self._key("status", RunStatus(status).value)
        else:
            index = self._p + "runs"
        wanted = None if status is None else RunStatus(status).value
        # The indexes are scored by created_at: a later page starts at its score.
        top = "+inf" if before is None else _common.to_micros(before.created_at)
        out: list[RunInfo] = []
        start = 0
        while len(out) < limit:
            found = self._client.zrevrangebyscore(index, top, "-inf", start=start, num=BATCH)
            ids = [m.decode() for m in cast(list[bytes], found)]
            for row in self._pipeline(ids, "hgetall", "run"):
                info = rows.run_info(row) if row else None  # empty: deleted meanwhile
                if info is not None and _common.run_wanted(
                    info,
                    thread_id=thread_id,
                    status=wanted,
                    workflow=workflow,
                    search=search,
                    before=before,
                ):
                    out.append(info)
            if len(ids) < BATCH:
                break
            start += BATCH
        return out[: max(limit, 0)]

    def list_threads(self, *, limit: int = 100) -> list[ThreadInfo]:
        if limit <= 0:
            return []
        scored = cast(
            list[tuple[bytes, float]],
            self._client.zrevrange(self._p + "threads", 0, limit - 1, withscores=True),
        )
        tids = [tid.decode() for tid, _ in scored]
        counts = self._pipeline(tids, "zcard", "truns")
        latest = self._pipeline(tids, "zrevrange", "truns", 0, 0)
        return [
            ThreadInfo(tid, int(n), newest[0].decode(), score / 1e6)
            for tid, (_, score), n, newest in zip(tids, scored, counts, latest, strict=True)
            if n and newest
        ]

    # -- checkpoints --------------------------------------------------------------
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
        return self._written(put, self._call("put_checkpoint", *self._put_args(put)))

    def put_checkpoints(self, puts: Sequence[Put]) -> list[PutResult | Exception]:
        """The puts' scripts in one MULTI/EXEC: one round trip, and the server runs them
        one after another with nothing between (a connection lost before EXEC runs none).
        Each script is atomic and refuses alone, as in a savepoint."""
        done: list[PutResult | Exception | None] = [None] * len(puts)
        sent: list[tuple[int, list[bytes | str | int]]] = []
        pipe = self._client.pipeline(transaction=True)
        script = self._scripts["put_checkpoint"]
        for i, put in enumerate(puts):
            try:
                args = self._put_args(put)
            except (SavegameError, ValueError) as exc:
                done[i] = exc
                continue
            script(args=[self._p, *args], client=pipe)
            sent.append((i, args))
        if sent:
            # Replies in order; a script's own error comes back in its place.
            for (i, args), reply in zip(sent, pipe.execute(raise_on_error=False), strict=True):
                try:
                    if isinstance(reply, redis.exceptions.NoScriptError):
                        # The server's scripts were flushed (SCRIPT FLUSH, a restart, a
                        # failover) after the pipeline loaded them: this script never ran,
                        # so it runs alone, which loads it again, as put_checkpoint does.
                        reply = self._call("put_checkpoint", *args)
                    if isinstance(reply, Exception):
                        raise reply
                    done[i] = self._written(puts[i], reply)
                except (SavegameError, ValueError, redis.ResponseError) as exc:
                    done[i] = exc
        out = [x for x in done if x is not None]
        assert len(out) == len(puts)  # every put has its reply or its refusal
        return out

    @staticmethod
    def _put_args(put: Put) -> list[bytes | str | int]:
        """The put_checkpoint script's arguments after the prefix, the put checked."""
        record = put.record
        header = record.header
        journal = _common.check_effects(header.run_id, put.effects)
        until, topics, need = _common.check_waiting(header.run_id, header.status, put.waiting)
        others = [_common.check_event(e) for e in put.events]
        entries = [x for e in journal for x in (e.request_id, rows.entry(e))]
        delivered = [x for e in others for x in (e.run_id, e.request_id, rows.entry(e))]
        wait: list[str | bytes | int] = [
            "" if until is None else str(until),
            _common.json_dumps(topics, "topics"),
            need,
        ]
        error = put.error
        return [
            header.run_id, str(put.lease_token), RunStatus(header.status).value,
            str(header.step), str(_common.to_micros(utcnow())), "0" if error is None else "1",
            error or "", *rows.checkpoint_args(record), len(journal), *entries,
            *_blob_args(put.blobs), *wait, len(others), *delivered,
        ]  # fmt: skip

    def _written(self, put: Put, reply: list[Any]) -> PutResult:
        """The script's reply as put_checkpoint returns it, or the error it refused with."""
        record = put.record
        if reply[0] == b"corrupt":  # refused before its first write: nothing of it stored
            raise CorruptRecordError(
                record.run_id, f"key {reply[1].decode()} is a {reply[2].decode()} (edited?)"
            )
        if self._checked(reply, record.run_id, token=put.lease_token)[0] == b"conflict":
            raise ConflictError(f"checkpoint {record.checkpoint_id} exists already")
        _check_missing(reply, record.checkpoint_id)
        return PutResult(reply[1] == b"1")

    def get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord:
        h, payload, checksum, size = cast(
            list[bytes | None],
            self._client.hmget(self._key("cp", checkpoint_id), ["h", "p", "c", "size"]),
        )
        if h is None or payload is None or checksum is None or size is None:
            raise NotFoundError("checkpoint", checkpoint_id)
        return rows.record(h, payload, checksum, size)

    def latest_checkpoint(self, run_id: str) -> CheckpointRecord:
        head = cast(bytes | None, self._client.hget(self._key("run", run_id), "head"))
        if head is None:
            raise NotFoundError("run", run_id)
        return self.get_checkpoint(head.decode())

    def thread_head(self, thread_id: str) -> CheckpointRecord | None:
        ids = cast(
            list[bytes], self._client.zrevrangebylex(self._key("tcps", thread_id), "+", "-", 0, 1)
        )
        return self.get_checkpoint(ids[0].decode()) if ids else None

    def list_checkpoints(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        before: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[CheckpointHeader]:
        """A run's history, newest first; metadata filters follow :func:`_common.matches`."""
        wanted = _common.check_filter(metadata)
        index = self._key("cps", run_id)
        high = "+" if before is None else f"({before}"
        page = BATCH if wanted or limit is None else max(min(limit, BATCH), 1)
        out: list[CheckpointHeader] = []
        while limit is None or len(out) < limit:
            found = self._client.zrevrangebylex(index, high, "-", 0, page)
            ids = [m.decode() for m in cast(list[bytes], found)]
            for h, size in self._pipeline(ids, "hmget", "cp", "h", "size"):
                if h is None:  # deleted since the index was read
                    continue
                header = rows.header(h, size)
                if _common.matches(header.metadata, wanted):
                    out.append(header)
            if len(ids) < page:
                break
            high = f"({ids[-1]}"
        if not out and not self._client.exists(self._key("run", run_id)):
            raise NotFoundError("run", run_id)
        return out if limit is None else out[: max(limit, 0)]

    # -- leases ---------------------------------------------------------------------
    def claim_run(
        self,
        owner: str,
        ttl: float,
        *,
        workflows: Sequence[str] | None = None,
        versions: Sequence[str] | None = None,
    ) -> Lease | None:
        ttl = _common.check_ttl(ttl)
        wanted = _common.check_workflows(workflows)
        codes = _common.check_workflows(versions, "versions")
        # Each filter as its count then its names ('' for none: any).
        names: list[str] = [""] if wanted is None else [str(len(wanted)), *wanted]
        names += [""] if codes is None else [str(len(codes)), *codes]
        # Woken runs by this process's clock, the one their due times were computed on.
        now = str(_common.to_micros(utcnow()))
        reply = self._call("claim_run", owner, _micros(ttl), now, *names)
        if reply[0] == b"none":
            return None
        return Lease(reply[1].decode(), owner, int(reply[2]), rows.expires_at(reply[3]))

    def acquire_lease(
        self, run_id: str, owner: str, ttl: float, *, takeover_token: int | None = None
    ) -> Lease:
        ttl = _common.check_ttl(ttl)
        takeover = "" if takeover_token is None else str(takeover_token)
        reply = self._checked(
            self._call("acquire_lease", run_id, owner, _micros(ttl), takeover), run_id, token=None
        )
        if reply[0] == b"held":
            expires_in = (int(reply[2]) - int(reply[3])) / 1e6
            raise LeaseHeldError(run_id, reply[1].decode(), expires_in)
        return Lease(run_id, owner, int(reply[1]), rows.expires_at(reply[2]))

    def renew_lease(self, run_id: str, token: int, ttl: float) -> Lease:
        ttl = _common.check_ttl(ttl)
        reply = self._checked(
            self._call("renew_lease", run_id, str(token), _micros(ttl)), run_id, token=token
        )
        return Lease(run_id, reply[1].decode(), token, rows.expires_at(reply[2]))

    def release_lease(self, run_id: str, token: int) -> None:
        self._checked(self._call("release_lease", run_id, str(token)), run_id, token=token)

    # -- housekeeping -------------------------------------------------------------------
    def close(self) -> None:
        """Close the client when this store made it (:meth:`from_url`)."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> RedisStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RedisStore({self.url!r})"
