"""savegame: durable execution for AI agents.

After each step of a run savegame saves a checkpoint (the complete runtime
state as pure data), so the run survives kill -9, a redeploy or a long wait and
continues exactly where it stopped.

    from savegame import Workflow, END, run

    wf = Workflow("counter")

    @wf.step(entry=True)
    def tick(state, ctx):
        n = state.get("n", 0) + 1
        return {"n": n}, ("tick" if n < 10 else END)

    result = run(wf, {}, store="sqlite:///savegame.db")

Every operation is a method of one handle on a store, opened once; the module functions
(``run`` above) are one-shot conveniences over it::

    with savegame.connect("sqlite:///savegame.db") as sg:
        result = sg.run(wf, {})
        sg.history(result.run_id)
"""

from __future__ import annotations

import importlib

# typing itself takes longer to import than the rest of this module (~10 ms): type checkers
# read a name TYPE_CHECKING as true, whatever it is bound to.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from savegame.agent import (
        Agent,
        ChatModel,
        ContextPolicy,
        KeepLast,
        ModelResponse,
        Prompt,
        ScriptedModel,
        ToolCall,
        ToolSpec,
    )
    from savegame.client import (
        Savegame,
        approve,
        aresume,
        arun,
        cancel,
        compensate,
        connect,
        declare_queue,
        diff,
        export_run,
        fire_schedules,
        fork,
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
        pending_interrupts,
        plan_fork,
        prune,
        reject,
        rekey,
        remove_schedule,
        resolve,
        restore_workspace,
        resume,
        resume_schedule,
        run,
        schedule,
        send,
        stats,
        submit,
        supply,
        tree,
        verify,
    )
    from savegame.codec import register
    from savegame.codec.crypto import Keyring
    from savegame.codec.storage import StorageConfig
    from savegame.control import Decision, Effect, ForkPlan, ForkResult, Sent
    from savegame.effects import Backoff, PendingInterrupt, Tool, tool
    from savegame.errors import (
        ApprovalRejected,
        CheckpointWriteError,
        ChildRunError,
        CompensationError,
        ConfigurationError,
        ConflictError,
        CorruptRecordError,
        DamagedExportError,
        EffectSettledError,
        EncryptionKeyError,
        InDoubtEffectError,
        LeaseHeldError,
        LeaseLostError,
        MissingBlobsError,
        ModelError,
        ModelRequestError,
        ModelTransientError,
        NonDeterminismError,
        NotFoundError,
        RunExistsError,
        RunStateError,
        SavegameError,
        SerializationError,
        StateVersionError,
        StepError,
        StoreNotFoundError,
        StoreUnavailableError,
        ThreadBusyError,
        ThreadExistsError,
        TimedOutError,
        UnauthenticatedRecordError,
        UnencryptedRecordError,
        WaitTimedOutError,
        WorkflowImportError,
        WorkspaceError,
    )
    from savegame.fleet import Worker
    from savegame.inspect import (
        Change,
        ChangeKind,
        ModelCallRecord,
        ModelUsage,
        RunModelUsage,
        RunNode,
        StateDiff,
        Tree,
    )
    from savegame.maintenance import (
        PrunePlan,
        RekeyReport,
        RetentionPolicy,
        StoreReport,
        TransferReport,
        VerifyReport,
    )
    from savegame.model import (
        Checkpoint,
        CheckpointHeader,
        EffectKind,
        EffectStatus,
        Lease,
        RunInfo,
        RunResult,
        RunStatus,
        Usage,
    )
    from savegame.runtime import (
        END,
        CheckpointPolicy,
        ChildRun,
        Observer,
        OwnerGone,
        StepContext,
        Workflow,
        owner_gone,
    )
    from savegame.secrets import Secret
    from savegame.stores import MemoryStore, Queue, QueueStats, SqliteStore, Store, open_store
    from savegame.stores.schedules import Missed
    from savegame.stores.schedules import ScheduleRecord as Schedule
    from savegame.workspace import RestoredWorkspace, Workspace

__version__ = "0.1.0"

