"""How a migration reads a LangGraph source: LangGraph's own serializer, with no guessing.

LangGraph's ``JsonPlusSerializer`` rebuilds an object from the module and class
names stored with it: it imports that module and calls the class. A class it may
not build (strict mode) or cannot import (the app's module is not on this machine)
comes back as its raw fields, or as None: a guess, which a migration would then
store as if it were the value. And importing and calling whatever a database
names runs code its writer chose.

So the source saver gets this serializer: a class savegame does not store is
never imported nor called, it becomes an :class:`UnknownType` stand-in, which
savegame's encoder refuses with its path
(``checkpoint['channel_values']['order'].items[2]``); the thread is reported and
skipped. The classes savegame stores (its LangGraph and
LangChain allow-list, the value types its codec knows, and the registered types a
caller passes) are built by LangGraph's own code, so every format LangGraph reads
is read as LangGraph reads it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: The value types savegame's codec stores natively, as LangGraph names them.
_NATIVE = {
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("datetime", "datetime"),
    ("datetime", "date"),
    ("datetime", "time"),
    ("uuid", "UUID"),
    ("decimal", "Decimal"),
}
#: The one method call LangGraph's own strict mode allows (how it writes a datetime).
_METHODS = {("datetime", "datetime", "fromisoformat")}


@dataclass(frozen=True, slots=True)
class UnknownType:
    """Where a source holds an object of a class savegame does not store (never built)."""

    type_name: str
    """``module.Class`` as the source names it."""
    inside: str | None = None
    """The allowed class it was found in (a ``Send`` whose ``arg`` holds it), if any."""

    def describe(self) -> str:
        where = f" inside a {self.inside}" if self.inside else ""
        return (
            f"a {self.type_name}{where}, a type savegame does not store: register it with "
            "savegame.register() and pass it to migrate(types=[...]) (or --type module:Class)"
        )


def _name(cls: type[Any]) -> tuple[str, str]:
    return cls.__module__, cls.__name__


def serializer(allowed: Iterable[type[Any]]) -> Any:
    """A ``JsonPlusSerializer`` that builds only ``allowed`` classes (and savegame's native
    value types); every other class in a source becomes an :class:`UnknownType`."""
    import ormsgpack
    from langgraph.checkpoint.serde import jsonplus

    names = _NATIVE | {_name(cls) for cls in allowed}
    # LangGraph builds what passes the check below, with its own code (the same allow-list).
    inner = jsonplus.JsonPlusSerializer(allowed_msgpack_modules=sorted(names))
    constructors = {
        jsonplus.EXT_CONSTRUCTOR_SINGLE_ARG,
        jsonplus.EXT_CONSTRUCTOR_POS_ARGS,
        jsonplus.EXT_CONSTRUCTOR_KW_ARGS,
        jsonplus.EXT_PYDANTIC_V1,
        jsonplus.EXT_PYDANTIC_V2,
    }
    options = ormsgpack.OPT_NON_STR_KEYS

    def built(code: int, data: bytes) -> Any:
        return inner.loads_typed(("msgpack", ormsgpack.packb(ormsgpack.Ext(code, data))))

    def hook(code: int, data: bytes) -> Any:
        if code == jsonplus.EXT_NUMPY_ARRAY:
            return UnknownType("numpy.ndarray")
        if code not in constructors and code != jsonplus.EXT_METHOD_SINGLE_ARG:
            if code == jsonplus.EXT_DELTA_SNAPSHOT:
                nested = first_unknown(ormsgpack.unpackb(data, ext_hook=hook, option=options))
                if nested is not None:
                    return nested
            return built(code, data)
        # (module, name, args ...): read with this hook, so a class nested in the args is
        # seen here too (LangGraph's own hook would hand its raw fields on).
        parts = ormsgpack.unpackb(data, ext_hook=hook, option=options)
        module, name = str(parts[0]), str(parts[1])
        known = (
            (module, name, parts[3]) in _METHODS
            if code == jsonplus.EXT_METHOD_SINGLE_ARG
            else (module, name) in names
        )
        if not known:
            return UnknownType(f"{module}.{name}")
        nested = first_unknown(parts[2])
        if nested is not None:
            return UnknownType(nested.type_name, inside=f"{module}.{name}")
        return built(code, data)

    return jsonplus.JsonPlusSerializer(
        allowed_msgpack_modules=sorted(names), __unpack_ext_hook__=hook
    )


def first_unknown(value: Any) -> UnknownType | None:
    """The first :class:`UnknownType` stand-in in ``value``, if any."""
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, UnknownType):
            return item
        if isinstance(item, dict):
            todo.extend(item.values())
            todo.extend(item.keys())
        elif isinstance(item, (list, tuple, set, frozenset)):
            todo.extend(item)
    return None
