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
from savegame.effects import PendingInterrupt, Tool, tool
from savegame.errors import (
    ApprovalRejected,
    CheckpointWriteError,
    CompensationError,
    ConfigurationError,
    ConflictError,
    CorruptRecordError,
    EffectSettledError,
    InDoubtEffectError,
    LeaseHeldError,
    LeaseLostError,
    NonDeterminismError,
    NotFoundError,
    RunStateError,
    SavegameError,
    SerializationError,
    StateVersionError,
    StepError,
)
from savegame.inspect import get_checkpoint, get_run, history, list_runs, list_threads
from savegame.maintenance import (
    PrunePlan,
    RetentionPolicy,
    StoreReport,
    VerifyReport,
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
    Effect,
    Observer,
    StepContext,
    Worker,
    Workflow,
    approve,
    aresume,
    arun,
    cancel,
    compensate,
    list_effects,
    pending_interrupts,
    reject,
    resolve,
    resume,
    run,
    submit,
)
from savegame.secrets import Secret
from savegame.stores import MemoryStore, SqliteStore, Store, open_store

__version__ = "0.1.0"

__all__ = [
    "END",
    "Agent",
    "ApprovalRejected",
    "ChatModel",
    "Checkpoint",
    "CheckpointHeader",
    "CheckpointPolicy",
    "CheckpointWriteError",
    "CompensationError",
    "ConfigurationError",
    "ConflictError",
    "CorruptRecordError",
    "Effect",
    "EffectKind",
    "EffectSettledError",
    "EffectStatus",
    "InDoubtEffectError",
    "Keyring",
    "Lease",
    "LeaseHeldError",
    "LeaseLostError",
    "MemoryStore",
    "ModelResponse",
    "NonDeterminismError",
    "NotFoundError",
    "Observer",
    "PendingInterrupt",
    "PrunePlan",
    "RetentionPolicy",
    "RunInfo",
    "RunResult",
    "RunStateError",
    "RunStatus",
    "SavegameError",
    "ScriptedModel",
    "Secret",
    "SerializationError",
    "SqliteStore",
    "StateVersionError",
    "StepContext",
    "StepError",
    "StorageConfig",
    "Store",
    "StoreReport",
    "Tool",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "VerifyReport",
    "Worker",
    "Workflow",
    "__version__",
    "approve",
    "aresume",
    "arun",
    "cancel",
    "compensate",
    "get_checkpoint",
    "get_run",
    "history",
    "list_effects",
    "list_runs",
    "list_threads",
    "open_store",
    "pending_interrupts",
    "prune",
    "register",
    "reject",
    "rekey",
    "resolve",
    "resume",
    "run",
    "stats",
    "submit",
    "tool",
    "verify",
]
