"""Run the shipped store contract suite against every backend.

A new backend is one more entry in BACKENDS: a factory that opens a fresh,
empty store (or skips when its server is not available).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from savegame.stores import MemoryStore, SqliteStore
from savegame.stores.base import Store
from savegame.testing.contract import StoreContract

BACKENDS: dict[str, Callable[[Path], Store]] = {
    "memory": lambda tmp_path: MemoryStore(),
    "sqlite": lambda tmp_path: SqliteStore(tmp_path / "contract.db"),
}


class TestStoreContract(StoreContract):
    @pytest.fixture(params=sorted(BACKENDS))
    def store(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
        store = BACKENDS[request.param](tmp_path)
        yield store
        store.close()