#: Where each exported name lives, by module. ``import savegame`` imports none of them:
#: a name's module is imported the first time the name is read (PEP 562), so a script
#: pays for the runtime, the stores and the codec (and croniter, cryptography, sqlite3
#: behind them) only when it uses them, and ``savegame --help`` not at all. The
#: ``TYPE_CHECKING`` imports above are the same table for mypy and IDEs; a test keeps the
#: two equal.
_NAMES: dict[str, tuple[str, ...]] = {
    "savegame.agent": (
        "Agent",
        "ChatModel",
        "ContextPolicy",
        "KeepLast",
        "ModelResponse",
        "Prompt",
        "ScriptedModel",
        "ToolCall",
        "ToolSpec",
    ),
    "savegame.client": (
        "Savegame",
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
        "pause_schedule",
        "pending_interrupts",
        "plan_fork",
        "prune",
        "reject",
        "rekey",
        "remove_schedule",
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
    ),
    "savegame.codec": ("register",),
    "savegame.codec.crypto": ("Keyring",),
    "savegame.codec.storage": ("StorageConfig",),
    "savegame.control": ("Decision", "Effect", "ForkPlan", "ForkResult", "Sent"),
    "savegame.effects": ("Backoff", "PendingInterrupt", "Tool", "tool"),
    "savegame.errors": (
        "ApprovalRejected",
        "CheckpointWriteError",
        "ChildRunError",
        "CompensationError",
        "ConfigurationError",
        "ConflictError",
        "CorruptRecordError",
        "DamagedExportError",
        "EffectSettledError",
        "EncryptionKeyError",
        "InDoubtEffectError",
        "LeaseHeldError",
        "LeaseLostError",
        "MissingBlobsError",
        "ModelError",
        "ModelRequestError",
        "ModelTransientError",
        "NonDeterminismError",
        "NotFoundError",
        "RunExistsError",
        "RunStateError",
        "SavegameError",
        "SerializationError",
        "StateVersionError",
        "StepError",
        "StoreNotFoundError",
        "StoreUnavailableError",
        "ThreadBusyError",
        "ThreadExistsError",
        "TimedOutError",
        "UnauthenticatedRecordError",
        "UnencryptedRecordError",
        "WaitTimedOutError",
        "WorkflowImportError",
        "WorkspaceError",
    ),
    "savegame.fleet": ("Worker",),
    "savegame.inspect": (
        "Change",
        "ChangeKind",
        "ModelCallRecord",
        "ModelUsage",
        "RunModelUsage",
        "RunNode",
        "StateDiff",
        "Tree",
    ),
    "savegame.maintenance": (
        "PrunePlan",
        "RekeyReport",
        "RetentionPolicy",
        "StoreReport",
        "TransferReport",
        "VerifyReport",
    ),
    "savegame.model": (
        "Checkpoint",
        "CheckpointHeader",
        "EffectKind",
        "EffectStatus",
        "Lease",
        "RunInfo",
        "RunResult",
        "RunStatus",
        "Usage",
    ),
    "savegame.runtime": (
        "END",
        "CheckpointPolicy",
        "ChildRun",
        "Observer",
        "OwnerGone",
        "StepContext",
        "Workflow",
        "owner_gone",
    ),
    "savegame.secrets": ("Secret",),
    "savegame.stores": ("MemoryStore", "Queue", "QueueStats", "SqliteStore", "Store", "open_store"),
    "savegame.stores.schedules": ("Missed", "Schedule"),
    "savegame.workspace": ("RestoredWorkspace", "Workspace"),
}
#: Exported under another name than its module gives it.
_RENAMED = {"Schedule": "ScheduleRecord"}
_MODULE_OF = {name: module for module, names in _NAMES.items() for name in names}

