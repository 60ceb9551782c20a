"""Putting a workspace back as a checkpoint's manifest says it was, byte for byte.

Files that differ are rewritten (through a temporary file and a rename), files the
manifest does not hold are deleted, permission bits are set, links are made again,
and directories left empty by the deletions are removed. Files already as the
manifest says are hashed and kept.

Ignored paths are left alone: never captured, they would be lost. A restore that
would have to remove one (a directory holding some where the manifest has a file, an
ignored file where it has a directory) is refused before anything is written, naming
them.

A stored manifest is not trusted for where it writes: a path that is absolute, holds
``..``, ``.`` or an empty part, or is both a file and a directory, a link whose target
leaves the workspace, or a mode other than a file's or a link's is refused before
anything is written; no write goes through a link (a link on the way is removed).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from savegame.codec import blob_digest, unseal_blob
from savegame.codec.storage import StorageConfig, resolve
from savegame.errors import CorruptRecordError, WorkspaceError
from savegame.model import Checkpoint, StoredFile
from savegame.stores.base import Store
from savegame.workspace._capture import (
    Stat,
    Workspace,
    as_workspace,
    link_inside,
    manifest_of,
    scan,
    stat_key,
)

_BATCH = 256
"""Blobs read from the store at once: bounds the memory a restore holds."""

_NAMED = 5
"""Ignored paths in the way a refusal names (then how many more)."""


@dataclass(frozen=True, slots=True)
class RestoredWorkspace:
    """What :func:`restore_workspace` did."""

    written: int
    """Files and links written (they differed or were missing)."""
    deleted: int
    """Files and links removed (the checkpoint does not hold them)."""
    kept: int
    """Files already as the checkpoint holds them."""
    stats: Mapping[str, Stat]
    """What each file of the manifest is on disk now (the next capture reads again only
    those it wrote too recently for their stat to vouch for them)."""


def restore_workspace(
    checkpoint: Checkpoint,
    path: str | os.PathLike[str] | Workspace,
    *,
    store: Store,
    storage: StorageConfig | None = None,
) -> RestoredWorkspace | None:
    """Make the directory ``path`` what it was at ``checkpoint``: files, deletions, modes.

    The operation behind :meth:`savegame.Savegame.restore_workspace`, which documents it, on
    the open ``store``.
    """
    ws = as_workspace(path)
    assert ws is not None
    manifest = manifest_of(checkpoint.state)
    if manifest is None:
        return None
    return restore(ws, manifest, store, storage, checkpoint.checkpoint_id)


def restore(
    ws: Workspace,
    manifest: dict[str, Any],
    store: Store,
    storage: StorageConfig | None,
    label: str,
) -> RestoredWorkspace:
    """:func:`restore_workspace` for a manifest (``label``: the checkpoint, for errors)."""
    config = resolve(storage)
    entries, dirs = _checked(manifest, label)
    _refuse_ignored_in_the_way(ws, entries, dirs, label)
    root = ws.root
    root.mkdir(parents=True, exist_ok=True)
    deleted = 0
    for rel, _ in list(scan(ws)):
        if rel not in entries:
            (root / rel).unlink(missing_ok=True)
            deleted += 1
    for rel in sorted(dirs):
        _make_dir(root, rel)
    pending: list[str] = []
    for rel, entry in entries.items():
        if not _same(root / rel, entry, config):
            pending.append(rel)
    for start in range(0, len(pending), _BATCH):
        batch = pending[start : start + _BATCH]
        stored = store.get_blobs(sorted({entries[rel].digest for rel in batch}))
        for rel in batch:
            _write(root, rel, entries[rel], stored, config, label)
    _remove_empty(ws, dirs)
    stats = {rel: stat_key(os.lstat(root / rel)) for rel in entries}
    return RestoredWorkspace(len(pending), deleted, len(entries) - len(pending), stats)


def _checked(manifest: dict[str, Any], label: str) -> tuple[dict[str, StoredFile], set[str]]:
    """The manifest's entries and the directories they need, every path checked."""
    entries: dict[str, StoredFile] = {}
    dirs: set[str] = set()
    for rel, entry in manifest.items():
        if type(rel) is not str or type(entry) is not StoredFile:
            raise CorruptRecordError(label, "its workspace manifest is not {path: file}")
        parts = rel.split("/")
        if (
            os.path.isabs(rel)
            or "\\" in rel
            or "\0" in rel
            or any(part in ("", ".", "..") for part in parts)
        ):
            raise CorruptRecordError(
                label, f"its workspace manifest names {rel!r}, a path outside the workspace"
            )
        if not (stat.S_ISREG(entry.mode) or stat.S_ISLNK(entry.mode)) or entry.size < 0:
            raise CorruptRecordError(
                label, f"its workspace manifest gives {rel!r} mode {entry.mode:o}"
            )
        entries[rel] = entry
        dirs.update("/".join(parts[:i]) for i in range(1, len(parts)))
    clash = sorted(dirs & entries.keys())
    if clash:
        raise CorruptRecordError(
            label, f"its workspace manifest has {clash[0]!r} as a file and a directory"
        )
    return entries, dirs


