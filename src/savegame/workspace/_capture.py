"""Workspace snapshots: the files a run's steps edit, captured at each checkpoint.

A workflow with ``workspace=`` (a path, or a :class:`Workspace` with ignore patterns
and a size limit) has the directory's files captured at every checkpoint into the
state's manifest (:data:`~savegame.model.WORKSPACE_KEY`: ``{relative path:
StoredFile}``), each file's bytes a content-addressed blob in the store's blob table,
sealed like every blob (compressed, encrypted under a keyring). Only what changed
costs anything: a file whose size, mtime (ns), inode and mode are what the last
capture saw is not read again, a changed one is hashed and, when its content is new,
uploaded once; the manifest is written as a delta of its changed entries.

An unchanged stat vouches for a file only if its mtime is older than the last capture
(git's "racily clean" rule, :func:`vouches`): the kernel stamps a write with a clock
that ticks every 1 to 10 ms on ext2/3, NFS, and ext4/xfs before Linux 6.13, so a step
that rewrites a file at the same size within the tick of the last capture leaves the
same stat on a new content. Such a file is read again, once or twice after each write.

What is captured: regular files (content, permission bits) and symbolic links (their
target, never followed; a link must stay inside the workspace). Directories are
implied by the files in them (an empty one is not kept); other kinds of file (sockets,
fifos) are skipped. :mod:`savegame.workspace._restore` puts a manifest back.
"""

from __future__ import annotations

import itertools
import os
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from savegame.codec import blob_digest
from savegame.codec.storage import StorageConfig, resolve
from savegame.errors import ConfigurationError, WorkspaceError
from savegame.model import WORKSPACE_KEY, StoredFile

if TYPE_CHECKING:
    import pathspec

#: The default size limit of a workspace snapshot: what one checkpoint may refer to.
MAX_BYTES = 512 * 1024 * 1024

Stat = tuple[int, int, int, int]
"""What says a file is unchanged without reading it: size, mtime (ns), inode, mode."""

TICK_NS = 20_000_000
"""How much older than a capture's start a rewrite after it may be stamped: the clock
the kernel stamps files with is read at its last tick (every 1 to 10 ms, HZ 1000 to
100), and exFAT cuts a stamp to 10 ms."""

WHOLE_SECONDS_NS = 2_000_000_000
"""The same cut for a stamp of whole seconds: ext2/3 with 128-byte inodes and HFS+ keep
seconds, FAT even seconds. A stamp of whole seconds on a finer filesystem (set by
``tar`` or ``cp -p``) is almost always old, so the longer wait costs nothing there."""


@dataclass(frozen=True, slots=True)
class Workspace:
    """A directory snapshotted with every checkpoint of a run, restored on resume.

    Args:
        path: the directory (a relative path is taken from the working directory of
            the process that runs the workflow).
        ignore: patterns in gitignore syntax (``"*.log"``, ``"build/"``, ``"!keep.log"``)
            of paths neither captured nor touched by a restore.
        max_bytes: the most bytes of files a snapshot may hold; a larger one stops the
            run with a :class:`~savegame.errors.WorkspaceError` naming the largest files.
    """

    path: str | os.PathLike[str]
    ignore: Sequence[str] = ()
    max_bytes: int = MAX_BYTES
    _spec: pathspec.GitIgnoreSpec = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.ignore, str):
            raise ConfigurationError("workspace ignore= takes a list of patterns, not one string")
        if self.max_bytes < 0:
            raise ConfigurationError("workspace max_bytes must be >= 0")
        object.__setattr__(self, "ignore", tuple(self.ignore))
        # Imported by the first Workspace: pathspec costs ~12 ms to import, paid otherwise
        # by every process that loads the runtime, most of them snapshotting no directory.
        import pathspec

        object.__setattr__(self, "_spec", pathspec.GitIgnoreSpec.from_lines(self.ignore))

    @property
    def root(self) -> Path:
        return Path(os.path.abspath(self.path))

    def ignored(self, rel: str, is_dir: bool = False) -> bool:
        # Most workspaces have no patterns: matching nothing cost a third of a capture.
        return bool(self.ignore) and self._spec.match_file(rel + "/" if is_dir else rel)


WorkspaceSpec = Workspace | str | os.PathLike[str] | Callable[[str], Any] | None
"""What ``Workflow(workspace=)`` takes: a path, a Workspace, or a function of the run id
giving either (one directory per run)."""


def as_workspace(value: Any, run_id: str | None = None) -> Workspace | None:
    """``workspace=`` as a Workspace: a function is called with ``run_id`` (and left as
    it is without one, when a workflow is defined)."""
    if callable(value) and not isinstance(value, Workspace):
        if run_id is None:
            return None
        value = value(run_id)
    if value is None or isinstance(value, Workspace):
        return value
    if isinstance(value, (str, os.PathLike)):
        return Workspace(value)
    raise ConfigurationError(
        "workspace= takes a path, a savegame.Workspace or a function of the run id "
        f"giving one, not {type(value).__qualname__}"
    )


def scan(ws: Workspace) -> Iterator[tuple[str, os.stat_result]]:
    """Every file and link of the workspace not ignored, as (posix relative path, lstat)."""
    root = ws.root
    if not root.is_dir():
        return
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(root / rel_dir if rel_dir else root) as entries:
            for entry in entries:
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    if not ws.ignored(rel, is_dir=True):
                        stack.append(rel)
                elif (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)) and not ws.ignored(rel):
                    yield rel, st


def stat_key(st: os.stat_result) -> Stat:
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode)


