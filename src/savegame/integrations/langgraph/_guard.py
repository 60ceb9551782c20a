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

Both encodings a row may have are guarded: ``msgpack`` (what LangGraph writes now) by an
extension hook, and ``json`` (older checkpoints, and values LangGraph still writes so)
by reading the text first as plain data: every LangChain envelope in it
(``{"lc": 1, "type": "constructor", "id": [...], "kwargs": ...}``, LangGraph's ``lc: 2``
ones, a ``secret``) is checked against the same allow-list before LangGraph's reviver
sees the row, which otherwise imports and builds any class LangChain's "core" list
names (a ``PromptTemplate``, a ``Runnable``) and turns a secret into None.
"""

from __future__ import annotations

import json
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
    why: str | None = None
    """What it is when it is no class at all (a LangChain secret, a LangChain stand-in)."""

    def describe(self) -> str:
        where = f" inside a {self.inside}" if self.inside else ""
        if self.why is not None:
            return f"{self.why}{where}: savegame stores no such value"
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

    # Where LangChain imports each legacy ``lc: 1`` id from (its reviver's own table).
    paths: dict[tuple[str, ...], tuple[str, ...]] = getattr(
        jsonplus.LC_REVIVER, "import_mappings", {}
    )

    class Guarded(jsonplus.JsonPlusSerializer):
        def loads_typed(self, data: tuple[str, bytes]) -> Any:
            if data[0] == "json":
                # Read as plain data first: a stand-in where LangGraph would build a class
                # savegame does not store; only a row without one is LangGraph's to read.
                plain = json.loads(data[1], object_hook=lambda v: _envelope(v, names, paths))
                if first_unknown(plain) is not None:
                    return plain
            return super().loads_typed(data)

    return Guarded(
        allowed_msgpack_modules=sorted(names),
        allowed_json_modules=_json_ids(names),
        __unpack_ext_hook__=hook,
    )


def _json_ids(names: Iterable[tuple[str, str]]) -> list[tuple[str, ...]]:
    """``names`` as LangGraph's ``lc: 2`` JSON envelopes spell them: the module's parts, then
    the class."""
    return sorted((*module.split("."), name) for module, name in names)


def _envelope(
    value: dict[str, Any],
    names: set[tuple[str, str]],
    paths: dict[tuple[str, ...], tuple[str, ...]],
) -> Any:
    """A JSON object as the check reads it: an :class:`UnknownType` where LangChain's or
    LangGraph's reviver would build a class savegame does not store (or hand back a
    secret's stand-in), else the object as it is. Compared as those revivers compare
    (``lc == 1``), so nothing they would revive slips past as plain data."""
    lc, kind, ident = value.get("lc"), value.get("type"), value.get("id")
    if lc not in (1, 2) or ident is None:
        return value
    if lc == 1 and kind == "secret":
        return UnknownType(f"secret {ident!r}", why=f"a LangChain secret ({ident!r})")
    if lc == 1 and kind == "not_implemented":
        return UnknownType(f"{ident!r}", why="a LangChain object its writer could not save")
    if kind != "constructor":
        return value
    if not (isinstance(ident, list) and ident and all(isinstance(p, str) for p in ident)):
        return UnknownType(repr(ident))
    path = tuple(ident)
    if lc == 1:
        path = tuple(paths.get(path, path))
    dotted = ".".join(path)
    if (".".join(path[:-1]), path[-1]) not in names:
        return UnknownType(".".join(ident))
    nested = first_unknown([value.get("args"), value.get("kwargs")])
    if nested is not None:
        return UnknownType(nested.type_name, inside=dotted, why=nested.why)
    return value


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
