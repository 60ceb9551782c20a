"""Workspace snapshots (runtime/_workspace.py, its use by the saver and the loop): every
checkpoint holds the directory's files; restoring it gives them back byte for byte."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import savegame
from savegame import END, RunStatus, StorageConfig, Workflow, Workspace, run
from savegame.client import get_checkpoint, history, prune, rekey, restore_workspace, verify
from savegame.codec.crypto import Keyring
from savegame.errors import WorkspaceError
from savegame.maintenance import RetentionPolicy
from savegame.model import WORKSPACE_KEY
from savegame.stores import SqliteStore, Store
from savegame.workspace._capture import Snapshots, vouches


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file and link: (content or link target, mode bits)."""
    out: dict[str, tuple[bytes, int]] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = (os.fsencode(os.readlink(path)), -1)
        elif path.is_file():
            out[rel] = (path.read_bytes(), path.stat().st_mode & 0o777)
    return out


def editing(ws: Path, seen: list[dict[str, tuple[bytes, int]]], **options: Any) -> Workflow:
    """Five steps: each writes a file, rewrites one, deletes one, changes a mode."""
    wf = Workflow("edits-a-workspace", workspace=Workspace(ws, **options))

    @wf.step(entry=True)
    def edit(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        n = state.get("n", 0) + 1
        (ws / "deep" / "er").mkdir(parents=True, exist_ok=True)
        (ws / "deep" / "er" / f"f{n}.bin").write_bytes(bytes([n]) * (100 * n))
        (ws / "notes.md").write_text(f"step {n}\n")
        if n == 2:
            (ws / "base.txt").unlink()
        if n == 3:
            os.chmod(ws / "deep" / "er" / "f1.bin", 0o700)
        if n == 4:
            os.symlink("er/f2.bin", ws / "deep" / "to-f2")
        if n == 5:
            (ws / "deep" / "er" / "f3.bin").unlink()
        seen.append(tree(ws))
        return {"n": n}, ("edit" if n < 5 else END)

    return wf


def start(ws: Path) -> dict[str, tuple[bytes, int]]:
    ws.mkdir()
    (ws / "base.txt").write_text("before the run")
    return tree(ws)


def test_each_checkpoint_restores_the_files_it_was_taken_with(store: Store, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    seen = [start(ws)]
    result = run(editing(ws, seen), store=store)
    assert result.status is RunStatus.COMPLETED
    checkpoints = [h for h in reversed(history(result.run_id, store=store)) if h.step or h.node]
    # The run's first checkpoint with a workspace (before step 1), then one per step.
    with_files = [
        get_checkpoint(h.checkpoint_id, store=store)
        for h in history(result.run_id, store=store)
        if WORKSPACE_KEY in get_checkpoint(h.checkpoint_id, store=store).state
    ]
    assert len(with_files) == 6 and len(checkpoints) == 5
    for cp in with_files:  # newest first: each restore goes back one step
        restore_workspace(cp, ws, store=store)
        assert tree(ws) == seen[cp.step], cp.step
    assert not (ws / "deep").exists()  # directories the deletions emptied go too
    restore_workspace(with_files[0], ws, store=store)
    assert tree(ws) == seen[5]


def test_only_changed_files_are_read_and_stored(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(50):
        (ws / f"{i}.txt").write_text(f"file {i} " * 50)
    snaps = Snapshots(Workspace(ws), None)
    first = snaps.capture()
    assert len(first.files) == 50 and first.changed
    same = snaps.capture()
    assert not same.changed and same.files == {} and same.manifest is first.manifest
    (ws / "7.txt").write_text("changed")
    (ws / "8.txt").write_text("file 9 " * 50)  # content another file already has
    after = snaps.capture()
    assert after.changed and list(after.files.values()) == [b"changed"]
    unchanged = [k for k in after.manifest if after.manifest[k] is first.manifest[k]]
    assert len(unchanged) == 48  # the same objects: the manifest's delta skips them


def test_a_stat_vouches_only_for_a_file_stamped_before_the_last_capture() -> None:
    """git's racily clean rule: a stamp a write after the capture's start could carry
    (a tick of 1-10 ms, a whole second on a filesystem keeping seconds) says nothing."""
    since = 1_800_000_000_123_456_789  # a capture's start, ns
    ms, second = 1_000_000, 1_000_000_000
    assert not vouches(since - 1 * ms, since)  # the same tick
    assert not vouches(since - 9 * ms, since)  # a 10 ms tick, read late
    assert vouches(since - 30 * ms, since)
    assert not vouches(since + 5 * second, since)  # ahead of our clock: never
    whole = since // second * second
    assert not vouches(whole - 1 * second, since)  # a whole second: maybe that one's
    assert vouches(whole - 3 * second, since)
    assert vouches(whole - 3 * second + 1, since)  # finer stamps: the tick only
    assert not vouches(since - 5 * ms, 0)  # no capture yet: nothing is trusted


def test_a_new_file_costs_its_blob_and_a_small_delta(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(300):
        (ws / f"{i:03}.txt").write_bytes(os.urandom(512))
    store = SqliteStore(tmp_path / "runs.db")
    wf = Workflow("small-deltas", workspace=ws)

    @wf.step(entry=True)
    def touch(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        n = state.get("n", 0) + 1
        (ws / f"{n % 300:03}.txt").write_bytes(os.urandom(512))
        return {"n": n}, ("touch" if n < 4 else END)

    result = run(wf, store=store)
    records = [store.get_checkpoint(h.checkpoint_id) for h in history(result.run_id, store=store)]
    deltas = records[:4]
    assert all(r.header.base_id is not None for r in deltas)
    assert all(len(r.header.blobs) == 1 for r in deltas)  # the one changed file
    assert all(r.header.size < 600 for r in deltas), [r.header.size for r in deltas]


def test_ignored_paths_are_not_captured_nor_touched(store: Store, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    seen = [start(ws)]
    (ws / "cache").mkdir()
    (ws / "cache" / "big.tmp").write_text("scratch")
    (ws / "app.log").write_text("log")
    wf = editing(ws, seen, ignore=["cache/", "*.log"])
    result = run(wf, store=store)
    last = get_checkpoint(result.checkpoint_id, store=store)
    names = set(last.state[WORKSPACE_KEY])
    assert not any(n.startswith("cache") or n.endswith(".log") for n in names)
    first = [h for h in history(result.run_id, store=store)][-2]
    restore_workspace(get_checkpoint(first.checkpoint_id, store=store), wf.workspace, store=store)
    assert (ws / "cache" / "big.tmp").read_text() == "scratch"
    assert (ws / "app.log").read_text() == "log"


def test_a_workspace_over_its_limit_stops_the_run_naming_the_largest_files(
    store: Store, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "huge.bin").write_bytes(b"x" * 5000)
    (ws / "small.txt").write_text("y")
    wf = Workflow("too-big", workspace=Workspace(ws, max_bytes=4000))

    @wf.step(entry=True)
    def one(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        return {}, END

    with pytest.raises(WorkspaceError) as caught:
        run(wf, store=store)
    assert "huge.bin (5,000 bytes)" in str(caught.value)
    assert "max_bytes=4,000" in str(caught.value)


def test_a_link_out_of_the_workspace_is_refused(store: Store, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    os.symlink(tmp_path, ws / "escape")
    wf = Workflow("links-out", workspace=ws)

    @wf.step(entry=True)
    def one(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        return {}, END

    with pytest.raises(WorkspaceError, match="escape ->"):
        run(wf, store=store)


def test_encrypted_workspace_files_leave_no_plaintext_in_the_database(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    secret = "the launch codes are 0000 " * 200  # compressible: also sealed when zstd'd
    (ws / "codes.txt").write_text(secret)
    (ws / "short.txt").write_text("tiny-secret-xyzzy")
    storage = StorageConfig(keyring=Keyring({"k1": os.urandom(32)}, active="k1"))
    store = SqliteStore(tmp_path / "runs.db")
    wf = Workflow("sealed-files", workspace=ws)

    @wf.step(entry=True)
    def one(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        (ws / "more.txt").write_text("written-by-the-step-plugh")
        return {}, END

    result = run(wf, store=store, storage=storage)
    store.close()
    raw = b""
    for name in os.listdir(tmp_path):
        if name.startswith("runs.db"):
            raw += (tmp_path / name).read_bytes()
    for text in ("launch codes", "tiny-secret-xyzzy", "written-by-the-step-plugh", "codes.txt"):
        assert text.encode() not in raw, text
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        assert conn.execute("SELECT count(*) FROM blobs").fetchone()[0] >= 3
    store = SqliteStore(tmp_path / "runs.db")
    cp = get_checkpoint(result.checkpoint_id, store=store, storage=storage)
    (ws / "codes.txt").write_text("edited")
    restore_workspace(cp, ws, store=store, storage=storage)
    assert (ws / "codes.txt").read_text() == secret


def test_prune_verify_and_rekey_keep_the_workspace_blobs(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    seen = [start(ws)]
    store = SqliteStore(tmp_path / "runs.db")
    # A keyframe every 2 records: the head's chain is not the one that stored most files.
    k1 = Keyring({"k1": os.urandom(32)}, active="k1")
    storage = StorageConfig(keyring=k1, keyframe_every=2)
    result = run(editing(ws, seen), store=store, storage=storage)
    plan = prune(RetentionPolicy(keep_last=1), store=store)
    assert plan.checkpoints and plan.blobs
    assert verify(store=store, storage=storage).ok
    head = get_checkpoint(result.checkpoint_id, store=store, storage=storage)
    for path in list(ws.rglob("*"))[::-1]:
        path.unlink() if not path.is_dir() or path.is_symlink() else path.rmdir()
    restore_workspace(head, ws, store=store, storage=storage)
    assert tree(ws) == seen[5]

    k2 = Keyring({"k2": os.urandom(32), **k1.keys}, active="k2")
    keys = StorageConfig(keyring=k2, keyframe_every=2)
    rekey(store=store, storage=keys)
    assert verify(store=store, storage=keys).ok
    head = get_checkpoint(result.checkpoint_id, store=store, storage=keys)
    (ws / "notes.md").write_text("changed after the rekey")
    restore_workspace(head, ws, store=store, storage=keys)
    assert tree(ws) == seen[5]


def test_resume_restores_the_workspace_before_the_step_runs_again(
    store: Store, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("kept")
    found: list[dict[str, tuple[bytes, int]]] = []
    wf = Workflow("fails-once", workspace=ws)

    @wf.step(entry=True)
    def write(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        (ws / "b.txt").write_text("from step 1")
        return {}, "flaky"

    @wf.step
    def flaky(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        found.append(tree(ws))
        (ws / "a.txt").write_text("clobbered")
        (ws / "junk.txt").write_text("half done")
        if len(found) == 1:
            raise RuntimeError("dies half way")
        return {}, END

    with pytest.raises(savegame.errors.StepError):
        run(wf, run_id="r1", store=store)
    assert (ws / "junk.txt").exists()
    savegame.resume("r1", store=store, workflow=wf)
    assert found[0] == found[1]  # the failed step's writes undone before it ran again
    assert set(found[1]) == {"a.txt", "b.txt"} and found[1]["a.txt"][0] == b"kept"


def test_an_exported_run_brings_its_workspace_files_along(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    seen = [start(ws)]
    source = SqliteStore(tmp_path / "here.db")
    result = run(editing(ws, seen), store=source)
    savegame.client.export_run(result.run_id, tmp_path / "run.sgx", store=source)
    there = SqliteStore(tmp_path / "there.db")
    savegame.client.import_run(tmp_path / "run.sgx", store=there)
    elsewhere = tmp_path / "elsewhere"
    restore_workspace(get_checkpoint(result.checkpoint_id, store=there), elsewhere, store=there)
    assert tree(elsewhere) == seen[5]


def test_a_fork_starts_from_the_files_of_the_checkpoint_it_forks(
    store: Store, tmp_path: Path
) -> None:
    """A file written after the fork point is gone when the fork's next step runs."""
    ws = tmp_path / "ws"
    wf = Workflow("forked-files", workspace=str(ws))

    @wf.step(entry=True)
    def add(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        n = state.get("n", 0) + 1
        ws.mkdir(exist_ok=True)
        (ws / f"f{n}.txt").write_text(f"file {n}")
        return {"n": n, "seen": sorted(p.name for p in ws.iterdir())}, ("add" if n < 3 else END)

    done = run(wf, {}, store=store)
    assert done.state["seen"] == ["f1.txt", "f2.txt", "f3.txt"]
    [at1] = [h for h in history(done.run_id, store=store) if h.step == 1]
    forked = savegame.client.fork(at1.checkpoint_id, store=store, workflow=wf)
    seen = {
        h.step: get_checkpoint(h.checkpoint_id, store=store).state.get("seen")
        for h in history(forked.run_id, store=store)
    }
    assert seen[2] == ["f1.txt", "f2.txt"]  # f3.txt, written after step 1, was taken away
    assert sorted(p.name for p in ws.iterdir()) == ["f1.txt", "f2.txt", "f3.txt"]


def test_a_link_that_climbs_after_another_link_is_refused(store: Store, tmp_path: Path) -> None:
    """Read lexically, ``top/../../../secret`` is inside; on disk ``top`` is the root,
    and the climb after it leaves the workspace (found by an adversarial review)."""
    ws = tmp_path / "a" / "b" / "ws"
    (ws / "d1" / "d2" / "d3").mkdir(parents=True)
    (tmp_path / "a" / "secret").write_text("outside")
    os.symlink("../../..", ws / "d1" / "d2" / "d3" / "top")  # the workspace itself
    os.symlink("d1/d2/d3/top/../../secret", ws / "notes.txt")
    assert (ws / "notes.txt").read_text() == "outside"  # it does point out
    wf = Workflow("links-chained", workspace=ws)

    @wf.step(entry=True)
    def one(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        return {}, END

    with pytest.raises(WorkspaceError, match=r"notes\.txt ->"):
        run(wf, store=store)


def test_a_state_whose_only_key_is_tagged_keeps_its_files(store: Store, tmp_path: Path) -> None:
    """A state of one ``$sg:`` key of the user's is escaped as a tagged tree, so the
    keyframe cannot split the manifest out of it: its files were neither sent nor listed,
    and no checkpoint after the first restored."""
    ws = tmp_path / "ws"
    ws.mkdir()
    wf = Workflow("tagged-state", workspace=ws)

    @wf.step(entry=True)
    def add(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        n = state.get("$sg:n", 0) + 1
        (ws / f"f{n}.txt").write_text(f"file {n}")
        return {"$sg:n": n}, ("add" if n < 3 else END)

    done = run(wf, {}, store=store)
    assert verify(store=store).ok
    for h in history(done.run_id, store=store):
        cp = get_checkpoint(h.checkpoint_id, store=store)
        listed = set(store.get_checkpoint(h.checkpoint_id).header.blobs)
        if store.get_checkpoint(h.checkpoint_id).header.base_id is None:
            assert {f.digest for f in cp.state.get(WORKSPACE_KEY, {}).values()} <= listed
        there = tmp_path / f"at-{h.checkpoint_id}"
        there.mkdir()
        restore_workspace(cp, there, store=store)
        n = cp.state.get("$sg:n", 0)
        assert sorted(p.name for p in there.iterdir()) == [f"f{i}.txt" for i in range(1, n + 1)]
