from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from savegame import Store, open_store


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The runtime's behaviour must not depend on the backend."""
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'runtime.db'}"
    handle = open_store(url)
    yield handle
    handle.close()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'savegame.db'}"
