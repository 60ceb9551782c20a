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
from typing import Any, NoReturn

import pytest

from savegame import (
    END,
    RetentionPolicy,
    StepContext,
    StorageConfig,
    Workflow,
    get_checkpoint,
    history,
    prune,
    run,
    verify,
)
from savegame.errors import ConfigurationError
from savegame.model import CheckpointHeader
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


class TestPacksOnEveryBackend:
    """The storage engine end to end on each backend: a run whose keyframes pack its
    messages loads back at every checkpoint, and still does after retention deleted
    the checkpoints (and blobs) it no longer needs; verify then finds nothing wrong."""

    STORAGE = StorageConfig(keyframe_every=4, pack_bytes=600)

    @pytest.fixture(params=sorted(BACKENDS))
    def store(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
        store = BACKENDS[request.param](tmp_path)
        yield store
        store.close()

    @staticmethod
    def message(n: int) -> dict[str, str]:
        return {"role": "user" if n % 2 else "assistant", "content": f"{n}: " + "lorem " * 40}

    def chat(self) -> Workflow:
        wf = Workflow("packed-chat")

        @wf.step(entry=True)
        def talk(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
            messages = [*state.get("messages", []), self.message(len(state.get("messages", [])))]
            return {"messages": messages}, ("talk" if len(messages) < 40 else END)

        return wf

    def test_every_checkpoint_loads_before_and_after_retention(self, store: Store) -> None:
        result = run(self.chat(), {}, store=store, storage=self.STORAGE)
        headers = history(result.run_id, store=store, storage=self.STORAGE)
        assert any(h.base_id is None and h.blobs for h in headers)  # packs were written

        def loads_back(header: CheckpointHeader) -> None:
            state = get_checkpoint(header.checkpoint_id, store=store, storage=self.STORAGE).state
            assert state.get("messages", []) == [self.message(n) for n in range(header.step)]

        for header in headers:
            loads_back(header)
        plan = prune(RetentionPolicy(keep_last=3), store=store)
        assert plan.checkpoints  # the packs stay: the kept keyframe still refers to every one
        kept = history(result.run_id, store=store, storage=self.STORAGE)
        assert len(kept) < len(headers)
        for header in kept:
            loads_back(header)
        assert verify(store=store, storage=self.STORAGE).ok
