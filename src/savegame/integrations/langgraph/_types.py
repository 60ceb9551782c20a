"""The LangGraph and LangChain types a checkpoint may hold, allowed by name.

An explicit allow-list in savegame's registry: each is saved by a stable name and
rebuilt from its fields, never by import path, no pickle, no permissive msgpack.
Anything else is refused at save time with its path (``state.c:messages[3]``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from savegame import codec


@dataclass(frozen=True)
class RecordedError:
    """What a node raised, as a pending ``__error__`` write keeps it: its type's name and
    message. An exception object is not data (it rebuilds by importing its class)."""

    type: str
    message: str


def error_record(value: Any) -> Any:
    """``value`` as stored in an ``__error__`` write: an exception becomes a RecordedError."""
    if isinstance(value, BaseException):
        kind = type(value)
        return RecordedError(f"{kind.__module__}.{kind.__qualname__}", str(value))
    return value


_done = False
_lock = threading.Lock()


def _allowed() -> dict[str, type[Any]]:
    from langchain_core import messages as m
    from langgraph import types as t

    found: dict[str, type[Any]] = {
        "langgraph.Interrupt": t.Interrupt,
        "langgraph.Overwrite": t.Overwrite,
        "langgraph.TimeoutPolicy": t.TimeoutPolicy,
        "langgraph.RecordedError": RecordedError,
    }
    for name in (
        "AIMessage",
        "AIMessageChunk",
        "HumanMessage",
        "HumanMessageChunk",
        "SystemMessage",
        "SystemMessageChunk",
        "ToolMessage",
        "ToolMessageChunk",
        "ChatMessage",
        "ChatMessageChunk",
        "FunctionMessage",
        "FunctionMessageChunk",
        "RemoveMessage",
    ):
        found[f"langchain.{name}"] = getattr(m, name)
    return found


def allowed_classes() -> list[type[Any]]:
    """The LangGraph and LangChain classes savegame stores (the allow-list, and Send)."""
    from langgraph.types import Send

    return [*_allowed().values(), Send]


def register_langgraph_types() -> None:
    """Put the allow-list in the registry (once per process)."""
    global _done
    with _lock:
        if _done:
            return
        for name, cls in _allowed().items():
            codec.register(cls, name=name)
        from langgraph.checkpoint.serde.types import _DeltaSnapshot
        from langgraph.types import Send

        codec.register(
            Send,
            name="langgraph.Send",
            fields=lambda s: {"node": s.node, "arg": s.arg, "timeout": s.timeout},
            rebuild=lambda v: Send(v["node"], v["arg"], timeout=v.get("timeout")),
        )
        # What a DeltaChannel stores every ``snapshot_frequency`` updates: its whole value.
        codec.register(
            _DeltaSnapshot,
            name="langgraph.DeltaSnapshot",
            fields=lambda s: {"value": s.value},
            rebuild=lambda v: _DeltaSnapshot(v["value"]),
        )
        _done = True
