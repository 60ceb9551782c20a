"""savegame.client.diff: a structural diff of two checkpoints' states, loaded from a real store."""

from __future__ import annotations

import os
from typing import Any

import pytest

import savegame
from savegame import END, StorageConfig, Store, Workflow
from savegame.codec.crypto import Keyring
from savegame.inspect import ChangeKind, compare
from savegame.model import Checkpoint, CheckpointHeader, RunStatus

story = Workflow("diff-story")


@story.step(entry=True)
def write(state: dict[str, Any], ctx: Any) -> Any:
    n = state.get("n", 0) + 1
    update: dict[str, Any] = {
        "n": n,
        "messages": [*state.get("messages", []), f"m{n}", f"m{n}b"],
        "plan": {"goal": "refund", "step": n, "notes": "x" * 500 + str(n)},
    }
    if n == 2:
        update["plan"]["draft"] = "to be dropped"
    return update, ("write" if n < 3 else END)


def _checkpoints(store: Store, run_id: str) -> list[str]:
    return [h.checkpoint_id for h in reversed(savegame.client.history(run_id, store=store))]


def test_diff_names_added_removed_changed_and_grown_lists(store: Store) -> None:
    savegame.run(story, {}, store=store, run_id="d-1")
    ids = _checkpoints(store, "d-1")  # input, after 1, 2, 3
    d = savegame.client.diff(ids[1], ids[2], store=store)
    by_path = {c.path: c for c in d.changes}
    assert by_path[("n",)].kind is ChangeKind.CHANGED
    assert (by_path[("n",)].old, by_path[("n",)].new) == (1, 2)
    assert by_path[("plan", "draft")].kind is ChangeKind.ADDED
    grew = by_path[("messages",)]
    assert grew.kind is ChangeKind.GREW
    assert (grew.at, grew.items) == (2, ("m2", "m2b"))
    assert by_path[("plan", "step")].kind is ChangeKind.CHANGED
    assert ("plan", "goal") not in by_path  # unchanged, and no context asked for
    assert not d.same

    back = savegame.client.diff(ids[3], ids[2], store=store)
    kinds = {c.path: c.kind for c in back.changes}
    assert kinds[("messages",)] is ChangeKind.SHRANK
    assert kinds[("plan", "draft")] is ChangeKind.ADDED  # 3 dropped it: back at 2 it is there
    forward = {c.path: c.kind for c in savegame.client.diff(ids[2], ids[3], store=store).changes}
    assert forward[("plan", "draft")] is ChangeKind.REMOVED


def test_run_ids_mean_their_heads_and_equal_states_are_same(store: Store) -> None:
    savegame.run(story, {}, store=store, run_id="d-2", thread_id="t-a")
    savegame.run(story, {}, store=store, run_id="d-3", thread_id="t-b")
    d = savegame.client.diff("d-2", "d-3", store=store)
    assert d.a.run_id == "d-2" and d.b.run_id == "d-3"
    assert d.a.checkpoint_id == savegame.client.get_run("d-2", store=store).head_checkpoint_id
    assert d.same and d.changes == ()
    with pytest.raises(savegame.errors.NotFoundError):
        savegame.client.diff("d-2", "nope", store=store)


def test_context_lists_unchanged_neighbours_only_near_a_change(store: Store) -> None:
    savegame.run(story, {}, store=store, run_id="d-4")
    ids = _checkpoints(store, "d-4")
    d = savegame.client.diff(ids[1], ids[2], context=1, store=store)
    unchanged = [c.path for c in d.changes if c.kind is ChangeKind.UNCHANGED]
    assert ("plan", "goal") in unchanged
    assert ("messages", 1) in unchanged  # the item before the new ones
    assert ("messages", 0) not in unchanged  # two away from the growth


def test_diff_opens_encrypted_records_with_the_keyring(store: Store) -> None:
    storage = StorageConfig(keyring=Keyring({"k1": os.urandom(32)}, active="k1"))
    savegame.run(story, {}, store=store, run_id="d-5", storage=storage)
    ids = _checkpoints(store, "d-5")
    d = savegame.client.diff(ids[0], ids[3], store=store, storage=storage)
    assert {c.path for c in d.changes} >= {("n",), ("messages",), ("plan",)}
    with pytest.raises(savegame.errors.EncryptionKeyError):
        savegame.client.diff(ids[0], ids[3], store=store)


def _cp(state: dict[str, Any]) -> Checkpoint:
    header = CheckpointHeader("t", "r", "c", None, 0, None, RunStatus.RUNNING, None)
    return Checkpoint(header, state)


def test_types_and_paths() -> None:
    d = compare(_cp({"a b": [1, (2,)], "x": 1}), _cp({"a b": [1, [2]], "x": "1"}))
    assert [(c.path, c.kind) for c in d.changes] == [
        (("a b", 1), ChangeKind.CHANGED),  # a tuple became a list
        (("x",), ChangeKind.CHANGED),
    ]
    assert d.changes[0].pointer == "/a b/1"
    with pytest.raises(ValueError):
        compare(_cp({}), _cp({}), context=-1)
