"""Stores: one protocol, several backends, picked by URL.

``open_store`` imports a backend module only when its scheme is asked for, so
backends that need a driver (PostgreSQL, Redis) cost nothing until used and can
live in optional extras (``savegame[postgres]``).

Where things are::

    base.py           the Store protocol, its invariants, capabilities, records
    schedules.py      ScheduleStore (Capabilities.schedules): the schedule record, firing
    _queues.py        queues with limits: Queue, Enqueue, QueueStats, the QueueStore
                      protocol (SQLite and PostgreSQL; each backend's SQL in its _queues.py)
    _common.py        the rules every backend shares (time, JSON, filters, journal)
    memory/           MemoryStore: _store.py, _state.py (the state and its lookups),
                      _storage.py (the storage engine's methods), _schedules.py
    _sql/             what SQLite and PostgreSQL share: rows.py (columns, row
                      decoding), statements.py (the dialects, the shared SQL),
                      store.py (SqlStore: the methods written once for both),
                      schedules.py (SqlSchedules: schedules, written once for both)
    sqlite/           SqliteStore: _store.py, _schema.py (migrations), _statements.py
    postgres/         PostgresStore: _store.py, _schema.py (migrations), _statements.py
    redis/            RedisStore: _store.py, _journal.py, _storage.py, _client.py,
                      _layout.py (keys, version), _scripts.py (Lua), _rows.py
    objects/          ObjectStorageStore, a wrapper: _store.py, _delegated.py,
                      _bucket.py (markers, S3), _url.py
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

from savegame.errors import ConfigurationError, NotFoundError
from savegame.redaction import redact_url
from savegame.stores._queues import (
    DuplicateRunError,
    Enqueue,
    Queue,
    QueueStats,
    QueueStore,
    check_enqueue,
    queue_declared,
    queue_store,
)
from savegame.stores.base import (
    BatchStore,
    Capabilities,
    Put,
    PutResult,
    RunPosition,
    Store,
    StoreStats,
    ThreadInfo,
    Written,
)

# Both are stdlib-only, so exporting them eagerly costs nothing; driver-backed
# stores are reached only through open_store's lazy table below.
from savegame.stores.memory import MemoryStore
from savegame.stores.sqlite import SqliteStore

#: The store used when neither an argument nor ``SAVEGAME_STORE`` names one.
DEFAULT_URL = "sqlite:///savegame.db"
ENV_VAR = "SAVEGAME_STORE"


class _Backend(NamedTuple):
    module: str
    cls: str
    extra: str | None
    """The pip extra that installs its driver, named in the error when the import fails."""
    in_a_file: bool = False
    """Opening creates the store if it is not there (``from_url`` takes ``create=``)."""


# A new backend is one entry here plus a class with ``from_url(url)``;
# e.g. "postgresql": _Backend("savegame.stores.postgres", "PostgresStore", "postgres").
_BACKENDS: dict[str, _Backend] = {
    "memory": _Backend("savegame.stores.memory", "MemoryStore", extra=None),
    "postgres": _Backend("savegame.stores.postgres", "PostgresStore", extra="postgres"),
    "postgresql": _Backend("savegame.stores.postgres", "PostgresStore", extra="postgres"),
    "sqlite": _Backend("savegame.stores.sqlite", "SqliteStore", extra=None, in_a_file=True),
    "redis": _Backend("savegame.stores.redis", "RedisStore", extra="redis"),
    "rediss": _Backend("savegame.stores.redis", "RedisStore", extra="redis"),
}


def open_store(url: str | Store | None = None, *, create: bool = True) -> Store:
    """Open the store a URL names.

    Args:
        url: ``memory://``, ``memory://NAME``, ``sqlite:///relative.db``,
            ``sqlite:////absolute.db`` (optionally ``?synchronous=normal``),
            ``postgresql://user@host/db`` or ``postgres://`` (optionally
            ``?schema=NAME&pool_max=N``),
            ``redis://host:port/db`` or ``rediss://`` (optionally ``?prefix=name``), or a
            Store, returned as is. Any of them with ``objects=s3://bucket/prefix``
            (optionally ``&endpoint=URL&region=R&threshold=BYTES``) keeps large
            bodies in that bucket (:mod:`savegame.stores.objects`, ``savegame[s3]``).
            None reads ``SAVEGAME_STORE``, falling back to ``sqlite:///savegame.db``
            in the current directory.
        create: False to refuse a store that is not there rather than make an
            empty one: an SQLite file that does not exist. (A server store is
            there or cannot be reached; ``memory://`` lives in this process.)

    Raises:
        ConfigurationError: an unknown scheme, a malformed URL, or a missing driver.
        StoreNotFoundError: ``create`` is False and the store does not exist.
    """
    if url is None:
        url = os.environ.get(ENV_VAR) or DEFAULT_URL
    if not isinstance(url, str):
        return url
    if "objects=" in url:
        from savegame.stores.objects import has_objects_param, open_with_objects

        if has_objects_param(url):
            return open_with_objects(url, lambda inner: open_store(inner, create=create))
    scheme, sep, _ = url.partition("://")
    backend = _BACKENDS.get(scheme.lower()) if sep else None
    if backend is None:
        supported = ", ".join(f"{name}://" for name in sorted(_BACKENDS))
        raise ConfigurationError(
            f"unknown store URL {redact_url(url)!r}: supported schemes are {supported}"
        )
    try:
        module = importlib.import_module(backend.module)
    except ImportError as exc:
        hint = (
            f"; install it with: pip install 'savegame[{backend.extra}]'" if backend.extra else ""
        )
        raise ConfigurationError(
            f"the {scheme}:// store needs a driver that is not installed ({exc}){hint}"
        ) from exc
    opener = getattr(module, backend.cls).from_url
    store: Store = opener(url, create=False) if backend.in_a_file and not create else opener(url)
    return store


@contextmanager
def naming(store: Store) -> Iterator[Store]:
    """``store``, for a block of calls: a :class:`~savegame.errors.NotFoundError` raised
    inside is told which store was searched, so its message names it.

    The handle (:func:`savegame.connect`) opens a store once and names it in each of its
    calls with this; nothing else opens stores for the API.
    """
    try:
        yield store
    except NotFoundError as exc:
        exc.name_store(store.url)
        raise


__all__ = [
    "BatchStore",
    "Capabilities",
    "DuplicateRunError",
    "Enqueue",
    "MemoryStore",
    "Put",
    "PutResult",
    "Queue",
    "QueueStats",
    "QueueStore",
    "RunPosition",
    "SqliteStore",
    "Store",
    "StoreStats",
    "ThreadInfo",
    "Written",
    "check_enqueue",
    "naming",
    "open_store",
    "queue_declared",
    "queue_store",
]
