"""What a pydantic-ai operation is journaled as: the arguments of its entry.

An entry's arguments say which call sits at a position, so a resume (and a fork's
replay) can tell the same call from another: a model request by its model and a digest
of what it was asked (the messages, the settings, the tool definitions), a tool call by
its tool and the model's arguments. The digest leaves out what pydantic-ai makes anew
on each execution of the same request (timestamps, the run's ids): what a resumed step
asks again must digest the same, and a changed prompt must not.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.durable_exec import (
    DurableOperationId,
    ModelRequestId,
    ToolsetCallToolId,
    ToolsetValidateToolArgumentsId,
)
from pydantic_core import to_jsonable_python

from savegame.codec import canonical

_VOLATILE = frozenset({"timestamp", "run_id", "conversation_id"})
"""Keys pydantic-ai fills from the clock or a fresh id on each execution."""


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    """``value`` as a JSON tree; what has none (a function, a client) by its type's name."""
    return to_jsonable_python(value, fallback=lambda v: f"<{type(v).__name__}>")


def _digest(value: Any) -> str:
    return hashlib.blake2b(canonical(_stable(_plain(value))), digest_size=12).hexdigest()


def arguments(operation_id: DurableOperationId, cache_key: tuple[object, ...]) -> dict[str, Any]:
    """The entry's arguments for one operation; ``cache_key`` is pydantic-ai's projection
    of its parameters (``CacheIdentity.project``)."""
    # The run context rides in every projection; what it holds is the run's, not the call's.
    parts = [p for p in cache_key if not isinstance(p, RunContext)]
    if isinstance(operation_id, ModelRequestId):
        model_id, messages, settings, parameters = parts
        return {
            "model": model_id or "default",
            "messages": len(messages) if isinstance(messages, list) else 0,
            "digest": _digest([messages, settings, parameters]),
        }
    if isinstance(operation_id, ToolsetCallToolId | ToolsetValidateToolArgumentsId):
        name, tool_args = parts[0], parts[1]
        return {"tool": name, "args": _plain(tool_args)}
    return {"digest": _digest(parts)}
