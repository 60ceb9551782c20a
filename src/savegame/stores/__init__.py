"""Stores: one protocol, several backends, picked by URL.

``open_store`` imports a backend module only when its scheme is asked for, so
backends that need a driver (PostgreSQL, Redis) cost nothing until used and can
live in optional extras (``savegame[postgres]``).
"""

from __future__ import annotations

import importlib
import os
from typing import NamedTuple

from savegame.errors import ConfigurationError
from savegame.stores.base import Capabilities, Store, StoreStats, ThreadInfo

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


# A new backend is one entry here plus a class with ``from_url(url)``;
# e.g. "postgresql": _Backend("savegame.stores.postgres", "PostgresStore", "postgres").
_BACKENDS: dict[str, _Backend] = {
    "memory": _Backend("savegame.stores.memory", "MemoryStore", None),
    "sqlite": _Backend("savegame.stores.sqlite", "SqliteStore", None),
}


def open_store(url: str | Store | None = None) -> Store:
    """Open the store a URL names.

    Args:
        url: ``memory://``, ``memory://NAME``, ``sqlite:///relative.db``,
            ``sqlite:////absolute.db`` (optionally ``?synchronous=normal``), or a
            Store, returned as is. None reads ``SAVEGAME_STORE``, falling back to
            ``sqlite:///savegame.db`` in the current directory.

    Raises:
        ConfigurationError: an unknown scheme, a malformed URL, or a missing driver.
    """
    if url is None:
        url = os.environ.get(ENV_VAR) or DEFAULT_URL
    if not isinstance(url, str):
        return url
    scheme, sep, _ = url.partition("://")
    backend = _BACKENDS.get(scheme.lower()) if sep else None
    if backend is None:
        supported = ", ".join(f"{name}://" for name in sorted(_BACKENDS))
        raise ConfigurationError(f"unknown store URL {url!r}: supported schemes are {supported}")
    try:
        module = importlib.import_module(backend.module)
    except ImportError as exc:
        hint = (
            f"; install it with: pip install 'savegame[{backend.extra}]'" if backend.extra else ""
        )
        raise ConfigurationError(
            f"the {scheme}:// store needs a driver that is not installed ({exc}){hint}"
        ) from exc
    store: Store = getattr(module, backend.cls).from_url(url)
    return store


__all__ = [
    "Capabilities",
    "MemoryStore",
    "SqliteStore",
    "Store",
    "StoreStats",
    "ThreadInfo",
    "open_store",
]
