"""Runs steps, applies the checkpoint policy, holds leases, resumes.

Where things are, along the path of a run::

    _workflow.py      Workflow: named steps, an entry step, state migrations
    _policy.py        CheckpointPolicy and Durability: when and how durably to save
    _api.py           run / resume and their async twins
    _setup.py         start_run, prepare_resume: a new run, or one checked and loaded
    _execution.py     Execution: what one execution is given; Observer
    _runner.py        the step loop (boundary, signals, advance)
    _sigint.py        Ctrl-C during a run: the first stops it at a boundary, a second at once
    _context.py       StepContext: what a step sees besides its state
    _persist.py       the saver: encode, upload missing blobs, write, commit notice
    _mutations.py     the debug check for state changed in place
    _bridge.py        one async loop behind the sync and the async API
    _lease.py         who owns a run, whether it is gone, the heartbeat
    _loader.py        finding a workflow again from its reference
    _control.py       acting on runs from outside: cancel, compensate, approve ...
    _fork.py          fork: a new run from any checkpoint, its edit, what it reused
    _edits.py         a person's edit of a state: keys and paths
    _decision.py      after a decision: continue the run here if its workflow loads, else queue it
    _start.py         start or continue: a run id that exists, a thread that is busy
    _fleet.py         submit, and driving a run a worker claimed
    _worker.py        Worker: claims queued, orphaned and woken runs; fires due schedules
    _schedules.py     schedules: cron occurrences started once per fleet, the missed policy
    _queues.py        declare_queue, list_queues: queues with limits for the fleet
    _waiting.py       waiting runs from outside: woken yet? why not; blocking until they are
    _events.py        send: an event to a run, from any process
    _children.py      child runs: started once, their ends told to their parents
    _branches.py      ctx.gather / ctx.map: parallel branches, each numbering its own calls
    _workspace.py     Workspace: a directory's files captured at each checkpoint
    _restore.py       restore_workspace: a checkpoint's files put back
"""

from savegame.effects import ChildRun
from savegame.runtime._api import NO_VALUE, aresume, arun, resume, run
from savegame.runtime._context import StepContext
from savegame.runtime._control import (
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
from savegame.runtime._decision import Decision
from savegame.runtime._events import Sent, send
from savegame.runtime._execution import Observer
from savegame.runtime._fleet import submit
from savegame.runtime._fork import Call, ForkPlan, ForkResult, fork, plan_fork
from savegame.runtime._lease import DEFAULT_TTL, OwnerGone, holder_alive, owner_gone, owner_id
from savegame.runtime._lease import acquire as acquire_lease
from savegame.runtime._loader import as_workflow, load
from savegame.runtime._policy import CheckpointPolicy, Durability
from savegame.runtime._queues import declare_queue, list_queues
from savegame.runtime._restore import RestoredWorkspace, restore_workspace
from savegame.runtime._schedules import (
    fire_schedules,
    get_schedule,
    list_schedules,
    pause_schedule,
    remove_schedule,
    resume_schedule,
    schedule,
)
from savegame.runtime._sigint import stopped_at
from savegame.runtime._start import OnExists, OnThreadBusy
from savegame.runtime._worker import Worker, WorkerStats
from savegame.runtime._workflow import END, Workflow
from savegame.runtime._workspace import Workspace

__all__ = [
    "DEFAULT_TTL",
    "END",
    "NO_VALUE",
    "Call",
    "CheckpointPolicy",
    "ChildRun",
    "Decision",
    "Durability",
    "Effect",
    "ForkPlan",
    "ForkResult",
    "Observer",
    "OnExists",
    "OnThreadBusy",
    "OwnerGone",
    "RestoredWorkspace",
    "Sent",
    "StepContext",
    "Worker",
    "WorkerStats",
    "Workflow",
    "Workspace",
    "acquire_lease",
    "approve",
    "aresume",
    "arun",
    "as_workflow",
    "cancel",
    "compensate",
    "declare_queue",
    "fire_schedules",
    "fork",
    "get_schedule",
    "holder_alive",
    "list_effects",
    "list_queues",
    "list_schedules",
    "load",
    "owner_gone",
    "owner_id",
    "pause_schedule",
    "pending_interrupts",
    "plan_fork",
    "reject",
    "remove_schedule",
    "resolve",
    "restore_workspace",
    "resume",
    "resume_schedule",
    "run",
    "schedule",
    "send",
    "stopped_at",
    "submit",
    "supply",
]
