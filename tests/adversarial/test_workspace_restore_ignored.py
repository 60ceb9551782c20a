"""A restore never removes an ignored path: it refuses, naming them, and writes nothing.

Ignored paths are never captured, so one a restore removed would be gone for good. A
directory standing where the checkpoint has a file was removed whole, ignored files in
it included (issue 30, point 8); an ignored file where the checkpoint has a directory
was unlinked.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from savegame import END, RunStatus, Workflow, Workspace, resume, run
from savegame.client import get_checkpoint, restore_workspace
from savegame.errors import StepError, WorkspaceError
from savegame.stores import SqliteStore


def test_a_directory_of_ignored_files_where_a_file_was_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "other.txt").write_text("as the checkpoint has it")
    fail = {"yes": True}
    wf = Workflow("ignored-in-the-way", workspace=Workspace(ws, ignore=["*.secret", ".git/"]))

    @wf.step(entry=True)
    def write(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        (ws / "notes").write_text("a file at step 1")
        return {}, "rework"

    @wf.step
    def rework(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        if fail["yes"]:
            (ws / "other.txt").write_text("changed by the failed step")
            (ws / "notes").unlink()
            (ws / "notes" / ".git").mkdir(parents=True)
            (ws / "notes" / ".git" / "HEAD").write_text("ref: refs/heads/main")
            (ws / "notes" / "key.secret").write_text("never captured")
            (ws / "notes" / "draft.md").write_text("captured by no checkpoint yet")
            raise RuntimeError("dies after its writes")
        return {}, END

    store = SqliteStore(tmp_path / "runs.db")
    with pytest.raises(StepError):
        run(wf, run_id="r", store=store)
    fail["yes"] = False
    with pytest.raises(WorkspaceError) as refused:
        resume("r", store=store, workflow=wf)
    assert "notes/.git/, notes/key.secret" in str(refused.value)
    assert (ws / "notes" / "key.secret").read_text() == "never captured"
    assert (ws / "notes" / ".git" / "HEAD").read_text() == "ref: refs/heads/main"
    assert (ws / "notes" / "draft.md").exists()  # nothing was written nor deleted
    assert (ws / "other.txt").read_text() == "changed by the failed step"

    kept = tmp_path / "kept"
    kept.mkdir()
    shutil.move(ws / "notes" / "key.secret", kept)
    shutil.move(ws / "notes" / ".git", kept)
    assert resume("r", store=store, workflow=wf).status is RunStatus.COMPLETED
    assert (ws / "notes").read_text() == "a file at step 1"
    assert (ws / "other.txt").read_text() == "as the checkpoint has it"


def test_an_ignored_file_where_the_checkpoint_has_a_directory_is_refused(tmp_path: Path) -> None:
    """Restoring with patterns the capture did not have: ``logs`` held files then."""
    ws = tmp_path / "ws"
    (ws / "logs").mkdir(parents=True)
    (ws / "logs" / "a.txt").write_text("captured")
    wf = Workflow("captured-logs", workspace=ws)

    @wf.step(entry=True)
    def one(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        return {}, END

    store = SqliteStore(tmp_path / "runs.db")
    done = run(wf, store=store)
    shutil.rmtree(ws / "logs")
    (ws / "logs").write_text("an ignored file")
    with pytest.raises(WorkspaceError, match=r"ignored paths stand \(logs\)"):
        restore_workspace(
            get_checkpoint(done.checkpoint_id, store=store),
            Workspace(ws, ignore=["logs"]),
            store=store,
        )
    assert (ws / "logs").read_text() == "an ignored file"
