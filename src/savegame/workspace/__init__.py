"""The workspace: a directory's files captured at each checkpoint and put back.

Where things are::

    _capture.py       Workspace (a directory, its ignore patterns, its size limit); the
                      capture at each checkpoint and its stat cache (Snapshots); the manifest
    _restore.py       restore_workspace: a checkpoint's files, deletions, modes and links put
                      back; a hostile manifest refused

Below the engine: the saver captures and restores through the names here, and a
workflow's ``workspace=`` is read by :func:`as_workspace`. It needs the codec and the
stores only.
"""

from savegame.workspace._capture import (
    Snapshots,
    Workspace,
    WorkspaceSpec,
    as_workspace,
    manifest_of,
)
from savegame.workspace._restore import RestoredWorkspace, restore, restore_workspace

__all__ = [
    "RestoredWorkspace",
    "Snapshots",
    "Workspace",
    "WorkspaceSpec",
    "as_workspace",
    "manifest_of",
    "restore",
    "restore_workspace",
]