__all__ = [  # noqa: RUF022 - grouped by what a user does, not sorted; pinned by a test
    # The front door: a handle on one store, every operation a method of it
    "Savegame",
    "connect",
    # Workflows and runs
    "END",
    "Checkpoint",
    "CheckpointHeader",
    "CheckpointPolicy",
    "Lease",
    "Observer",
    "RunInfo",
    "RunResult",
    "RunStatus",
    "StepContext",
    "Usage",
    "Workflow",
    "aresume",
    "arun",
    "resume",
    "run",
    # Workspace snapshots
    "RestoredWorkspace",
    "Workspace",
    "restore_workspace",
    # Agents
    "Agent",
    "ChatModel",
    "ContextPolicy",
    "KeepLast",
    "ModelCallRecord",
    "ModelResponse",
    "ModelUsage",
    "Prompt",
    "RunModelUsage",
    "ScriptedModel",
    "ToolCall",
    "ToolSpec",
    "model_calls",
    "model_usage",
    # Side effects, people and sagas
    "Decision",
    "Effect",
    "EffectKind",
    "EffectStatus",
    "Backoff",
    "PendingInterrupt",
    "Tool",
    "approve",
    "cancel",
    "compensate",
    "list_effects",
    "pending_interrupts",
    "reject",
    "resolve",
    "supply",
    "tool",
    # A worker fleet
    "OwnerGone",
    "Queue",
    "QueueStats",
    "Worker",
    "declare_queue",
    "list_queues",
    "owner_gone",
    "submit",
    # Schedules: cron occurrences started once per fleet
    "Missed",
    "Schedule",
    "fire_schedules",
    "get_schedule",
    "list_schedules",
    "pause_schedule",
    "remove_schedule",
    "resume_schedule",
    "schedule",
    # Waiting without a process: events, timers, child runs
    "ChildRun",
    "Sent",
    "send",
    # Reading a store, time travel
    "Change",
    "ChangeKind",
    "StateDiff",
    "diff",
    "get_checkpoint",
    "get_run",
    "history",
    "list_runs",
    "list_threads",
    # Moving runs between stores
    "TransferReport",
    "export_run",
    "import_run",
    # Time travel
    "ForkPlan",
    "ForkResult",
    "RunNode",
    "Tree",
    "fork",
    "plan_fork",
    "tree",
    # Stores and storage
    "Keyring",
    "MemoryStore",
    "Secret",
    "SqliteStore",
    "StorageConfig",
    "Store",
    "open_store",
    "register",
    # Keeping a store small and sound
    "PrunePlan",
    "RekeyReport",
    "RetentionPolicy",
    "StoreReport",
    "VerifyReport",
    "prune",
    "rekey",
    "stats",
    "verify",
    # Errors (the tree is drawn in savegame.errors)
    "ApprovalRejected",
    "CheckpointWriteError",
    "ChildRunError",
    "CompensationError",
    "ConfigurationError",
    "ConflictError",
    "CorruptRecordError",
    "DamagedExportError",
    "EffectSettledError",
    "EncryptionKeyError",
    "InDoubtEffectError",
    "LeaseHeldError",
    "LeaseLostError",
    "MissingBlobsError",
    "ModelError",
    "ModelRequestError",
    "ModelTransientError",
    "NonDeterminismError",
    "NotFoundError",
    "RunExistsError",
    "RunStateError",
    "SavegameError",
    "SerializationError",
    "StateVersionError",
    "StepError",
    "StoreNotFoundError",
    "StoreUnavailableError",
    "ThreadBusyError",
    "ThreadExistsError",
    "TimedOutError",
    "UnauthenticatedRecordError",
    "UnencryptedRecordError",
    "WaitTimedOutError",
    "WorkflowImportError",
    "WorkspaceError",
    # The version
    "__version__",
]


# Only at run time: mypy reads the TYPE_CHECKING imports, and a module __getattr__ it could
# see would type every misspelt ``savegame.X`` as Any instead of an error.
if not TYPE_CHECKING:
    import _thread  # built in: `import savegame` stays as light as it is

    # First reads of names from several threads at once each imported another part of the
    # package, in parallel across its import cycles, and Python's escape from the deadlock
    # handed some thread a half-made module (ImportError: partially initialized module).
    # One lock for first reads: those imports run one thread at a time. Reentrant: an
    # import may read another name. A subpackage read by name (`from savegame import
    # codec`, as the runtime's modules do while being imported) takes no lock: a thread
    # importing them directly would wait holding module locks. A name read while a module
    # is imported (`from savegame import Worker` in the UI, the CLI) may wait holding its
    # module lock, but the lock's holder imports lower layers only, which never need it
    # (tests/test_layers.py).
    _FIRST_READ = _thread.RLock()

    def __getattr__(name: str) -> Any:
        module = _MODULE_OF.get(name)
        if module is None:
            if not name.startswith("_"):  # never savegame.__main__, which runs the CLI
                # A subpackage read as an attribute (savegame.errors.NotFoundError) is
                # imported, as the eager package did for most; else whether it worked
                # hung on which name had been read first.
                try:
                    return importlib.import_module(f"savegame.{name}")
                except ModuleNotFoundError as exc:
                    if exc.name != f"savegame.{name}":
                        raise  # the subpackage is there; something it imports is not
            raise AttributeError(f"module 'savegame' has no attribute {name!r}")
        with _FIRST_READ:
            value = getattr(importlib.import_module(module), _RENAMED.get(name, name))
        globals()[name] = value  # read once: later reads are a plain global
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
