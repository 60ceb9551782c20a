"""The engine: runs steps, applies the checkpoint policy, holds leases, resumes.

Where things are, along the path of a run::

    _workflow.py      Workflow: named steps, an entry step, state migrations
    _validate.py      a workflow checked when loaded: next steps, entry, its tools
    _policy.py        CheckpointPolicy and Durability: when and how durably to save
    _api.py           run / resume and their async twins
    _start.py         start or continue: a run id that exists, a thread that is busy
    _setup.py         start_run, prepare_resume: a new run, or one checked and loaded
    _execution.py     Execution: what one execution is given; Observer
    _runner.py        the step loop (boundary, signals, advance)
    _sigint.py        Ctrl-C during a run: the first stops it at a boundary, a second at once
    _context.py       StepContext: what a step sees besides its state
    _persist.py       the saver: encode, upload missing blobs, write, commit notice
    _commit.py        group commit: runs at a boundary together share a transaction
    _mutations.py     the debug check for state changed in place
    _bridge.py        one async loop behind the sync and the async API
    _lease.py         who owns a run, whether it is gone, the heartbeat
    _loader.py        finding a workflow again from its reference
    _waiting.py       waiting runs from outside: woken yet? why not; blocking until they are
    _children.py      child runs: started once, their ends told to their parents
    _branches.py      ctx.gather / ctx.map: parallel branches, each numbering its own calls
    _trace.py         the tracing hook: spans for executions, steps, calls
    _versions.py      a workflow's code version: declared, or a digest of its steps' source

Its neighbours above, each a package of its own: ``control/`` (verbs on runs from
outside: approve, cancel, fork, send ...) and ``fleet/`` (submit, Worker, schedules,
queues). Below it, ``workspace/`` (a directory's files captured at each checkpoint and
put back). They use the engine through the names below only, never its modules: the
ones the API re-exports (Workflow, run, resume, StepContext, the lease helpers ...), and
the engine API, what a verb from outside or a worker needs to start, load, drive, queue
or end a run:

    start           StartOptions, begin_submit, first_checkpoint, run_row, current_result
    load            PreparedRun, prepare_resume, decode_checkpoint, workflow_of, reference_of
    drive           execute, run_sync, direct_io, Heartbeat
    queue and end   queue_run, events_for_parent, children_of, woken, free_dead,
                    holder_is_dead
    versions        check_versions (a worker's), VERSION_KEY is savegame.model's
    integrations    traced_model_call, traced_tool_call: spans for the calls a framework's
                    adapter journals through ``ctx.calls``, as ``ctx.llm``/``ctx.call`` trace theirs
"""

from savegame.effects import ChildRun
from savegame.runtime._api import NO_VALUE, aresume, arun, resume, run
from savegame.runtime._bridge import direct_io, run_sync
from savegame.runtime._children import children_of
from savegame.runtime._children import ending as events_for_parent
from savegame.runtime._context import StepContext
from savegame.runtime._execution import Observer
from savegame.runtime._lease import (
    DEFAULT_TTL,
    Heartbeat,
    OwnerGone,
    free_dead,
    holder_alive,
    holder_is_dead,
    owner_gone,
    owner_id,
)
from savegame.runtime._lease import acquire as acquire_lease
from savegame.runtime._loader import as_workflow, load, reference_of
from savegame.runtime._policy import CheckpointPolicy, Durability
from savegame.runtime._runner import execute
from savegame.runtime._setup import (
    PreparedRun,
    first_checkpoint,
    prepare_resume,
    run_row,
    workflow_of,
)
from savegame.runtime._setup import decode as decode_checkpoint
from savegame.runtime._sigint import stopped_at
from savegame.runtime._start import (
    OnExists,
    OnThreadBusy,
    StartOptions,
    begin_submit,
    current_result,
)
from savegame.runtime._start import queue as queue_run
from savegame.runtime._trace import CallTrace, traced_model_call, traced_tool_call
from savegame.runtime._versions import check_versions
from savegame.runtime._waiting import woken
from savegame.runtime._workflow import END, Workflow

__all__ = [
    "DEFAULT_TTL",
    "END",
    "NO_VALUE",
    "CallTrace",
    "CheckpointPolicy",
    "ChildRun",
    "Durability",
    "Heartbeat",
    "Observer",
    "OnExists",
    "OnThreadBusy",
    "OwnerGone",
    "PreparedRun",
    "StartOptions",
    "StepContext",
    "Workflow",
    "acquire_lease",
    "aresume",
    "arun",
    "as_workflow",
    "begin_submit",
    "check_versions",
    "children_of",
    "current_result",
    "decode_checkpoint",
    "direct_io",
    "events_for_parent",
    "execute",
    "first_checkpoint",
    "free_dead",
    "holder_alive",
    "holder_is_dead",
    "load",
    "owner_gone",
    "owner_id",
    "prepare_resume",
    "queue_run",
    "reference_of",
    "resume",
    "run",
    "run_row",
    "run_sync",
    "stopped_at",
    "traced_model_call",
    "traced_tool_call",
    "woken",
    "workflow_of",
]
