"""The public API is what ``savegame/__init__.py`` exports; each package's ``__init__``
exports what the other packages and users import from it (its modules are private)."""

from __future__ import annotations

import importlib

import pytest

import savegame

PUBLIC_API = [
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
    "ModelCallRecord",
    "ModelResponse",
    "ModelUsage",
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
    "tool",
    # A worker fleet
    "Queue",
    "QueueStats",
    "Worker",
    "declare_queue",
    "list_queues",
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
    "ThreadBusyError",
    "TimedOutError",
    "UnauthenticatedRecordError",
    "UnencryptedRecordError",
    "WaitTimedOutError",
    "WorkspaceError",
    # The version
    "__version__",
]


def test_the_public_api_is_pinned() -> None:
    """Grouped by what a user does with it; a change here is a change to the public API."""
    assert savegame.__all__ == PUBLIC_API
    assert len(set(PUBLIC_API)) == len(PUBLIC_API)


MODELS_API = ["Anthropic", "LiteLLM", "OpenAI", "Price", "lookup_price"]


def test_the_model_adapters_are_pinned() -> None:
    import savegame.models

    assert savegame.models.__all__ == MODELS_API


def test_the_errors_the_readme_promises_are_exported() -> None:
    for name in ("EncryptionKeyError", "UnencryptedRecordError", "MissingBlobsError"):
        assert issubclass(getattr(savegame, name), savegame.SavegameError)


#: What ``savegame.langgraph`` (``savegame[langgraph]``) gives a LangGraph user.
LANGGRAPH_API = ["MigrationReport", "SavegameSaver", "ThreadResult", "durable_tool", "migrate"]


def test_the_langgraph_api_is_pinned() -> None:
    pytest.importorskip("langgraph")
    import savegame.integrations.langgraph
    import savegame.langgraph

    assert savegame.langgraph.__all__ == LANGGRAPH_API
    for name in LANGGRAPH_API:
        assert getattr(savegame.langgraph, name) is getattr(savegame.integrations.langgraph, name)


@pytest.mark.parametrize(
    "package",
    [
        "savegame",
        "savegame.agent",
        "savegame.effects",
        "savegame.inspect",
        "savegame.maintenance",
        "savegame.models",
        "savegame.runtime",
    ],
)
def test_a_package_exports_only_names_it_has(package: str) -> None:
    module = importlib.import_module(package)
    assert [name for name in module.__all__ if not hasattr(module, name)] == []
