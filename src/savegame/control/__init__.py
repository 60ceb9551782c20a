"""Verbs on runs from outside them: what a person, a webhook or another process does.

Where things are::

    _verbs.py         cancel, compensate, approve, reject, supply, resolve; the journal
                      read back (list_effects, pending_interrupts)
    _decision.py      after a decision: continue the run here if its workflow loads, else
                      queue it for the fleet
    _events.py        send: an event to a run, from any process
    _fork.py          fork: a new run from any checkpoint, its edit, what it reused; a
                      strict replay (nothing called: ``savegame replay``)
    _edits.py         a person's edit of a state: keys and paths

Above the engine: each verb loads, drives, queues or ends a run through
``savegame.runtime``'s names (its ``Engine API``), never its modules. The functions
take an open store; the handle (``savegame.client``) is what opens one.
"""

from savegame.control._decision import Decision
from savegame.control._events import Sent, send
from savegame.control._fork import (
    Call,
    ForkPlan,
    ForkResult,
    StrictReplay,
    fork,
    plan_fork,
    strict_replay,
)
from savegame.control._verbs import (
    Effect,
    approve,
    cancel,
    compensate,
    list_effects,
    pending_interrupts,
    reject,
    resolve,
    supply,
)

__all__ = [
    "Call",
    "Decision",
    "Effect",
    "ForkPlan",
    "ForkResult",
    "Sent",
    "StrictReplay",
    "approve",
    "cancel",
    "compensate",
    "fork",
    "list_effects",
    "pending_interrupts",
    "plan_fork",
    "reject",
    "resolve",
    "send",
    "strict_replay",
    "supply",
]
