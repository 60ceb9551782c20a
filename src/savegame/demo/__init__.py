"""``savegame demo``: an agent paused for approval, SIGKILLed mid-refund, resumed in a fresh process.

The agent lives in :mod:`savegame.demo.refund`, its outside world (payment
provider, mail server) in :mod:`savegame.demo.world`, the worker process in
:mod:`savegame.demo.child`, the orchestration in :mod:`savegame.demo.driver`.
"""

from savegame.demo.driver import DemoReport, Entry, run_demo
from savegame.demo.processes import DemoError

__all__ = ["DemoError", "DemoReport", "Entry", "run_demo"]
