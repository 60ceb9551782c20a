"""A real SQLite store for the maintenance tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from savegame.stores import SqliteStore


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SqliteStore]:
    store = SqliteStore(tmp_path / "s.db")
    yield store
    store.close()
