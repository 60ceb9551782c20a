"""A fork of a run with a workspace (control/_fork.py ``create_fork``): every checkpoint
the fork writes outside the saver (its first, an edited fork's ``update``, a cancel's
marker) lists among its blobs the workspace files its state refers to, as the saver's
do. Export, retention, rekey and verify know a record's blobs by its header only: a
fork whose first record left them out was exported without its files and lost them
when its origin run was pruned (tests/maintenance has those two)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from savegame import END, RunStatus, Workflow, run
from savegame.client import cancel, fork, get_checkpoint, history
from savegame.model import WORKSPACE_KEY
from savegame.stores import Store


def adding(ws: Path) -> Workflow:
    """Three steps, each adds a file: f1.txt, f2.txt, f3.txt."""
    wf = Workflow("fork-workspace", workspace=str(ws))

    @wf.step(entry=True)
    def add(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        n = state.get("n", 0) + 1
        (ws / f"f{n}.txt").write_text(f"file {n} " * 40)
        return {"n": n}, ("add" if n < 3 else END)

    return wf


def files_of(store: Store, checkpoint_id: str) -> set[str]:
    """The blobs of the workspace files the checkpoint's state refers to."""
    manifest = get_checkpoint(checkpoint_id, store=store).state[WORKSPACE_KEY]
    return {f.digest for f in manifest.values()}


def listed(store: Store, checkpoint_id: str) -> set[str]:
    return set(store.get_checkpoint(checkpoint_id).header.blobs)


def test_every_checkpoint_a_fork_writes_lists_the_files_it_refers_to(
    store: Store, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    wf = adding(ws)
    done = run(wf, {}, store=store)
    [at1] = [h for h in history(done.run_id, store=store) if h.step == 1]
    assert len(files_of(store, at1.checkpoint_id)) == 1  # f1.txt

    plain = fork(at1.checkpoint_id, store=store, workflow=wf, run=False)
    edited = fork(
        at1.checkpoint_id, update={"n": 1, "note": "by hand"}, store=store, workflow=wf, run=False
    )
    assert get_checkpoint(edited.checkpoint_id, store=store).header.metadata["source"] == "update"
    for first in (plain.checkpoint_id, edited.checkpoint_id):
        assert listed(store, first) == files_of(store, at1.checkpoint_id)

    # A marker keeps the record's state: it lists the same files.
    assert cancel(edited.run_id, store=store).status is RunStatus.CANCELLED
    marker = store.latest_checkpoint(edited.run_id)
    assert marker.checkpoint_id != edited.checkpoint_id
    assert listed(store, marker.checkpoint_id) == files_of(store, at1.checkpoint_id)

    # A fork that runs: its keyframes list every file of their manifest.
    ran = fork(at1.checkpoint_id, store=store, workflow=wf)
    assert ran.result is not None and ran.result.status is RunStatus.COMPLETED
    for h in history(ran.run_id, store=store):
        if store.get_checkpoint(h.checkpoint_id).header.base_id is None:
            assert files_of(store, h.checkpoint_id) <= listed(store, h.checkpoint_id)
