"""The fixture and helpers the parts of the store contract suite share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from savegame.model import CheckpointRecord, Lease, RunInfo
from savegame.stores import open_store
from savegame.stores.base import Store
from savegame.testing.builders import OWNER, make_run

TTL = 30.0
"""A lease that stays live for the whole test."""


class ContractBase:
    """The ``store`` fixture a subclass provides, and how tests start runs on it."""

    @pytest.fixture
    def store(self) -> Store:
        raise NotImplementedError("subclass StoreContract and provide a `store` fixture")

    def reopen(self, store: Store) -> Store:
        """A second, independent handle on the same data; the test closes it."""
        return open_store(store.url)

    @contextmanager
    def _second_handle(self, store: Store) -> Iterator[Store]:
        other = self.reopen(store)
        try:
            yield other
        finally:
            other.close()

    def start(
        self, store: Store, thread_id: str | None = None, *, ttl: float = TTL
    ) -> tuple[RunInfo, CheckpointRecord, Lease]:
        run, first = make_run(thread_id)
        lease = store.create_run(run, first, owner=OWNER, ttl=ttl)
        return run, first, lease
