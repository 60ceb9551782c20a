"""What is specific to the memory store: its memory:// URLs (the contract suite covers the rest)."""

from __future__ import annotations

import pytest

from savegame.errors import ConfigurationError
from savegame.stores import open_store
from savegame.testing.builders import OWNER, make_run


def test_memory_url_is_fresh_and_named_memory_url_is_shared() -> None:
    assert open_store("memory://") is not open_store("memory://")
    shared = open_store("memory://test-open-store-shared")
    run, first = make_run()
    shared.create_run(run, first, owner=OWNER, ttl=30)
    again = open_store("memory://test-open-store-shared")
    assert again is shared
    assert again.url == "memory://test-open-store-shared"
    assert again.get_run(run.run_id).run_id == run.run_id


def test_bad_memory_url() -> None:
    with pytest.raises(ConfigurationError):
        open_store("memory://a/b")
