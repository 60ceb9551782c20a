"""The public API is what ``savegame/__init__.py`` exports; each package's ``__init__``
exports what the other packages and users import from it (its modules are private)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import savegame

PUBLIC_API = [
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


def test_the_public_api_is_pinned() -> None:
    """Grouped by what a user does with it; a change here is a change to the public API."""
    assert savegame.__all__ == PUBLIC_API
    assert len(set(PUBLIC_API)) == len(PUBLIC_API)


MODELS_API = ["Anthropic", "LiteLLM", "LocalServer", "OpenAI", "Price", "lookup_price"]


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


#: What ``savegame.integrations.pydantic_ai`` (``savegame[pydantic-ai]``) gives a
#: pydantic-ai user.
PYDANTIC_AI_API = ["SavegameDurability", "current", "durable", "request_id", "run_agent"]


def test_the_pydantic_ai_api_is_pinned() -> None:
    pytest.importorskip("pydantic_ai")
    import savegame.integrations.pydantic_ai

    assert savegame.integrations.pydantic_ai.__all__ == PYDANTIC_AI_API


@pytest.mark.parametrize(
    "package",
    [
        "savegame",
        "savegame.agent",
        "savegame.effects",
        "savegame.control",
        "savegame.fleet",
        "savegame.inspect",
        "savegame.maintenance",
        "savegame.models",
        "savegame.runtime",
        "savegame.tracing",
        "savegame.workspace",
    ],
)
def test_a_package_exports_only_names_it_has(package: str) -> None:
    module = importlib.import_module(package)
    assert [name for name in module.__all__ if not hasattr(module, name)] == []


#: What ``import savegame`` must not load: the public names' modules are imported when a
#: name is first read (PEP 562), so a script, ``savegame --help`` or a tool that only reads
#: ``__version__`` pays for none of them.
HEAVY = [
    "savegame.agent",
    "savegame.client",
    "savegame.codec",
    "savegame.control",
    "savegame.effects",
    "savegame.fleet",
    "savegame.inspect",
    "savegame.maintenance",
    "savegame.runtime",
    "savegame.stores",
    "savegame.workspace",
    "asyncio",
    "croniter",
    "cryptography",
    "sqlite3",
    "stamina",
]


def _fresh(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout


def test_import_savegame_loads_none_of_its_packages() -> None:
    loaded = _fresh(
        "import sys, savegame\n"
        f"print(sorted(set({HEAVY!r}) & set(sys.modules)))\n"
        "print(sorted(m for m in sys.modules if m.startswith('savegame')))"
    ).splitlines()
    assert loaded == ["[]", "['savegame']"]


def test_every_exported_name_resolves_in_a_fresh_process() -> None:
    """Each name read first, alone, in its own interpreter would be too slow; one process
    reading them all in order still finds every one through the lazy table."""
    out = _fresh(
        "import savegame\n"
        "missing = [n for n in savegame.__all__ if getattr(savegame, n, None) is None]\n"
        "print(missing, sorted(set(savegame.__all__) - set(dir(savegame))))"
    )
    assert out == "[] []\n"


def test_a_lazy_name_is_the_object_its_module_defines() -> None:
    from savegame.runtime import Workflow
    from savegame.stores.schedules import ScheduleRecord

    assert savegame.Workflow is Workflow
    assert savegame.Schedule is ScheduleRecord
    with pytest.raises(AttributeError, match="Wrkflow"):
        savegame.Wrkflow  # type: ignore[attr-defined]  # noqa: B018


def _type_checking_imports() -> dict[str, str]:
    """Exported name -> module, as the ``if TYPE_CHECKING:`` imports of the package give
    them to mypy and IDEs."""
    tree = ast.parse(Path(savegame.__file__).read_text())
    guard = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    return {
        alias.asname or alias.name: node.module or ""
        for node in guard.body
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("savegame")
        for alias in node.names
    }


def test_the_lazy_table_is_what_type_checkers_see() -> None:
    """Two lists of the same imports, one for run time, one for mypy: they must not drift."""
    seen = _type_checking_imports()
    assert seen == savegame._MODULE_OF
    assert sorted(seen) == sorted(n for n in savegame.__all__ if n != "__version__")


def test_a_script_does_not_pay_for_features_it_does_not_use() -> None:
    """What ``from savegame import Workflow, run`` leaves out: a schedule's cron parser, the
    retry schedule, a workspace's ignore patterns and encryption, imported when used."""
    code = (
        "import sys\n"
        "from savegame import Workflow, run\n"
        "print(sorted({'croniter', 'stamina', 'pathspec', 'cryptography'} & set(sys.modules)))"
    )
    assert _fresh(code) == "[]\n"
