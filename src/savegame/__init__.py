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

    from savegame.agent import Agent, ChatModel, ScriptedModel
    from savegame.client import (
        Savegame,
        approve,
        aresume,
        arun,
        connect,
        reject,
        resolve,
        resume,
        run,
        send,
        submit,
        supply,
    )
    from savegame.codec import register
    from savegame.codec.storage import StorageConfig
    from savegame.effects import Backoff, tool
    from savegame.errors import SavegameError
    from savegame.fleet import Worker
    from savegame.model import RunInfo, RunResult, RunStatus
    from savegame.runtime import END, CheckpointPolicy, StepContext, Workflow
    from savegame.stores import MemoryStore, SqliteStore, Store, open_store
    from savegame.workspace import Workspace

__version__ = "0.1.0"

#: Where each exported name lives, by module. ``import savegame`` imports none of them:
#: a name's module is imported the first time the name is read (PEP 562), so a script
#: pays for the runtime, the stores and the codec (and croniter, cryptography, sqlite3
#: behind them) only when it uses them, and ``savegame --help`` not at all. The
#: ``TYPE_CHECKING`` imports above are the same table for mypy and IDEs; a test keeps the
#: two equal.
_NAMES: dict[str, tuple[str, ...]] = {
    "savegame.agent": ("Agent", "ChatModel", "ScriptedModel"),
    "savegame.client": (
        "Savegame",
        "approve",
        "aresume",
        "arun",
        "connect",
        "reject",
        "resolve",
        "resume",
        "run",
        "send",
        "submit",
        "supply",
    ),
    "savegame.codec": ("register",),
    "savegame.codec.storage": ("StorageConfig",),
    "savegame.effects": ("Backoff", "tool"),
    "savegame.errors": ("SavegameError",),
    "savegame.model": ("RunInfo", "RunResult", "RunStatus"),
    "savegame.fleet": ("Worker",),
    "savegame.runtime": ("END", "CheckpointPolicy", "StepContext", "Workflow"),
    "savegame.stores": ("MemoryStore", "SqliteStore", "Store", "open_store"),
    "savegame.workspace": ("Workspace",),
}
_MODULE_OF = {name: module for module, names in _NAMES.items() for name in names}

__all__ = [  # noqa: RUF022 - grouped by what a user does, not sorted; pinned by a test
    # The front door: a handle on one store, every operation a method of it
    "Savegame",
    "connect",
    # Workflows and runs; the functions are one-shot conveniences over the handle
    "END",
    "CheckpointPolicy",
    "StepContext",
    "Workflow",
    "Workspace",
    "RunInfo",
    "RunResult",
    "RunStatus",
    "aresume",
    "arun",
    "resume",
    "run",
    # Agents
    "Agent",
    "ChatModel",
    "ScriptedModel",
    # Side effects, and the people who decide on them
    "Backoff",
    "tool",
    "approve",
    "reject",
    "resolve",
    "supply",
    # A worker fleet, and runs that wait for an event
    "Worker",
    "send",
    "submit",
    # Stores and storage
    "MemoryStore",
    "SqliteStore",
    "StorageConfig",
    "Store",
    "open_store",
    "register",
    # The root of the error tree (the whole tree: savegame.errors)
    "SavegameError",
    # The version
    "__version__",
]

#: Names the root exported before it was made small, by the module that exports them now.
#: Each still reads from the root, with a DeprecationWarning naming its new spelling,
#: until they are removed in savegame 0.3 (docs/upgrading.md lists them). Type checkers do
#: not see them: a misspelt ``savegame.X`` stays an error, and the move shows at once.
_MOVED: dict[str, tuple[str, ...]] = {
    "savegame.agent": (
        "ContextPolicy",
        "KeepLast",
        "ModelResponse",
        "Prompt",
        "ToolCall",
        "ToolSpec",
    ),
    "savegame.client": (
        # every operation's one-shot function; each is also a method of the handle
        "cancel",
        "compensate",
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
        "rekey",
        "remove_schedule",
        "restore_workspace",
        "resume_schedule",
        "schedule",
        "stats",
        "tree",
        "verify",
        # what the handle's methods take and return
        "Decision",
        "Effect",
        "ForkPlan",
        "ForkResult",
        "Observer",
        "OwnerGone",
        "RestoredWorkspace",
        "Sent",
        "owner_gone",
    ),
    "savegame.codec.crypto": ("Keyring",),
    "savegame.effects": ("ChildRun", "PendingInterrupt", "Tool"),
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
        "Usage",
    ),
    "savegame.secrets": ("Secret",),
    "savegame.stores": ("Queue", "QueueStats"),
    "savegame.stores.schedules": ("Missed", "ScheduleRecord"),
}
#: Old root names whose new home spells them differently.
_RENAMED = {"Schedule": "ScheduleRecord"}
#: Old root name -> (its module now, its name there).
_NEW_HOME = {
    {new: old for old, new in _RENAMED.items()}.get(name, name): (module, name)
    for module, names in _MOVED.items()
    for name in names
}


def _moved(name: str) -> str:
    """The DeprecationWarning's text for an old root name: where it lives now."""
    module, new = _NEW_HOME[name]
    text = f"savegame.{name} moved to {module}.{new}"
    if module == "savegame.client":
        method = importlib.import_module(module).METHODS.get(name)
        if method is not None:
            text += f" (or the handle's method: sg.{method}(), sg = savegame.connect(...))"
    return f"{text}; the root name is deprecated and goes in savegame 0.3"


# Only at run time: mypy reads the TYPE_CHECKING imports, and a module __getattr__ it could
# see would type every misspelt ``savegame.X`` as Any instead of an error.
if not TYPE_CHECKING:
    import _thread  # built in: `import savegame` stays as light as it is
    import warnings as _warnings  # the interpreter imported it at start: costs nothing

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
        if module is None and name in _NEW_HOME:
            # Not cached in globals(): every read of an old name warns, each from its line.
            with _FIRST_READ:
                home, new = _NEW_HOME[name]
                value = getattr(importlib.import_module(home), new)
                message = _moved(name)
            _warnings.warn(message, DeprecationWarning, stacklevel=2)
            return value
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
            value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # read once: later reads are a plain global
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
