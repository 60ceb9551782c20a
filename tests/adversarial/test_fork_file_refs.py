"""A state's data cannot make a fork's record list, or its export carry, a blob it names.

A fork's first record lists the workspace files its state refers to (found by walking
the encoded state, codec/_refs.py ``files_in``). An agent's state holds text and dicts a
model or a user wrote: one spelling a file reference, ``{"$sg:blob": ["f", digest, ...]}``,
naming the blob of another run's secret file, is escaped data. Listed, it would ride
along in the fork's export to whoever receives the file. (Passes before the listing too;
it fails for a fix that finds file references by pattern in the body.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import savegame
from savegame import END, Workflow
from savegame.client import export_run, fork, get_checkpoint, history
from savegame.model import WORKSPACE_KEY
from savegame.stores import SqliteStore


def test_a_state_spelling_another_runs_file_reference_exports_no_such_blob(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "runs.db")
    secret_ws = tmp_path / "secret"
    secret_ws.mkdir()
    (secret_ws / "codes.txt").write_text("launch codes " * 20)
    keeper = Workflow("keeps-a-secret", workspace=secret_ws)

    @keeper.step(entry=True)
    def keep(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        return {}, END

    kept = savegame.run(keeper, {}, store=store)
    [secret] = {
        f.digest
        for f in get_checkpoint(kept.checkpoint_id, store=store).state[WORKSPACE_KEY].values()
    }

    ws = tmp_path / "ws"
    ws.mkdir()
    wf = Workflow("echoes-its-input", workspace=ws)

    @wf.step(entry=True)
    def echo(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        (ws / "mine.txt").write_text("mine")
        spelled = {"$sg:blob": ["f", secret, 0o100644, 260]}
        return {"said": spelled, "also": [spelled, {**spelled, "x": 1}]}, "last"

    @wf.step
    def last(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        return {}, END

    done = savegame.run(wf, {}, store=store)
    [at1] = [h for h in history(done.run_id, store=store) if h.step == 1]
    forked = fork(at1.checkpoint_id, store=store, workflow=wf, run=False)
    first = store.get_checkpoint(forked.checkpoint_id)
    assert secret not in first.header.blobs and len(first.header.blobs) == 1  # mine.txt
    assert get_checkpoint(forked.checkpoint_id, store=store).state["said"]["$sg:blob"][1] == secret
    sent = export_run(forked.run_id, tmp_path / "fork.sgx", store=store)
    assert sent.blobs == 1
    store.close()
