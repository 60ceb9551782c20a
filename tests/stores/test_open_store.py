"""open_store's dispatch: a store passed through, unknown schemes refused."""

from __future__ import annotations

import pytest

from savegame.errors import ConfigurationError
from savegame.stores import MemoryStore, Store, open_store


def test_a_store_instance_is_returned_as_is() -> None:
    store = MemoryStore()
    assert open_store(store) is store
    assert isinstance(store, Store)


@pytest.mark.parametrize("url", ["mysql://db/x", "nonsense", "file:///tmp/x.db", ""])
def test_unknown_schemes_name_the_url_and_the_supported_schemes(url: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        open_store(url)
    assert repr(url) in str(info.value)
    assert all(
        f"{scheme}://" in str(info.value) for scheme in ("memory", "postgresql", "sqlite", "redis")
    )
