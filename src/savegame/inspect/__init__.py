"""Time travel: look at runs, histories and checkpoints, compare them, and a thread's tree of runs;
replay recorded runs against new code."""

from savegame.inspect._diff import Change, ChangeKind, StateDiff, compare, diff
from savegame.inspect._history import get_checkpoint, get_run, history, list_runs, list_threads
from savegame.inspect._models import (
    ModelCallRecord,
    ModelUsage,
    RunModelUsage,
    model_calls,
    model_usage,
)
from savegame.inspect._replay import replay, replay_file
from savegame.inspect._replay_report import (
    Divergence,
    LiveRun,
    ReplayedCall,
    ReplayReport,
    RunReplay,
    StateDifference,
)
from savegame.inspect._tree import RunNode, Tree, tree

__all__ = [
    "Change",
    "ChangeKind",
    "Divergence",
    "LiveRun",
    "ModelCallRecord",
    "ModelUsage",
    "ReplayReport",
    "ReplayedCall",
    "RunModelUsage",
    "RunNode",
    "RunReplay",
    "StateDiff",
    "StateDifference",
    "Tree",
    "compare",
    "diff",
    "get_checkpoint",
    "get_run",
    "history",
    "list_runs",
    "list_threads",
    "model_calls",
    "model_usage",
    "replay",
    "replay_file",
    "tree",
]
