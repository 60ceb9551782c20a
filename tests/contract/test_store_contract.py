"""Run the shipped store contract suite against every backend.

A new backend is one more entry in BACKENDS: a factory that opens a fresh,
empty store (or skips when its server is not available).
"""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from savegame.errors import ConfigurationError
from savegame.stores import MemoryStore, SqliteStore
from savegame.stores.base import Store
from savegame.testing.contract import StoreContract


def _redis(tmp_path: Path) -> Store:
    """A RedisStore under a fresh key prefix that deletes its keys when closed.

    Skips when the server is unreachable, unless SAVEGAME_REQUIRE_SERVICES=1 (CI).
    """
    url = os.environ.get("SAVEGAME_TEST_REDIS", "redis://127.0.0.1:6379/0")
    sep = "&" if "?" in url else "?"

    def unusable(exc: Exception) -> NoReturn:
        reason = f"Redis at {url} not usable: {exc}"
        if os.environ.get("SAVEGAME_REQUIRE_SERVICES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)

    try:
        import redis

        from savegame.stores.redis import RedisStore
    except ImportError as exc:  # no driver
        unusable(exc)

    class ScratchRedisStore(RedisStore):
        def close(self) -> None:
            self.delete_all()
            super().close()

    try:
        # The test server runs without AOF; the warning has a test of its own.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ScratchRedisStore.from_url(f"{url}{sep}prefix=sgtest-{uuid.uuid4().hex}")
    except redis.ConnectionError as exc:  # no server
        unusable(exc)


def _postgres(tmp_path: Path) -> Store:
    """A PostgresStore in a fresh schema that is dropped when the store is closed.

    Skips when the server is unreachable, unless SAVEGAME_REQUIRE_SERVICES=1 (CI).
    """
    url = os.environ.get("SAVEGAME_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
    sep = "&" if "?" in url else "?"
    schema = f"sgtest_{uuid.uuid4().hex}"

    def unusable(exc: Exception) -> NoReturn:
        reason = f"PostgreSQL at {url} not usable: {exc}"
        if os.environ.get("SAVEGAME_REQUIRE_SERVICES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)

    try:
        import psycopg

        from savegame.stores.postgres import PostgresStore, parse_url
    except ImportError as exc:  # no driver
        unusable(exc)

    class ScratchPostgresStore(PostgresStore):
        def close(self) -> None:
            super().close()
            with psycopg.connect(parse_url(url)[0], autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    try:
        return ScratchPostgresStore.from_url(f"{url}{sep}schema={schema}")
    except ConfigurationError as exc:  # no server, or it refuses us
        unusable(exc)


BACKENDS: dict[str, Callable[[Path], Store]] = {
    "memory": lambda tmp_path: MemoryStore(),
    "postgres": _postgres,
    "sqlite": lambda tmp_path: SqliteStore(tmp_path / "contract.db"),
    "redis": _redis,
}


class TestStoreContract(StoreContract):
    @pytest.fixture(params=sorted(BACKENDS))
    def store(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
        store = BACKENDS[request.param](tmp_path)
        yield store
        store.close()
