"""open_store's dispatch and the memory:// URLs."""

from __future__ import annotations

import pytest

from savegame.errors import ConfigurationError
from savegame.stores import MemoryStore, Store, open_store
from savegame.testing.builders import OWNER, make_run


def test_a_store_instance_is_returned_as_is() -> None:
    store = MemoryStore()
    assert open_store(store) is store
    assert isinstance(store, Store)


def test_memory_url_is_fresh_and_named_memory_url_is_shared() -> None:
    assert open_store("memory://") is not open_store("memory://")
    shared = open_store("memory://test-open-store-shared")
    run, first = make_run()
    shared.create_run(run, first, owner=OWNER, ttl=30)
    again = open_store("memory://test-open-store-shared")
    assert again is shared
    assert again.url == "memory://test-open-store-shared"
    assert again.get_run(run.run_id).run_id == run.run_id


@pytest.mark.parametrize("url", ["mysql://db/x", "nonsense", "file:///tmp/x.db", ""])
def test_unknown_schemes_name_the_url_and_the_supported_schemes(url: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        open_store(url)
    assert repr(url) in str(info.value)
    assert all(
        f"{scheme}://" in str(info.value) for scheme in ("memory", "postgresql", "sqlite", "redis")
    )


def test_bad_memory_url() -> None:
    with pytest.raises(ConfigurationError):
        open_store("memory://a/b")
