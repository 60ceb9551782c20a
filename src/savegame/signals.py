"""Control-flow signals raised inside a step and caught by the runner.

They derive from BaseException, like KeyboardInterrupt, so a step's
``except Exception`` cannot swallow a pause or a cancellation by accident.
They sit beside :mod:`savegame.errors`, below both layers that use them:
``effects`` raises them (a call that waits for approval), ``runtime`` catches them.
"""

from __future__ import annotations

from savegame.errors import InDoubtEffectError
from savegame.model import Waiting


class Pause(BaseException):
    """The run waits for a person: an approval or a value for ``ctx.interrupt``."""

    def __init__(self, interrupt_id: str) -> None:
        self.interrupt_id = interrupt_id
        super().__init__(interrupt_id)


class Cancel(BaseException):
    """Someone asked the run to stop (``savegame cancel``)."""


class Halt(BaseException):
    """A Ctrl-C asked this process to stop its runs (:mod:`savegame.runtime._sigint`): the
    step stops before its next call, and the run is checkpointed interrupted with that
    step to run again on resume."""


class NeedsAttention(BaseException):
    """An in-doubt effect stops the run until a person settles it."""

    def __init__(self, error: InDoubtEffectError) -> None:
        self.error = error
        super().__init__(str(error))


class Suspend(BaseException):
    """The step waits for a timer, events or child runs: the run is checkpointed waiting
    (no process is held) and the step runs again from its start once the store wakes it."""

    def __init__(self, waiting: Waiting, reason: str) -> None:
        self.waiting = waiting
        self.reason = reason
        """What it waits for, for people (``sleep until ...``, ``event 'paid'``)."""
        super().__init__(reason)