def vouches(mtime_ns: int, since_ns: int) -> bool:
    """Whether a file's stat, the same as when a capture that began at ``since_ns``
    (``time.time_ns()``) saw it, says its content is the same too.

    Only if its mtime is older than any stamp a write after that start can carry:
    otherwise a rewrite in the same tick, at the same size, in place, left the stat as
    it was (git's "racily clean" entries). A stamp in the future (a server's clock ahead
    of ours) never vouches.
    """
    cut = WHOLE_SECONDS_NS if mtime_ns % 1_000_000_000 == 0 else 0
    return mtime_ns + cut + TICK_NS < since_ns


def stored_mode(st_mode: int) -> int:
    """The file type and permission bits kept (no setuid, setgid or sticky bit)."""
    return stat.S_IFMT(st_mode) | (st_mode & 0o777)


def link_inside(rel: str, target: str) -> bool:
    """Whether a link at ``rel`` to ``target`` stays inside the workspace.

    Read lexically, ``a/link/../x`` is ``a/x``; on disk, ``..`` after a link climbs
    from wherever that link points, which may be the root or above. So ``..`` is
    allowed only at the start of a target (climbing from the link's own directory,
    which is real); after that the target only descends, and every link it descends
    through was itself checked to stay inside.
    """
    if not target or os.path.isabs(target) or "\0" in target:
        return False
    parts = [p for p in target.split("/") if p not in ("", ".")]
    climbs = len(parts) - len(list(itertools.dropwhile(lambda p: p == "..", parts)))
    if ".." in parts[climbs:]:
        return False
    joined = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    return joined != ".." and not joined.startswith("../") and not os.path.isabs(joined)


@dataclass(frozen=True, slots=True)
class Capture:
    """One snapshot: the manifest, and the bytes of its files new since the last one."""

    manifest: dict[str, StoredFile]
    files: dict[str, bytes]
    changed: bool


class Snapshots:
    """The captures of one execution: remembers what the last one saw, to read less."""

    def __init__(
        self,
        ws: Workspace,
        manifest: dict[str, StoredFile] | None,
        stats: dict[str, Stat] | None = None,
        storage: StorageConfig | None = None,
        *,
        since: int = 0,
    ) -> None:
        """``manifest``: the start checkpoint's; ``stats``: what a restore left on disk,
        ``since``: when it began (``time.time_ns()``; 0 trusts none of them)."""
        self.ws, self.storage = ws, resolve(storage)
        self.manifest: dict[str, StoredFile] = manifest or {}
        self.stats: dict[str, Stat] = stats or {}
        self.since = since
        """When the capture that took ``stats`` began: see :func:`vouches`."""

    def capture(self) -> Capture:
        """The workspace now.

        Raises:
            WorkspaceError: larger than ``max_bytes`` (naming the largest files), or a
                link that leaves the workspace.
        """
        # Before the first stat: a write after any of them is stamped no earlier than
        # TICK_NS before this.
        started = time.time_ns()
        found = sorted(scan(self.ws), key=itemgetter(0))
        self._check_size(found)
        old, known = self.manifest, {e.digest for e in self.manifest.values()}
        manifest: dict[str, StoredFile] = {}
        files: dict[str, bytes] = {}
        stats: dict[str, Stat] = {}
        for rel, st in found:
            key = stat_key(st)
            before = old.get(rel)
            if (
                before is not None
                and self.stats.get(rel) == key
                and vouches(st.st_mtime_ns, self.since)
            ):
                manifest[rel], stats[rel] = before, key
                continue
            entry, data = self._read(rel, st)
            if entry is None:
                continue  # gone since the scan: it is not in this snapshot
            if entry == before:
                entry = before  # the same object: the manifest's delta skips it at once
            elif entry.digest not in known and entry.digest not in files:
                files[entry.digest] = data
            manifest[rel], stats[rel] = entry, key
        changed = manifest.keys() != old.keys() or any(manifest[k] is not old[k] for k in manifest)
        self.manifest, self.stats = (manifest if changed else old), stats
        self.since = started
        return Capture(self.manifest, files, changed)

    def _read(self, rel: str, st: os.stat_result) -> tuple[StoredFile | None, bytes]:
        path = self.ws.root / rel
        try:
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(path)
                if not link_inside(rel, target):
                    raise WorkspaceError(
                        str(self.ws.root),
                        f"the link {rel} -> {target} leaves the workspace; links are kept as "
                        "links and must point inside it (ignore it with ignore=)",
                    )
                data = os.fsencode(target)
            else:
                data = path.read_bytes()
        except FileNotFoundError:
            return None, b""
        digest = blob_digest(data, self.storage)
        return StoredFile(digest, stored_mode(st.st_mode), len(data)), data

    def _check_size(self, found: list[tuple[str, os.stat_result]]) -> None:
        total = sum(st.st_size for _, st in found)
        if total <= self.ws.max_bytes:
            return
        largest = sorted(found, key=lambda item: -item[1].st_size)[:5]
        names = ", ".join(f"{rel} ({st.st_size:,} bytes)" for rel, st in largest)
        raise WorkspaceError(
            str(self.ws.root),
            f"{total:,} bytes of files, more than max_bytes={self.ws.max_bytes:,}; the "
            f"largest: {names} (ignore them with ignore=, or raise max_bytes)",
        )


def manifest_of(state: dict[str, Any]) -> dict[str, StoredFile] | None:
    """The workspace manifest a state holds, if any (checked by restore before use)."""
    manifest = state.get(WORKSPACE_KEY)
    return manifest if type(manifest) is dict else None
