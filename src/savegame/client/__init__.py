"""The front door: ``savegame.connect()`` and the handle it returns.

A :class:`Savegame` owns one open store and its storage settings; every operation is a
method of it (as httpx's ``Client``, DBOS's ``DBOSClient``, Temporal's ``Client``).
The module functions (``savegame.run(wf, store=...)``) are one-shot conveniences over
it: each opens a handle for the call, calls the method, closes it (as ``httpx.get``).
The CLI opens one handle per command, the web UI holds one for the server's life.

Where things are::

    _bound.py       Bound: the open store, the storage settings, a call's scope, close
    _runs.py        Runs: run, arun, resume, aresume, submit, fork, send, cancel, compensate
    _decisions.py   Decisions: pending, approve, reject, supply, resolve
    _reading.py     Reading: runs, threads, get_run, history, checkpoint, effects, diff,
                    tree, plan_fork, model_calls, model_usage, restore_workspace, replay
    _upkeep.py      Upkeep: export, import_run, prune, verify, stats, rekey
    _fleet.py       the sub-handles ``sg.schedules`` and ``sg.queues``
    _handle.py      Savegame (the parts together, ``with``, ``sg.worker()``), connect()
    _oneshot_runs.py   the module functions over Runs and Decisions: run, resume, approve ...
    _oneshot_store.py  the module functions over Reading, Upkeep, schedules and queues

Users import from here every operation's one-shot function (the root keeps the everyday
ones: ``run``, ``resume``, ``approve`` ...) and the records the handle's methods take and
return that no other namespace owns (``Decision``, ``ForkResult``, ``Sent`` ...).
"""

from savegame.client._fleet import Queues, Schedules
from savegame.client._handle import Savegame, connect
from savegame.client._oneshot_runs import (
    approve,
    aresume,
    arun,
    cancel,
    compensate,
    fork,
    pending_interrupts,
    reject,
    resolve,
    resume,
    run,
    send,
    submit,
    supply,
)
from savegame.client._oneshot_store import (
    declare_queue,
    diff,
    export_run,
    fire_schedules,
    get_checkpoint,
    get_run,
    get_schedule,
    history,
    import_run,
    list_effects,
    list_queues,
    list_runs,
    list_schedules,
    list_threads,
    model_calls,
    model_usage,
    pause_schedule,
    plan_fork,
    prune,
    rekey,
    remove_schedule,
    replay,
    restore_workspace,
    resume_schedule,
    schedule,
    stats,
    tree,
    verify,
)
from savegame.control import Decision, Effect, ForkPlan, ForkResult, Sent
from savegame.runtime import Observer, OwnerGone, owner_gone
from savegame.workspace import RestoredWorkspace

#: The module function each handle method stands for: ``savegame.<function>`` is
#: ``sg.<method>`` with ``store=`` and ``storage=`` (a dotted method is on a sub-handle).
#: tests/client/test_parity.py holds every root function that takes ``store=`` to it.
METHODS: dict[str, str] = {
    "run": "run",
    "arun": "arun",
    "resume": "resume",
    "aresume": "aresume",
    "submit": "submit",
    "fork": "fork",
    "send": "send",
    "cancel": "cancel",
    "compensate": "compensate",
    "pending_interrupts": "pending",
    "approve": "approve",
    "reject": "reject",
    "supply": "supply",
    "resolve": "resolve",
    "list_runs": "runs",
    "list_threads": "threads",
    "get_run": "get_run",
    "history": "history",
    "get_checkpoint": "checkpoint",
    "list_effects": "effects",
    "diff": "diff",
    "tree": "tree",
    "replay": "replay",
    "plan_fork": "plan_fork",
    "model_calls": "model_calls",
    "model_usage": "model_usage",
    "restore_workspace": "restore_workspace",
    "export_run": "export",
    "import_run": "import_run",
    "prune": "prune",
    "verify": "verify",
    "stats": "stats",
    "rekey": "rekey",
    "schedule": "schedules.add",
    "get_schedule": "schedules.get",
    "list_schedules": "schedules.list",
    "pause_schedule": "schedules.pause",
    "resume_schedule": "schedules.resume",
    "remove_schedule": "schedules.remove",
    "fire_schedules": "schedules.fire",
    "declare_queue": "queues.declare",
    "list_queues": "queues.list",
}

__all__ = [
    "METHODS",
    "Decision",
    "Effect",
    "ForkPlan",
    "ForkResult",
    "Observer",
    "OwnerGone",
    "Queues",
    "RestoredWorkspace",
    "Savegame",
    "Schedules",
    "Sent",
    "approve",
    "aresume",
    "arun",
    "cancel",
    "compensate",
    "connect",
    "declare_queue",
    "diff",
    "export_run",
    "fire_schedules",
    "fork",
    "get_checkpoint",
    "get_run",
    "get_schedule",
    "history",
    "import_run",
    "list_effects",
    "list_queues",
    "list_runs",
    "list_schedules",
    "list_threads",
    "model_calls",
    "model_usage",
    "owner_gone",
    "pause_schedule",
    "pending_interrupts",
    "plan_fork",
    "prune",
    "reject",
    "rekey",
    "remove_schedule",
    "replay",
    "resolve",
    "restore_workspace",
    "resume",
    "resume_schedule",
    "run",
    "schedule",
    "send",
    "stats",
    "submit",
    "supply",
    "tree",
    "verify",
]
