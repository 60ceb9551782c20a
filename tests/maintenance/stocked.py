"""A store with a few runs in it, for the maintenance tests."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from savegame import (
    END,
    StepContext,
    Store,
    Workflow,
    run,
)
from savegame.codec import open_record, seal_record
from savegame.codec.storage import StorageConfig, resolve

# Small packs, so a short run already stores some (packs are blobs).
PLAIN = StorageConfig(keyframe_every=3, blob_threshold=100, pack_bytes=512)


def chatty() -> Workflow:
    wf = Workflow("chatty")

    @wf.step(entry=True)
    def talk(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        n = len(state.get("log", []))
        entry = {"n": n, "text": f"message {n} " + "lorem ipsum " * 20}
        return {"log": [*state.get("log", []), entry]}, ("talk" if n < 7 else END)

    return wf


def legacy_fork(store: Store, ws: Path) -> tuple[Workflow, str, str]:
    """A finished run with a workspace and a fork of its step 1 (not run), whose first
    record is sealed again without its workspace file in its header, as savegame wrote a
    fork's first record before it listed them (``Store.rewrite``, as rekey writes).

    Returns the workflow, the fork's run and its first checkpoint."""
    from savegame.client import fork, history
    from tests.runtime.test_fork_workspace import adding

    ws.mkdir()
    wf = adding(ws)
    done = run(wf, {}, store=store)
    [at1] = [h for h in history(done.run_id, store=store) if h.step == 1]
    forked = fork(at1.checkpoint_id, store=store, workflow=wf, run=False)
    first = store.get_checkpoint(forked.checkpoint_id)
    assert len(first.header.blobs) == 1
    _, body = open_record(first, resolve(None))
    header = replace(first.header, blobs=())
    rewrite = getattr(store, "rewrite")  # noqa: B009  (SQL stores and Redis have one)
    rewrite(records=[seal_record(header, body, delta=False, storage=resolve(None))])
    return wf, forked.run_id, forked.checkpoint_id
