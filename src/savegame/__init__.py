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
from savegame.errors import (
    CheckpointWriteError,
    ConfigurationError,
    ConflictError,
    CorruptRecordError,
    LeaseHeldError,
    LeaseLostError,
    NotFoundError,
    RunStateError,
    SavegameError,
    SerializationError,
    StateVersionError,
    StepError,
)
from savegame.inspect import get_checkpoint, get_run, history, list_runs, list_threads
from savegame.model import Checkpoint, CheckpointHeader, Lease, RunInfo, RunResult, RunStatus, Usage
from savegame.runtime import (
    END,
    CheckpointPolicy,
    Observer,
    StepContext,
    Workflow,
    aresume,
    arun,
    resume,
    run,
)
from savegame.stores import MemoryStore, SqliteStore, Store, open_store

__version__ = "0.1.0"

__all__ = [
    "END",
    "Agent",
    "ChatModel",
    "Checkpoint",
    "CheckpointHeader",
    "CheckpointPolicy",
    "CheckpointWriteError",
    "ConfigurationError",
    "ConflictError",
    "CorruptRecordError",
    "Lease",
    "LeaseHeldError",
    "LeaseLostError",
    "MemoryStore",
    "ModelResponse",
    "NotFoundError",
    "Observer",
    "RunInfo",
    "RunResult",
    "RunStateError",
    "RunStatus",
    "SavegameError",
    "ScriptedModel",
    "SerializationError",
    "SqliteStore",
    "StateVersionError",
    "StepContext",
    "StepError",
    "Store",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "Workflow",
    "__version__",
    "aresume",
    "arun",
    "get_checkpoint",
    "get_run",
    "history",
    "list_runs",
    "list_threads",
    "open_store",
    "register",
    "resume",
    "run",
]
