"""Run the shipped store contract suite against every backend.

The backends are tests/services.py's BACKENDS: one list, each entry a fresh, empty
store (or a skip when its server is not available, a failure in CI).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from savegame import END, StepContext, StorageConfig, Workflow, run
from savegame.client import get_checkpoint, history, prune, verify
from savegame.maintenance import RetentionPolicy
from savegame.model import CheckpointHeader
from savegame.stores.base import Store
from savegame.testing.contract import StoreContract
from tests.services import BACKENDS, scratch_store


class TestStoreContract(StoreContract):
    @pytest.fixture(params=sorted(BACKENDS))
    def store(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
        with scratch_store(request.param, tmp_path) as store:
            yield store


class TestPacksOnEveryBackend:
    """The storage engine end to end on each backend: a run whose keyframes pack its
    messages loads back at every checkpoint, and still does after retention deleted
    the checkpoints (and blobs) it no longer needs; verify then finds nothing wrong."""

    STORAGE = StorageConfig(keyframe_every=4, pack_bytes=600)

    @pytest.fixture(params=sorted(BACKENDS))
    def store(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
        with scratch_store(request.param, tmp_path) as store:
            yield store

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
