"""A run written through the codec's Encoder into a real MemoryStore, for the codec tests."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from savegame import MemoryStore, codec
from savegame.codec.crypto import Keyring
from savegame.codec.storage import StorageConfig
from savegame.ids import new_id
from savegame.model import (
    CheckpointHeader,
    RunInfo,
    RunStatus,
    utcnow,
)

GOLDEN = Path(__file__).parent.parent / "golden"
KEY_A, KEY_B = os.urandom(32), os.urandom(32)
RING_A = Keyring({"a": KEY_A}, active="a")
PLAIN = StorageConfig(keyframe_every=3, blob_threshold=64, compress_threshold=128)
SECRET = replace(PLAIN, keyring=RING_A)


def make_header(run_id: str, step: int, parent: str | None) -> CheckpointHeader:
    return CheckpointHeader(
        thread_id=run_id, run_id=run_id, checkpoint_id=new_id(), parent_id=parent,
        step=step, node="s" if step else None, status=RunStatus.RUNNING, next="s",
    )  # fmt: skip


class Run:
    """Writes successive states of one run through an Encoder into a real MemoryStore."""

    def __init__(
        self,
        store: MemoryStore,
        storage: StorageConfig,
        state: dict[str, Any],
        *,
        by_value: bool = False,
    ) -> None:
        self.store, self.storage, self.run_id = store, storage, new_id()
        first = codec.encode(make_header(self.run_id, 0, None), state, storage)
        now = utcnow()
        info = RunInfo(self.run_id, self.run_id, "engine", None, RunStatus.RUNNING, 0,
                       first.checkpoint_id, now, now)  # fmt: skip
        self.token = store.create_run(info, first, owner="test:1:1", ttl=60).token
        self.records = [first]
        self.encoder = codec.Encoder(
            storage,
            base=first,
            state=state,
            chain=codec.Chain(0, 0, first.header.size),
            by_value=by_value,
        )

    def write(self, state: dict[str, Any], changed: Any) -> Any:
        header = make_header(self.run_id, len(self.records), self.records[-1].checkpoint_id)
        encoded = self.encoder.encode(header, state, changed)
        blobs = self.encoder.to_upload(self.store, encoded)
        self.store.put_checkpoint(encoded.record, lease_token=self.token, blobs=blobs or None)
        self.encoder.committed(self.store, encoded.record)
        self.records.append(encoded.record)
        return encoded.record

    def load(self, index: int = -1) -> dict[str, Any]:
        return codec.load_state(self.store, self.records[index], self.storage).state


class AskCounting(MemoryStore):
    """A real MemoryStore that counts how often the encoder asks which blobs it lacks."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    def missing_blobs(self, digests: Sequence[str]) -> set[str]:
        self.asked += 1
        return super().missing_blobs(digests)
