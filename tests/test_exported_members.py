"""The public API is what ``savegame/__init__.py`` exports; each package's ``__init__``
exports what the other packages and users import from it (its modules are private)."""

from __future__ import annotations

import importlib

import pytest

import savegame

PUBLIC_API = [
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


def test_the_public_api_is_pinned() -> None:
    assert savegame.__all__ == PUBLIC_API


@pytest.mark.parametrize(
    "package",
    [
        "savegame",
        "savegame.agent",
        "savegame.effects",
        "savegame.inspect",
        "savegame.maintenance",
        "savegame.runtime",
    ],
)
def test_a_package_exports_only_names_it_has(package: str) -> None:
    module = importlib.import_module(package)
    assert [name for name in module.__all__ if not hasattr(module, name)] == []
