"""What the runtime writes: one checkpoint per boundary through the storage engine, and what a failed write does.

Invariant 5: a checkpoint that cannot be written stops the run; the last good one
stays the resume point. The failure is injected by a store that delegates to a real
SQLite store and refuses ``put_checkpoint`` from a given call on (a full disk, a
dropped connection): the store is real, only its refusal is staged.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import savegame
from savegame import END, MemoryStore, RunStatus, StepContext, Workflow, codec, resume, run
from savegame.client import Observer, get_checkpoint, history
from savegame.codec.crypto import Keyring
from savegame.codec.storage import StorageConfig
from savegame.errors import CheckpointWriteError, StepError, UnencryptedRecordError
from savegame.stores import PutResult, SqliteStore

# -- runs write deltas through the storage engine ----------------------------------------
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


# -- a write that fails ------------------------------------------------------------
class FailingStore(SqliteStore):
    """A real SQLite store whose checkpoint writes fail after ``allowed`` of them."""

    def __init__(self, path: Path, allowed: int) -> None:
        super().__init__(path)
        self.allowed = allowed

    def put_checkpoint(self, *args: Any, **kwargs: Any) -> PutResult:
        if self.allowed <= 0:
            raise OSError(28, "No space left on device")
        self.allowed -= 1
        return super().put_checkpoint(*args, **kwargs)


def counting(executed: list[int]) -> Workflow:
    wf = Workflow("counting")

    @wf.step(entry=True)
    def tick(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        n = state.get("n", 0) + 1
        executed.append(n)
        return {"n": n}, ("tick" if n < 6 else END)

    return wf


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_failed_write_stops_the_run_and_keeps_the_last_good_checkpoint(
    tmp_path: Path, durability: str
) -> None:
    executed: list[int] = []
    store = FailingStore(tmp_path / "f.db", allowed=3)  # steps 1..3 commit, step 4's write fails
    try:
        with pytest.raises(CheckpointWriteError, match="No space left on device") as info:
            run(counting(executed), run_id="r", store=store, durability=durability)  # type: ignore[arg-type]
        assert info.value.run_id == "r"
        # Sync: nothing ran past the failed write. Async: at most the queue's worth more.
        assert executed[:4] == [1, 2, 3, 4]
        if durability == "sync":
            assert executed == [1, 2, 3, 4]
        assert [h.step for h in history("r", store=store)] == [3, 2, 1, 0]
        assert get_checkpoint("r", store=store).state == {"n": 3}
        assert store.get_run("r").lease is None  # released: resumable at once
        store.allowed = 100
        executed.clear()
        result = resume("r", store=store, workflow=counting(executed))
        assert result.status is RunStatus.COMPLETED and result.state == {"n": 6}
        assert executed == [4, 5, 6]  # continued from the last good checkpoint
    finally:
        store.close()


@pytest.mark.parametrize("durability", ["sync", "async"])
@pytest.mark.timeout(30)  # the failure this guards against was a hang
def test_an_observer_that_raises_after_a_commit_stops_the_run(
    tmp_path: Path, durability: str
) -> None:
    """With durability="async" the commit callback runs on the writer's thread: an error
    there used to kill that thread, and the run then waited on it forever."""
    store = SqliteStore(tmp_path / "o.db")
    seen: list[int] = []

    def on_checkpoint(header: Any, seconds: float) -> None:
        seen.append(header.step)
        if header.step == 2:
            raise RuntimeError("dashboard is down")

    try:
        with pytest.raises(CheckpointWriteError, match="dashboard is down") as info:
            run(
                counting([]), run_id="r", store=store, durability=durability,  # type: ignore[arg-type]
                observer=Observer(on_checkpoint=on_checkpoint),
            )  # fmt: skip
        # The step whose checkpoint it was, wrapped once (not again by a later write).
        assert info.value.step == 2 and isinstance(info.value.cause, RuntimeError)
        assert 2 in seen
        assert get_checkpoint("r", store=store).state["n"] >= 2  # what committed stays
    finally:
        store.close()
