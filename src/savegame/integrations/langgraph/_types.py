"""The types a LangGraph checkpoint may hold, and how SavegameSaver keeps them.

Three kinds, each saved by a stable name and rebuilt from its fields, never by pickle:

* **LangGraph's and LangChain's own** (messages, ``Document``, ``Send``, ``Command``,
  ``Interrupt`` ...: what LangGraph's strict serializer accepts, its ``SAFE_MSGPACK_TYPES``),
  registered here; the standard library's (``deque``, paths ...) by the codec itself.
* **The graph's own schema types** (its pydantic models, dataclasses and enums, nested ones
  included) under LangGraph's own rule (:class:`TypePolicy`): with
  ``LANGGRAPH_STRICT_MSGPACK`` set, those LangGraph hands the saver at ``compile()``
  (``with_allowlist``); without it, as LangGraph's own savers do, any of them. Each is
  named ``module.QualName`` (the name ``savegame.register`` gives by default) and found on
  load among the modules this process has imported: never importing one, and never a
  class that is not a dataclass, pydantic model or enum.
* Anything else is refused at save time with its path (``state.c:messages[3]``), before the
  node's writes are recorded.

And two of LangGraph's conventions (:func:`conventions`): a tuple comes back a list, as
from msgpack; a node's error is kept as ``repr(exc)``, the string every LangGraph saver
keeps (an exception object is not data).
"""

from __future__ import annotations

import collections
import ipaddress
import os
import pathlib
import re
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from savegame import codec


@dataclass(frozen=True)
class RecordedError:
    """What a node raised, as savegame before this version kept an ``__error__`` write (its
    type's name and message); loaded, it is handed to LangGraph as the string LangGraph's
    savers keep (:func:`error_text`)."""

    type: str
    message: str


def error_value(value: Any) -> Any:
    """``value`` as stored in an ``__error__`` write: an exception becomes ``repr(exc)``,
    what LangGraph's own savers store (``"ValueError('boom')"``)."""
    return repr(value) if isinstance(value, BaseException) else value


def error_text(value: Any) -> Any:
    """An ``__error__`` write's value as LangGraph gets it: a string (older records hold a
    :class:`RecordedError`, given back as the ``repr`` its exception had)."""
    if isinstance(value, RecordedError):
        return f"{value.type.rpartition('.')[2]}({value.message!r})"
    return value


def strict_by_default() -> bool:
    """``LANGGRAPH_STRICT_MSGPACK``, read as LangGraph reads it."""
    return os.getenv("LANGGRAPH_STRICT_MSGPACK", "false").lower() in ("1", "true", "yes")


class TypePolicy:
    """Which of a graph's own classes a saver stores without ``savegame.register``.

    Args:
        strict: only the classes LangGraph names at ``compile()`` (:meth:`allow`), as
            LangGraph's strict mode; otherwise any dataclass, pydantic model or enum.
    """

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self._allowed: set[tuple[str, str]] = set()

    def allow(self, allowlist: Iterable[tuple[str, ...]]) -> None:
        """Add LangGraph's ``(module, class name)`` pairs (``with_allowlist``)."""
        self._allowed.update((str(p[0]), str(p[1])) for p in allowlist if len(p) == 2)

    def admit(self, cls: type[Any]) -> str | None:
        if self.strict and (cls.__module__, cls.__name__) not in self._allowed:
            return None
        return f"{cls.__module__}.{cls.__qualname__}"

    def resolve(self, name: str) -> type[Any] | None:
        """The class named ``module.QualName`` in a module already imported, else None."""
        if "<" in name:  # a class made inside a function: no module attribute holds it
            return None
        parts = name.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = sys.modules.get(".".join(parts[:cut]))
            if module is None:
                continue
            found: Any = module
            for attr in parts[cut:]:
                found = getattr(found, attr, None)
            if not isinstance(found, type) or not codec.storable(found):
                return None
            return found if self.admit(found) == name else None
        return None

    def conventions(self) -> codec.Conventions:
        return codec.Conventions(tuples_as_lists=True, admit=self.admit, resolve=self.resolve)


_done = False
_lock = threading.Lock()

_MESSAGES = (
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
)


def _allowed() -> dict[str, type[Any]]:
    """The classes registered as they are (dataclasses and pydantic models), by name."""
    from langchain_core import messages as m
    from langchain_core.documents import Document
    from langgraph import types as t

    found: dict[str, type[Any]] = {
        "langgraph.Interrupt": t.Interrupt,
        "langgraph.Overwrite": t.Overwrite,
        "langgraph.TimeoutPolicy": t.TimeoutPolicy,
        "langgraph.Command": t.Command,
        "langgraph.RecordedError": RecordedError,
        "langchain.Document": Document,
    }
    for name in _MESSAGES:
        found[f"langchain.{name}"] = getattr(m, name)
    return found


def allowed_classes() -> list[type[Any]]:
    """The LangGraph, LangChain and standard-library classes savegame stores."""
    from langgraph.store.base import GetOp, Item
    from langgraph.types import PregelTask, Send, StateSnapshot

    stdlib: list[type[Any]] = [
        collections.deque,
        type(pathlib.Path()),
        pathlib.PurePosixPath,
        pathlib.PureWindowsPath,
        ipaddress.IPv4Address,
        ipaddress.IPv6Address,
        ipaddress.IPv4Network,
        ipaddress.IPv6Network,
        ipaddress.IPv4Interface,
        ipaddress.IPv6Interface,
        re.Pattern,
    ]
    return [*_allowed().values(), Send, StateSnapshot, PregelTask, Item, GetOp, *stdlib]


def _named_tuple(cls: Any, name: str) -> None:
    """A NamedTuple of LangGraph's, by its fields (a tuple subclass is not data as it is)."""
    codec.register(cls, name=name, fields=lambda v: v._asdict(), rebuild=lambda f: cls(**f))


def register_langgraph_types() -> None:
    """Put the allow-list in the registry (once per process)."""
    global _done
    with _lock:
        if _done:
            return
        for name, cls in _allowed().items():
            codec.register(cls, name=name)
        from langgraph.checkpoint.serde.types import _DeltaSnapshot
        from langgraph.store.base import GetOp, Item
        from langgraph.types import PregelTask, Send, StateSnapshot

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
        _named_tuple(StateSnapshot, "langgraph.StateSnapshot")
        _named_tuple(PregelTask, "langgraph.PregelTask")
        _named_tuple(GetOp, "langgraph.GetOp")
        codec.register(
            Item,
            name="langgraph.Item",
            fields=lambda i: {f: getattr(i, f) for f in Item.__slots__},
            rebuild=lambda v: Item(**{**v, "namespace": tuple(v["namespace"])}),
        )
        _done = True
