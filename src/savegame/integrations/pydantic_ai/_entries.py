"""What a pydantic-ai operation other than a model request is journaled as: the
arguments of its entry (a model request's entry is a model call's, :mod:`._models`).

An entry's arguments say which call sits at a position, so a resume (and a fork's
replay) can tell the same call from another: a tool call by its tool and the model's
arguments, anything else (a toolset's discovery) by a digest of its parameters. What
pydantic-ai makes anew on each execution of the same operation (timestamps, the run's
ids) is left out (:func:`stable`): what a resumed step does again must compare equal.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.durable_exec import (
    DurableOperationId,
    ToolsetCallToolId,
    ToolsetValidateToolArgumentsId,
)
from pydantic_core import to_jsonable_python

from savegame.codec import canonical

_VOLATILE = frozenset({"timestamp", "run_id", "conversation_id"})
"""Keys pydantic-ai fills from the clock or a fresh id on each execution."""


def stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def plain(value: Any) -> Any:
    """``value`` as a JSON tree; what has none (a function, a client) by its type's name."""
    return to_jsonable_python(value, fallback=lambda v: f"<{type(v).__name__}>")


def _digest(value: Any) -> str:
    return hashlib.blake2b(canonical(stable(plain(value))), digest_size=12).hexdigest()


def arguments(operation_id: DurableOperationId, cache_key: tuple[object, ...]) -> dict[str, Any]:
    """The entry's arguments for one operation; ``cache_key`` is pydantic-ai's projection
    of its parameters (``CacheIdentity.project``)."""
    # The run context rides in every projection; what it holds is the run's, not the call's.
    parts = [p for p in cache_key if not isinstance(p, RunContext)]
    if isinstance(operation_id, ToolsetCallToolId | ToolsetValidateToolArgumentsId):
        name, tool_args = parts[0], parts[1]
        return {"tool": name, "args": plain(tool_args)}
    return {"digest": _digest(parts)}
