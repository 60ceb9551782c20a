"""Pure data <-> JSON-compatible trees, with tagged extensions.

What may be saved: ``None``, ``bool``, ``int``, ``float``, ``str``, ``list``,
``dict``, and through tags ``tuple``, ``set``/``frozenset``, ``bytes``,
``datetime`` (zoneinfo zones kept by name), ``date``, ``time``, ``UUID``, ``Decimal``, non-finite floats,
integers beyond 64 bits, dicts with non-string keys, and registered dataclasses,
pydantic models and enums. Everything else is refused with the exact path where
it sits, at save time, so a bad value never reaches the store.

A tag is a one-key object ``{"$sg:<tag>": value}``. A user dict whose only key
starts with ``$sg:`` is itself escaped, so no user value can be confused with a tag.
"""

from __future__ import annotations

import base64
import datetime as dt
import enum
import math
import uuid
import zoneinfo
from decimal import Decimal
from typing import Any

import orjson

from savegame.codec import registry
from savegame.errors import SerializationError
from savegame.secrets import Secret

_TAG = "$sg:"
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _describe(value: Any) -> str:
    kind = type(value)
    return (
        f"{kind.__module__}.{kind.__qualname__}"
        if kind.__module__ != "builtins"
        else kind.__qualname__
    )


def to_data(value: Any, path: str = "state") -> Any:
    """Turn ``value`` into a JSON-compatible tree, or raise SerializationError naming the path."""
    kind = type(value)
    # Exact type checks first: bool is an int and enums may subclass str/int.
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        if _INT64_MIN <= value <= _INT64_MAX:
            return value
        return {_TAG + "int": str(value)}
    if kind is float:
        if math.isfinite(value):
            return value
        return {_TAG + "float": repr(value)}
    if kind is list:
        return [to_data(item, f"{path}[{i}]") for i, item in enumerate(value)]
    if kind is dict:
        return _dict_to_data(value, path)
    if kind is tuple:
        return {_TAG + "tuple": [to_data(item, f"{path}[{i}]") for i, item in enumerate(value)]}
    if kind is set or kind is frozenset:
        items = [to_data(item, f"{path}{{{i}}}") for i, item in enumerate(value)]
        # Canonical order, so equal sets always encode to equal bytes.
        items.sort(key=lambda item: orjson.dumps(item, option=orjson.OPT_SORT_KEYS))
        return {_TAG + ("set" if kind is set else "frozenset"): items}
    if kind is bytes:
        return {_TAG + "bytes": base64.b64encode(value).decode("ascii")}
    if kind is dt.datetime:
        if isinstance(value.tzinfo, zoneinfo.ZoneInfo):
            # Keep the zone itself, not just today's offset, so later arithmetic
            # crosses DST like the original; fold picks the side of an ambiguous hour.
            wall = value.replace(tzinfo=None).isoformat()
            return {_TAG + "zoned": [wall, value.tzinfo.key, value.fold]}
        return {_TAG + "datetime": value.isoformat()}
    if kind is dt.date:
        return {_TAG + "date": value.isoformat()}
    if kind is dt.time:
        return {_TAG + "time": value.isoformat()}
    if kind is uuid.UUID:
        return {_TAG + "uuid": str(value)}
    if kind is Decimal:
        return {_TAG + "decimal": str(value)}
    if kind is Secret:
        return {_TAG + "secret": value.name}
    name = registry.name_of(kind)
    if name is not None:
        if isinstance(value, enum.Enum):
            body: Any = {"value": to_data(value.value, f"{path}.value")}
        else:
            fields = registry.fields_of(value)
            body = {key: to_data(item, f"{path}.{key}") for key, item in fields.items()}
        return {_TAG + "obj": [name, body]}
    raise SerializationError(path, _refusal(value))


def _refusal(value: Any) -> str:
    kind = type(value)
    if isinstance(value, (list, dict, tuple, str, int, float, bytes, set, frozenset)):
        return (
            f"{_describe(value)} is a subclass of a builtin type and is not serializable; "
            "convert it to the plain type"
        )
    if (
        hasattr(kind, "__dataclass_fields__")
        or hasattr(kind, "model_fields")
        or isinstance(value, enum.Enum)
    ):
        return f"{_describe(value)} is not serializable until registered with savegame.register()"
    return f"{_describe(value)} is not serializable (state must be pure data)"


def _dict_to_data(value: dict[Any, Any], path: str) -> Any:
    if all(type(key) is str for key in value):
        out = {
            key: to_data(item, f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]")
            for key, item in value.items()
        }
        if len(out) == 1 and next(iter(out)).startswith(_TAG):
            return {_TAG + "dict": out}
        return out
    pairs = []
    for key, item in value.items():
        label = f"{path}[{key!r}]"
        pairs.append([to_data(key, f"{label}<key>"), to_data(item, label)])
    pairs.sort(key=lambda pair: orjson.dumps(pair[0], option=orjson.OPT_SORT_KEYS))
    return {_TAG + "map": pairs}


def from_data(tree: Any) -> Any:
    """Inverse of :func:`to_data`."""
    kind = type(tree)
    if kind is list:
        return [from_data(item) for item in tree]
    if kind is not dict:
        return tree
    if len(tree) == 1:
        ((key, body),) = tree.items()
        if key.startswith(_TAG):
            return _untag(key[len(_TAG) :], body)
    return {key: from_data(item) for key, item in tree.items()}


def _untag(tag: str, body: Any) -> Any:
    if tag == "tuple":
        return tuple(from_data(item) for item in body)
    if tag == "set":
        return {from_data(item) for item in body}
    if tag == "frozenset":
        return frozenset(from_data(item) for item in body)
    if tag == "bytes":
        return base64.b64decode(body)
    if tag == "datetime":
        return dt.datetime.fromisoformat(body)
    if tag == "zoned":
        wall, key, fold = body
        return dt.datetime.fromisoformat(wall).replace(tzinfo=zoneinfo.ZoneInfo(key), fold=fold)
    if tag == "date":
        return dt.date.fromisoformat(body)
    if tag == "time":
        return dt.time.fromisoformat(body)
    if tag == "uuid":
        return uuid.UUID(body)
    if tag == "decimal":
        return Decimal(body)
    if tag == "secret":
        return Secret(body)
    if tag == "int":
        return int(body)
    if tag == "float":
        return float(body)
    if tag == "dict":
        return {key: from_data(item) for key, item in body.items()}
    if tag == "map":
        return {from_data(key): from_data(item) for key, item in body}
    if tag == "obj":
        name, fields = body
        cls = registry.type_named(name)
        if cls is None:
            raise SerializationError(
                f"<{name}>",
                f"type {name!r} is not registered in this process; call savegame.register() before loading",
            )
        return registry.build(cls, {key: from_data(item) for key, item in fields.items()})
    raise SerializationError(f"<{tag}>", f"unknown tag {_TAG}{tag} (written by a newer savegame?)")


def dumps(value: Any, path: str = "state") -> bytes:
    """Canonical bytes of a pure-data value: sorted keys, tagged extensions."""
    return orjson.dumps(to_data(value, path), option=orjson.OPT_SORT_KEYS)


def loads(data: bytes) -> Any:
    tree = orjson.loads(data)
    # Nothing tagged means nothing to revive: skip the walk (the common case).
    if _TAG.encode() not in data:
        return tree
    return from_data(tree)


def canonical(value: Any) -> bytes:
    """The canonical encoding used to compare states byte for byte."""
    return dumps(value)