def _refuse_ignored_in_the_way(
    ws: Workspace, entries: Mapping[str, StoredFile], dirs: set[str], label: str
) -> None:
    """Refuse a restore that would remove ignored paths: inside a directory where the
    manifest has a file, or an ignored file or link where it has a directory."""
    root = ws.root
    found: list[str] = []
    real = {""}  # the manifest's directories that are directories on disk
    for rel in sorted(dirs):  # a parent before what is in it
        st = _lstat(root / rel) if rel.rpartition("/")[0] in real else None
        if st is not None and stat.S_ISDIR(st.st_mode):
            real.add(rel)
        elif st is not None and ws.ignored(rel):
            found.append(rel)
    for rel in sorted(entries):
        st = _lstat(root / rel) if rel.rpartition("/")[0] in real else None
        if st is not None and stat.S_ISDIR(st.st_mode):
            found.extend(_ignored_in(ws, rel))
    if found:
        named = ", ".join(found[:_NAMED])
        more = f" and {len(found) - _NAMED} more" if len(found) > _NAMED else ""
        raise WorkspaceError(
            str(root),
            f"checkpoint {label} has files where ignored paths stand ({named}{more}); a "
            "restore never touches ignored paths, so nothing was restored (move them away, "
            "or restore into another directory)",
        )


def _ignored_in(ws: Workspace, top: str) -> list[str]:
    """The ignored paths under the directory ``top`` (an ignored directory named alone)."""
    if ws.ignored(top, is_dir=True):
        return [f"{top}/"]
    found: list[str] = []
    stack = [top]
    while stack:
        here = stack.pop()
        with os.scandir(ws.root / here) as entries:
            for entry in entries:
                rel = f"{here}/{entry.name}"
                is_dir = entry.is_dir(follow_symlinks=False)
                if ws.ignored(rel, is_dir=is_dir):
                    found.append(f"{rel}/" if is_dir else rel)
                elif is_dir:
                    stack.append(rel)
    return sorted(found)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _make_dir(root: Path, rel: str) -> None:
    """``rel`` a real directory (its parents are, being made first): nothing else there."""
    path = root / rel
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        path.mkdir()
        return
    if stat.S_ISDIR(st.st_mode):
        return
    path.unlink()  # a fifo or socket in the way (ignored files were refused before)
    path.mkdir()


def _same(path: Path, entry: StoredFile, config: StorageConfig) -> bool:
    """Whether ``path`` already holds ``entry`` (its mode is set here if only that differs)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_IFMT(st.st_mode) != stat.S_IFMT(entry.mode) or st.st_size != entry.size:
        return False
    data = os.fsencode(os.readlink(path)) if stat.S_ISLNK(st.st_mode) else path.read_bytes()
    if blob_digest(data, config) != entry.digest:
        return False
    if stat.S_ISREG(st.st_mode) and st.st_mode & 0o777 != entry.mode & 0o777:
        os.chmod(path, entry.mode & 0o777)
    return True


def _write(
    root: Path,
    rel: str,
    entry: StoredFile,
    stored: Mapping[str, bytes],
    config: StorageConfig,
    label: str,
) -> None:
    raw = stored.get(entry.digest)
    if raw is None:
        raise CorruptRecordError(label, f"workspace file {rel}: blob {entry.digest} is missing")
    data = unseal_blob(entry.digest, raw, config)
    if len(data) != entry.size:
        raise CorruptRecordError(label, f"workspace file {rel}: not {entry.size} bytes")
    path = root / rel
    if os.path.lexists(path):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)  # emptied by the deletions but for fifos (refused if ignored)
        else:
            path.unlink()
    if stat.S_ISLNK(entry.mode):
        target = os.fsdecode(data)
        if not link_inside(rel, target):
            raise CorruptRecordError(
                label, f"workspace link {rel} -> {target!r} would leave the workspace"
            )
        os.symlink(target, path)
        return
    tmp = path.with_name(f".{path.name}.sg-restore")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        _write_all(fd, data)
        os.fchmod(fd, entry.mode & 0o777)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _remove_empty(ws: Workspace, needed: set[str]) -> None:
    """Directories the deletions left empty (and not needed, not ignored) go too."""
    root = ws.root
    for here, _, _ in os.walk(root, topdown=False):
        rel = os.path.relpath(here, root).replace(os.sep, "/")
        if rel == "." or rel in needed or ws.ignored(rel, is_dir=True):
            continue
        with contextlib.suppress(OSError):  # not empty: it holds ignored files
            os.rmdir(here)
