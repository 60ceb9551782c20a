"""Time travel: look at runs, histories and checkpoints, and compare them."""

from savegame.inspect._diff import Change, ChangeKind, StateDiff, compare, diff
from savegame.inspect._history import get_checkpoint, get_run, history, list_runs, list_threads

__all__ = [
    "Change",
    "ChangeKind",
    "StateDiff",
    "compare",
    "diff",
    "get_checkpoint",
    "get_run",
    "history",
    "list_runs",
    "list_threads",
]
