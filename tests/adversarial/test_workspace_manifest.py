"""A hostile workspace manifest must not write outside the workspace.

Without keys a store is checksummed, not authenticated: someone who can write the
database can re-encode a record with a manifest of their own (as here, through the
store's own ``rewrite``). The restore that resume runs refuses absolute paths, ``..``,
a path that is a file and a directory, a link out of the workspace, a mode that is not
a file's or a link's; and it never writes through a link on disk. Nothing is written
outside the workspace in any case. With keys such an edit fails authentication.
"""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from savegame import END, Workflow, codec, resume, run
from savegame.client import get_checkpoint
from savegame.errors import CorruptRecordError, StepError
from savegame.model import WORKSPACE_KEY, StoredFile
from savegame.stores import SqliteStore

FAIL = {"yes": True}


def failing_run(tmp_path: Path) -> tuple[SqliteStore, Workflow, Path]:
    """A run that stopped failed (resumable) with a workspace of one file."""
    ws = tmp_path / "box" / "ws"
    ws.mkdir(parents=True)
    (ws / "a.txt").write_text("../../payload")
    wf = Workflow("adversarial-workspace", workspace=ws)

    @wf.step(entry=True)
    def first(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        return {}, "second"

    @wf.step
    def second(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        if FAIL["yes"]:
            raise RuntimeError("stop here")
        return {}, END

    store = SqliteStore(tmp_path / "runs.db")
    with pytest.raises(StepError):
        run(wf, run_id="r", store=store)
    return store, wf, ws


def forge(store: SqliteStore, manifest: dict[str, StoredFile]) -> None:
    """Re-encode the run's head with ``manifest``, checksum and all (no key to stop it)."""
    head = store.latest_checkpoint("r")
    state = dict(get_checkpoint(head.checkpoint_id, store=store).state)
    state[WORKSPACE_KEY] = manifest
    blobs = tuple(sorted({e.digest for e in manifest.values()}))
    forged = codec.encode(replace(head.header, base_id=None, blobs=blobs), state)
    store.rewrite(records=[forged])


def real_file(store: SqliteStore) -> StoredFile:
    head = get_checkpoint(store.latest_checkpoint("r").checkpoint_id, store=store)
    entry: StoredFile = head.state[WORKSPACE_KEY]["a.txt"]
    return entry


@pytest.mark.parametrize(
    "path", ["../outside.txt", "/tmp/sg-absolute.txt", "x/../../outside.txt", "./a", "x//y", ""]
)
def test_a_path_out_of_the_workspace_is_refused(tmp_path: Path, path: str) -> None:
    store, wf, ws = failing_run(tmp_path)
    forge(store, {"b.txt": real_file(store), path: real_file(store)})
    with pytest.raises(CorruptRecordError, match="outside the workspace"):
        resume("r", store=store, workflow=wf)
    assert not (tmp_path / "box" / "outside.txt").exists()
    assert not Path("/tmp/sg-absolute.txt").exists()
    assert not (ws / "b.txt").exists()  # refused before anything was written


def test_a_link_out_of_the_workspace_is_refused(tmp_path: Path) -> None:
    store, wf, ws = failing_run(tmp_path)
    # a.txt's content is "../../payload": as a link's target, it leaves the workspace.
    entry = real_file(store)
    forge(store, {"evil": StoredFile(entry.digest, stat.S_IFLNK | 0o777, entry.size)})
    with pytest.raises(CorruptRecordError, match="would leave the workspace"):
        resume("r", store=store, workflow=wf)
    assert not os.path.lexists(ws / "evil")


def test_a_file_that_is_also_a_directory_or_a_device_is_refused(tmp_path: Path) -> None:
    store, wf, _ = failing_run(tmp_path)
    entry = real_file(store)
    forge(store, {"d": entry, "d/x": entry})
    with pytest.raises(CorruptRecordError, match="as a file and a directory"):
        resume("r", store=store, workflow=wf)
    forge(store, {"dev": StoredFile(entry.digest, stat.S_IFCHR | 0o666, entry.size)})
    with pytest.raises(CorruptRecordError, match="mode"):
        resume("r", store=store, workflow=wf)


def test_a_link_on_disk_is_never_written_through(tmp_path: Path) -> None:
    store, wf, ws = failing_run(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    forge(store, {"sub/a.txt": real_file(store)})
    os.symlink(outside, ws / "sub")  # planted after the checkpoint, on the way to sub/a.txt
    FAIL["yes"] = False
    try:
        resume("r", store=store, workflow=wf)
    finally:
        FAIL["yes"] = True
    assert list(outside.iterdir()) == []
    assert not (ws / "sub").is_symlink() and (ws / "sub" / "a.txt").read_text() == "../../payload"
