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
"""

from savegame.agent import Agent, ChatModel, ModelResponse, ScriptedModel, ToolCall, ToolSpec
from savegame.codec import register
from savegame.codec.crypto import Keyring
from savegame.codec.storage import StorageConfig
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
    NonDeterminismError,
    NotFoundError,
    RunExistsError,
    RunStateError,
    SavegameError,
    SerializationError,
    StateVersionError,
    StepError,
    StoreNotFoundError,
    ThreadBusyError,
    TimedOutError,
    UnauthenticatedRecordError,
    UnencryptedRecordError,
    WaitTimedOutError,
    WorkspaceError,
)
from savegame.inspect import (
    Change,
    ChangeKind,
    RunNode,
    StateDiff,
    Tree,
    diff,
    get_checkpoint,
    get_run,
    history,
    list_runs,
    list_threads,
    tree,
)
from savegame.maintenance import (
    PrunePlan,
    RekeyReport,
    RetentionPolicy,
    StoreReport,
    TransferReport,
    VerifyReport,
    export_run,
    import_run,
    prune,
    rekey,
    stats,
    verify,
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
    Decision,
    Effect,
    ForkPlan,
    ForkResult,
    Observer,
    RestoredWorkspace,
    Sent,
    StepContext,
    Worker,
    Workflow,
    Workspace,
    approve,
    aresume,
    arun,
    cancel,
    compensate,
    fork,
    list_effects,
    pending_interrupts,
    plan_fork,
    reject,
    resolve,
    restore_workspace,
    resume,
    run,
    send,
    submit,
)
from savegame.secrets import Secret
from savegame.stores import MemoryStore, SqliteStore, Store, open_store

__version__ = "0.1.0"

__all__ = [  # noqa: RUF022 - grouped by what a user does, not sorted; pinned by a test
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
    "ModelResponse",
    "ScriptedModel",
    "ToolCall",
    "ToolSpec",
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
    "tool",
    # A worker fleet
    "Worker",
    "submit",
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
    "NonDeterminismError",
    "NotFoundError",
    "RunExistsError",
    "RunStateError",
    "SavegameError",
    "SerializationError",
    "StateVersionError",
    "StepError",
    "StoreNotFoundError",
    "ThreadBusyError",
    "TimedOutError",
    "UnauthenticatedRecordError",
    "UnencryptedRecordError",
    "WaitTimedOutError",
    "WorkspaceError",
    # The version
    "__version__",
]
