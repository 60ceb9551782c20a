"""``savegame demo``: an agent killed with SIGKILL mid-run, resumed in a fresh process.

The agent lives in :mod:`savegame.demo.refund`, the worker process in
:mod:`savegame.demo.child`, the orchestration in :mod:`savegame.demo.driver`.
"""

from savegame.demo.driver import DemoError, DemoReport, Entry, run_demo

__all__ = ["DemoError", "DemoReport", "Entry", "run_demo"]
