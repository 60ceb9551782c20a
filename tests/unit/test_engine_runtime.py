"""The storage engine through the runtime: runs write deltas, resume and stop markers load right."""

from __future__ import annotations

import os
from typing import Any

import pytest

import savegame
from savegame import END, MemoryStore, StepContext, Workflow, codec
from savegame.codec.crypto import Keyring
from savegame.codec.storage import StorageConfig
from savegame.errors import StepError, UnencryptedRecordError
from savegame.inspect import get_checkpoint, history

STORAGE = StorageConfig(keyframe_every=4, blob_threshold=256, compress_threshold=512)
SECRET = StorageConfig(
    keyframe_every=4, keyring=Keyring({"k": os.urandom(32)}, active="k"),
    sensitive_metadata=frozenset({"user"}),
)  # fmt: skip
FAIL_AT: dict[str, int] = {}

wf = Workflow("engine-growing")


@wf.step(entry=True)
def grow(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    n = state["n"] + 1
    if FAIL_AT.get("n") == n:
        FAIL_AT.clear()
        raise RuntimeError("boom")
    entry = {"i": n, "note": f"step {n}", "big": ("x" * 300 if n % 5 == 0 else "")}
    update = {"n": n, "log": [*state["log"], entry], "meta": {**state["meta"], "last": n}}
    return update, ("grow" if n < 20 else END)


def _chain_lengths(store: MemoryStore, run_id: str) -> list[int]:
    return [len(store.get_chain(h.checkpoint_id)) for h in store.list_checkpoints(run_id)]


@pytest.mark.parametrize("storage", [STORAGE, SECRET], ids=["plain", "encrypted"])
def test_a_run_writes_deltas_and_ends_where_an_uninterrupted_run_does(
    storage: StorageConfig,
) -> None:
    start = {"n": 0, "log": [], "meta": {"user": "ada"}}
    store = MemoryStore()
    whole = savegame.run(wf, start, store=store, storage=storage, metadata={"user": "ada"})
    headers = store.list_checkpoints(whole.run_id)
    assert sum(h.base_id is not None for h in headers) >= len(headers) // 3
    assert max(_chain_lengths(store, whole.run_id)) <= storage.keyframe_every
    for header in headers:  # a chain's deltas never outweigh a full copy
        *deltas, keyframe = store.get_chain(header.checkpoint_id)
        stored = store.get_blobs(list(keyframe.header.blobs))
        full_copy = keyframe.header.size + sum(map(len, stored.values()))
        assert sum(d.header.size for d in deltas) <= full_copy
    loaded = get_checkpoint(whole.run_id, store=store, storage=storage)
    assert codec.canonical(loaded.state) == codec.canonical(whole.state)
    assert loaded.metadata.get("user", "ada") == "ada"

    FAIL_AT["n"] = 11
    broken = MemoryStore()
    with pytest.raises(StepError):
        savegame.run(wf, start, store=broken, storage=storage, run_id="r-broken")
    resumed = savegame.resume("r-broken", store=broken, workflow=wf, storage=storage)
    assert codec.canonical(resumed.state) == codec.canonical(whole.state)
    again = get_checkpoint("r-broken", store=broken, storage=storage)
    assert codec.canonical(again.state) == codec.canonical(whole.state)


def test_encrypted_runs_refuse_to_load_without_encryption_configured_and_vice_versa() -> None:
    store = MemoryStore()
    result = savegame.run(wf, {"n": 15, "log": [], "meta": {}}, store=store, storage=STORAGE)
    with pytest.raises(UnencryptedRecordError, match=result.checkpoint_id):
        get_checkpoint(result.run_id, store=store, storage=SECRET)


def test_sensitive_metadata_is_encrypted_in_the_stored_header() -> None:
    store = MemoryStore()
    result = savegame.run(
        wf, {"n": 18, "log": [], "meta": {}}, store=store, storage=SECRET,
        metadata={"user": "ada@example.com", "tier": "gold"},
    )  # fmt: skip
    first = store.list_checkpoints(result.run_id)[-1]
    assert first.metadata["tier"] == "gold" and "ada" not in str(first.metadata["user"])
    shown = history(result.run_id, store=store, storage=SECRET)
    assert shown[-1].metadata["user"] == "ada@example.com"
    assert "ada" not in str(store.get_run(result.run_id).metadata["user"])
