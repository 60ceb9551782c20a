"""Time travel: look at runs, histories and checkpoints."""

from savegame.inspect._history import get_checkpoint, get_run, history, list_runs, list_threads

__all__ = ["get_checkpoint", "get_run", "history", "list_runs", "list_threads"]
