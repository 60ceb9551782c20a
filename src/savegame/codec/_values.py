"""Pure data <-> JSON-compatible trees, with tagged extensions.

What may be saved: ``None``, ``bool``, ``int``, ``float``, ``str``, ``list``,
``dict``, and through tags ``tuple``, ``set``/``frozenset``, ``bytes``,
``datetime`` (zoneinfo zones kept by name), ``date``, ``time``, ``timedelta``, ``UUID``, ``Decimal``, non-finite floats,
integers beyond 64 bits, dicts with non-string keys, and registered dataclasses,
pydantic models and enums. Everything else is refused with the exact path where
it sits, at save time, so a bad value never reaches the store.

A tag is a one-key object ``{"$sg:<tag>": value}``. A user dict whose only key
starts with ``$sg:`` is itself escaped, so no user value can be confused with a tag.

A value must also nest at most :data:`MAX_DEPTH` levels deep, hold no cycle and no
lone surrogate (``"\\ud800"``, which UTF-8 cannot encode). That costs the happy path
nothing: the encoder passes a depth counter where it used to build each value's path,
a cycle runs into the depth limit, and orjson refuses a lone surrogate itself. Only
then does :func:`refusal` walk the value again, iteratively, for the path and the cause.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime as dt
import enum
import math
import uuid
import zoneinfo
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import orjson

from savegame.codec import _conventions, _registry
from savegame.errors import SerializationError
from savegame.model import StoredFile
from savegame.secrets import Secret

_TAG = "$sg:"
#: ``_STR.issuperset(map(type, d))``: whether every key of ``d`` is exactly a str, in C;
#: ``all(type(k) is str for k in d)`` ran a generator frame per dict (half the time).
_STR = frozenset((str,))
#: What :func:`encode_at` gives back as it is: its containers test an item's type against
#: these in place rather than call it for each (most leaves of a state, and of a LangChain
#: message, are strings and Nones: a call each was a third of encoding one).
_AS_IS = frozenset((str, type(None), bool))
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

#: How deep the encoded tree of a value may nest, counted in JSON containers as
#: :func:`to_data` writes them: a list or dict is one level; a tuple, set or escaped
#: dict two (the tag's object and what it holds); a dict with non-string keys or a
#: registered object three. orjson writes at most 254 levels, and the storage engine
#: wraps what to_data gives (measured, and pinned by tests/adversarial): a scalar tag
#: or a blob reference adds up to 2 below the deepest container; a delta patch adds 2
#: per patched dict level (its op list, the pair, the sub-patch in place of the dict)
#: and a keyframe 2 per pack around a list or dict, which both stop at
#: :data:`LAYOUT_DEPTH`: 2 * (16 + 1) + 2 = 36 at most. 200 + 36 = 236 leaves room.
#: Python's stack is not the bound: a level is at most 2 frames here and in revive
#: (a comprehension is a frame before 3.12), 400 or so of the default 1,000.
MAX_DEPTH = 200
#: How deep into the state deltas patch dicts in place and keyframes pack lists and
#: dicts; a value below is written whole. It bounds what those layouts add to the
#: nesting (see :data:`MAX_DEPTH`); agent states put their long lists near the top.
LAYOUT_DEPTH = 16


class Unsaveable(SerializationError):
    """What :func:`encode_at` raises: a reason without a path. Building a path for every
    value cost the happy path an f-string per node; the entry points (:func:`to_data`,
    :func:`dumps`, the storage engine) call :func:`refusal` instead, which walks the
    value again to find the path. One that escapes still says why, with path ``?``.
    """

    def __init__(self, reason: str) -> None:
        super().__init__("?", reason)


@dataclasses.dataclass(frozen=True, slots=True)
class Unregistered:
    """A registered object whose type this process does not have, read under
    :func:`placeholders`: its name and its fields, decoded. Encoded again it is the
    tagged object it was read from, so showing it (``to_data``) shows what is stored."""

    name: str
    """The type's registered name (``langchain.AIMessage``, ``shop.Order``)."""
    fields: dict[str, Any]


@contextlib.contextmanager
def placeholders() -> Iterator[None]:
    """Within it, an object of a type not registered here decodes as :class:`Unregistered`
    instead of raising: for readers that show a state (the UI, ``savegame show``) in a
    process that does not import the code that wrote it. Never for a state a run goes
    on from: a step must get its own types or fail."""
    with _conventions.using(dataclasses.replace(_conventions.current(), placeholders=True)):
        yield


def _too_deep() -> str:
    return (
        f"nests deeper than {MAX_DEPTH} levels, the most savegame saves (a list or dict "
        "counts one, a tuple or set two, a dict with non-string keys or a registered "
        "object three)"
    )


def _describe(value: Any) -> str:
    kind = type(value)
    return (
        f"{kind.__module__}.{kind.__qualname__}"
        if kind.__module__ != "builtins"
        else kind.__qualname__
    )


def to_data(value: Any, path: str = "state", depth: int = 0) -> Any:
    """Turn ``value`` into a JSON-compatible tree, or raise SerializationError naming the path.

    ``depth``: how many containers enclose the value in the tree it goes into.
    """
    try:
        return encode_at(value, MAX_DEPTH - depth)
    except (Unsaveable, orjson.JSONEncodeError, RecursionError) as exc:
        raise refusal(value, path, depth, exc) from None


def encode_at(value: Any, room: int) -> Any:
    """:func:`to_data` without the path, for the storage engine, which catches what this
    lets through (:class:`Unsaveable`, orjson's errors) once for the whole state.

    ``room``: the levels ``value`` may take, :data:`MAX_DEPTH` less the containers
    around it; counted down to a literal 0, as a global lookup per container showed.
    JSON's own types and the containers are handled here, the tagged scalars and
    registered objects in :func:`_encode_tagged`: one call more for each of those
    (measured: 5% of encoding a state made only of them; none for strings and dicts).
    """
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
        room -= 1
        if room < 0:
            raise Unsaveable(_too_deep())
        if not value:
            return []
        return [item if type(item) in _AS_IS else encode_at(item, room) for item in value]
    if kind is dict:
        if not value:
            # Without the comprehension's frame: a LangChain message holds two or three
            # empty containers (``additional_kwargs``, ``response_metadata``, ...).
            if room < 1:
                raise Unsaveable(_too_deep())
            return {}
        if not _STR.issuperset(map(type, value)):
            return _map_to_data(value, room)
        if len(value) == 1 and next(iter(value)).startswith(_TAG):
            room -= 2
            if room < 0:
                raise Unsaveable(_too_deep())
            return {
                _TAG + "dict": {
                    key: item if type(item) in _AS_IS else encode_at(item, room)
                    for key, item in value.items()
                }
            }
        room -= 1
        if room < 0:
            raise Unsaveable(_too_deep())
        return {
            key: item if type(item) in _AS_IS else encode_at(item, room)
            for key, item in value.items()
        }
    if kind is tuple:
        if _conventions.current().tuples_as_lists:
            room -= 1
            if room < 0:
                raise Unsaveable(_too_deep())
            return [item if type(item) in _AS_IS else encode_at(item, room) for item in value]
        room -= 2
        if room < 0:
            raise Unsaveable(_too_deep())
        return {
            _TAG + "tuple": [
                item if type(item) in _AS_IS else encode_at(item, room) for item in value
            ]
        }
    if kind is set or kind is frozenset:
        room -= 2
        if room < 0:
            raise Unsaveable(_too_deep())
        items = [_hashable_at(item, room) for item in value]
        # Canonical order, so equal sets always encode to equal bytes.
        items.sort(key=lambda item: orjson.dumps(item, option=orjson.OPT_SORT_KEYS))
        return {_TAG + ("set" if kind is set else "frozenset"): items}
    return _encode_tagged(value, kind, room)


def _encode_tagged(value: Any, kind: type, room: int) -> Any:
    """:func:`encode_at` for a scalar of a type JSON lacks, or a registered object
    (``kind``: its exact type)."""
    scalar = _SCALARS.get(kind)
    if scalar is not None:
        return scalar(value)
    if kind is Unregistered:
        room -= 3
        if room < 0:
            raise Unsaveable(_too_deep())
        return {
            _TAG + "obj": [value.name, {k: encode_at(v, room) for k, v in value.fields.items()}]
        }
    name = _registry.name_of(kind) or _admitted(kind)
    if name is not None:
        room -= 3
        if room < 0:
            raise Unsaveable(_too_deep())
        if isinstance(value, enum.Enum):
            body: Any = {"value": encode_at(value.value, room)}
        elif (names := _registry.field_names(kind)) is not None:
            # Each field read as it is encoded: ``fields_of`` built a dict of them first,
            # a second comprehension and dict for every LangChain message.
            body = {
                key: item if type(item := getattr(value, key)) in _AS_IS else encode_at(item, room)
                for key in names
            }
        else:
            fields = _registry.fields_of(value)
            body = {
                key: item if type(item) in _AS_IS else encode_at(item, room)
                for key, item in fields.items()
            }
        return {_TAG + "obj": [name, body]}
    plain = _plain_value(value)
    if plain is not None:
        return plain
    raise Unsaveable(_refusal(value))


def _datetime(value: dt.datetime) -> Any:
    if isinstance(value.tzinfo, zoneinfo.ZoneInfo):
        # Keep the zone itself, not just today's offset, so later arithmetic
        # crosses DST like the original; fold picks the side of an ambiguous hour.
        wall = value.replace(tzinfo=None).isoformat()
        return {_TAG + "zoned": [wall, value.tzinfo.key, value.fold]}
    return {_TAG + "datetime": value.isoformat()}


#: The tagged scalars by their exact type: one lookup where a chain of ``kind is``
#: tests ran ten before reaching a registered object (a LangChain message, most of what
#: a LangGraph checkpoint holds).
_SCALARS: dict[type[Any], Any] = {
    bytes: lambda value: {_TAG + "bytes": base64.b64encode(value).decode("ascii")},
    dt.datetime: _datetime,
    dt.date: lambda value: {_TAG + "date": value.isoformat()},
    dt.time: lambda value: {_TAG + "time": value.isoformat()},
    # Its own three integers: exact, where total_seconds() rounds past 2**53 microseconds.
    dt.timedelta: lambda value: {
        _TAG + "timedelta": [value.days, value.seconds, value.microseconds]
    },
    uuid.UUID: lambda value: {_TAG + "uuid": str(value)},
    Decimal: lambda value: {_TAG + "decimal": str(value)},
    Secret: lambda value: {_TAG + "secret": value.name},
    # A blob reference of kind "f": listed in the record's header (kept by retention,
    # renamed by rekey) but never fetched when the state loads.
    StoredFile: lambda value: {_TAG + "blob": ["f", value.digest, value.mode, value.size]},
}


def _admitted(kind: type[Any]) -> str | None:
    """The name a saver's conventions store an unregistered class under, registered now."""
    admit = _conventions.current().admit
    if admit is None or not _registry.storable(kind):
        return None
    name = admit(kind)
    return name if name is not None and _registry.admit(kind, name) else None


#: The builtin scalars whose subclasses are kept as the builtin value they hold.
_PLAIN = (str, int, float)


def _plain_value(value: Any) -> Any:
    """A str, int or float subclass's value as the builtin type, when that is all it
    holds (langchain-core's ``message.text`` is a ``str`` subclass with no state of its
    own): it loads back equal. None for anything else, an enum or an instance with
    attributes of its own, which would not come back."""
    if isinstance(value, enum.Enum) or getattr(value, "__dict__", None):
        return None
    for base in _PLAIN:
        if isinstance(value, base):
            if any(_slot_set(value, cls) for cls in type(value).__mro__):
                return None
            return base(value)
    return None


def _slot_set(value: Any, cls: type[Any]) -> bool:
    slots = cls.__dict__.get("__slots__", ())
    names = (slots,) if isinstance(slots, str) else slots
    return any(hasattr(value, name) for name in names if name not in ("__dict__", "__weakref__"))


def _refusal(value: Any) -> str:
    kind = type(value)
    if isinstance(value, _PLAIN) and not isinstance(value, enum.Enum):
        return (
            f"{_describe(value)} is a subclass of {type(value).__mro__[-2].__name__} with "
            "attributes of its own, which would not be kept; convert it to the plain type"
        )
    if isinstance(value, (list, dict, tuple, bytes, set, frozenset)):
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


def refusal(
    value: Any, path: str = "state", depth: int = 0, cause: BaseException | None = None
) -> SerializationError:
    """Why ``value`` (``depth`` containers deep) cannot be saved, for a caller whose
    encoding of it failed with ``cause``.

    Walks the value again, iteratively (it may nest 10,000 levels or contain itself),
    in :func:`to_data`'s order, and names the first of: a container that contains
    itself, a container nested past :data:`MAX_DEPTH`, a lone surrogate in a string
    or a dict key, a value that is not data. Only a failed encoding pays for the walk.
    """
    found = _cycle(value, path) or _too_deep_at(value, path, depth) or _bad_leaf(value, path)
    if found is not None:
        return found
    if isinstance(cause, SerializationError):
        return SerializationError(path, cause.reason)
    return SerializationError(path, f"cannot be encoded: {type(cause).__name__}: {cause}")


def _children(node: Any, path: str) -> tuple[int, list[tuple[Any, str]]] | None:
    """A container's levels in to_data's tree and what it holds, with paths, in
    to_data's order (dict keys too, so they are checked); None for anything else."""
    kind = type(node)
    if kind is list:
        return 1, [(item, f"{path}[{i}]") for i, item in enumerate(node)]
    if kind is tuple:
        return 2, [(item, f"{path}[{i}]") for i, item in enumerate(node)]
    if kind is set or kind is frozenset:
        return 2, [(item, f"{path}{{{i}}}") for i, item in enumerate(node)]
    if kind is dict:
        plain = all(type(key) is str for key in node)
        held: list[tuple[Any, str]] = []
        for key, item in node.items():
            label = f"{path}.{key}" if plain and key.isidentifier() else f"{path}[{key!r}]"
            held += [(key, f"{label}<key>"), (item, label)]
        return (2 if _escaped(node) else 1) if plain else 3, held
    if _registry.name_of(kind) is not None:
        if isinstance(node, enum.Enum):
            return 3, [(node.value, f"{path}.value")]
        return 3, [(item, f"{path}.{key}") for key, item in _registry.fields_of(node).items()]
    return None


def _cycle(value: Any, path: str) -> SerializationError | None:
    # Depth-first with the containers on the current path (by id, with their paths);
    # ``done`` ones cannot lead back to it. Both keep their objects: ids stay unique.
    on_path: dict[int, tuple[str, Any]] = {}
    done: dict[int, Any] = {}
    stack: list[Any] = [(value, path)]
    while stack:
        top = stack.pop()
        if type(top) is int:  # every container below this one is walked
            done[top] = on_path.pop(top)[1]
            continue
        node, where = top
        ident = id(node)
        if ident in done:
            continue
        if ident in on_path:
            return SerializationError(
                on_path[ident][0],
                f"contains itself (again at {where}): a cycle, which data cannot hold; "
                "keep an id and look the value up instead",
            )
        shape = _children(node, where)
        if shape is None:
            continue
        on_path[ident] = (where, node)
        stack.append(ident)
        stack.extend(reversed(shape[1]))
    return None


def _too_deep_at(value: Any, path: str, depth: int) -> SerializationError | None:
    """The first container past MAX_DEPTH in to_data's order (the value holds no cycle)."""
    heights: dict[int, int] = {}  # levels a container and everything in it take
    kept: list[Any] = []  # the containers measured, so that their ids stay theirs
    stack: list[tuple[Any, Any]] = [(value, None)]
    while stack:
        node, shape = stack.pop()
        if shape is not None:  # its children are measured
            below = (heights.get(id(child), 0) for child, _ in shape[1])
            heights[id(node)] = shape[0] + max(below, default=0)
            continue
        if id(node) in heights:
            continue
        shape = _children(node, "")
        if shape is not None:
            kept.append(node)
            stack.append((node, shape))
            stack.extend((child, None) for child, _ in shape[1])
    if depth + heights.get(id(value), 0) <= MAX_DEPTH:
        return None
    node, where = value, path
    while True:
        levels, held = _children(node, where) or (0, [])
        depth += levels
        if depth > MAX_DEPTH:
            return SerializationError(where, _too_deep())
        node, where = next(
            (child, at) for child, at in held if depth + heights.get(id(child), 0) > MAX_DEPTH
        )


def _bad_leaf(value: Any, path: str) -> SerializationError | None:
    """The first string with a lone surrogate or value that is not data (no cycle, not too deep)."""
    seen: dict[int, Any] = {}
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        node, where = stack.pop()
        shape = _children(node, where)
        if shape is not None:
            if id(node) not in seen:
                seen[id(node)] = node
                stack.extend(reversed(shape[1]))
            continue
        if type(node) is str:
            try:
                node.encode()
            except UnicodeEncodeError as exc:
                return SerializationError(
                    where,
                    f"holds a lone surrogate ({node[exc.start]!r} at index {exc.start}), "
                    "which UTF-8 cannot encode; decode the text with errors='replace', "
                    "or keep it as bytes",
                )
            continue
        try:
            encode_at(node, MAX_DEPTH)
        except Unsaveable as exc:
            return SerializationError(where, exc.reason)
    return None


def _escaped(value: dict[str, Any]) -> bool:
    return len(value) == 1 and next(iter(value)).startswith(_TAG)


def plain_dict(node: dict[Any, Any]) -> bool:
    """A dict that :func:`to_data` keeps as a JSON object of the same keys (string keys,
    not one lone ``$sg:`` key), so its tree is ``{key: to_data(value)}``."""
    # :func:`_escaped` written out: the tree diff asks this of both sides of every dict
    # it compares (17 times a LangGraph checkpoint), and the call was half its cost.
    return _STR.issuperset(map(type, node)) and (
        len(node) != 1 or not next(iter(node)).startswith(_TAG)
    )


def _map_to_data(value: dict[Any, Any], room: int) -> Any:
    room -= 3
    if room < 0:
        raise Unsaveable(_too_deep())
    pairs = [[_hashable_at(key, room), encode_at(item, room)] for key, item in value.items()]
    pairs.sort(key=lambda pair: orjson.dumps(pair[0], option=orjson.OPT_SORT_KEYS))
    return {_TAG + "map": pairs}


def _hashable_at(value: Any, room: int) -> Any:
    """:func:`encode_at` for a dict key or a set's item, where a tuple stays a tuple
    whatever the conventions say: a list could not be one when loaded."""
    if type(value) is not tuple:
        return encode_at(value, room)
    room -= 2
    if room < 0:
        raise Unsaveable(_too_deep())
    return {_TAG + "tuple": [_hashable_at(item, room) for item in value]}


def from_data(tree: Any) -> Any:
    """Inverse of :func:`to_data`; ``tree`` is left as it was."""
    return revive(_copied(tree))


def _copied(tree: Any) -> Any:
    kind = type(tree)
    if kind is list:
        return [_copied(item) for item in tree]
    if kind is dict:
        return {key: _copied(item) for key, item in tree.items()}
    if kind is tuple:  # a tree built by hand may hold one (a tag's body)
        return tuple(_copied(item) for item in tree)
    return tree


def revive(tree: Any) -> Any:
    """:func:`from_data` of a tree the caller owns (freshly parsed), reusing its lists and
    dicts in place. A long thread's load revives thousands of objects, each a handful of
    nested dicts; a copy of each was a third of the walk's allocations, and every
    container alive in a load is one the garbage collector's oldest generation counts
    towards its next full pass (the most a LangGraph turn spent in one place)."""
    kind = type(tree)
    if kind is list:
        for i, item in enumerate(tree):
            if item and type(item) in _CONTAINERS:
                tree[i] = revive(item)
        return tree
    if kind is not dict:
        return tree
    if len(tree) == 1:
        ((key, body),) = tree.items()
        if key.startswith(_TAG):
            return _untag(key[len(_TAG) :], body)
    _revive_values(tree)
    return tree


_CONTAINERS = frozenset((list, dict))


def _revive_values(tree: dict[str, Any]) -> dict[str, Any]:
    # An empty list or dict has nothing to revive (a message's kwargs and tool calls).
    for key, item in tree.items():
        if item and type(item) in _CONTAINERS:
            tree[key] = revive(item)
    return tree


def _untag(tag: str, body: Any) -> Any:
    # A registered object first: almost every tag a state holds is one (a message).
    if tag == "obj":
        name, fields = body
        return _object(name, fields)
    untag = _UNTAG.get(tag)
    if untag is None:
        raise SerializationError(
            f"<{tag}>", f"unknown tag {_TAG}{tag} (written by a newer savegame?)"
        )
    return untag(body)


def _object(name: str, fields: dict[str, Any]) -> Any:
    cls = _registry.type_named(name) or _resolved(name)
    if cls is None and _conventions.current().placeholders:
        return Unregistered(name, _revive_values(fields))
    if cls is None:
        raise SerializationError(
            f"<{name}>",
            f"type {name!r} is not registered in this process; call savegame.register() before loading",
        )
    return _registry.build(cls, _revive_values(fields))


def _zoned(body: Any) -> dt.datetime:
    wall, key, fold = body
    return dt.datetime.fromisoformat(wall).replace(tzinfo=zoneinfo.ZoneInfo(key), fold=fold)


def _timedelta(body: Any) -> dt.timedelta:
    days, seconds, microseconds = body
    return dt.timedelta(days=days, seconds=seconds, microseconds=microseconds)


_UNTAG: dict[str, Any] = {
    "tuple": lambda body: tuple(revive(item) for item in body),
    "set": lambda body: {revive(item) for item in body},
    "frozenset": lambda body: frozenset(revive(item) for item in body),
    "bytes": lambda body: base64.b64decode(body, validate=True),
    "datetime": dt.datetime.fromisoformat,
    "zoned": _zoned,
    "date": dt.date.fromisoformat,
    "time": dt.time.fromisoformat,
    "timedelta": _timedelta,
    "uuid": uuid.UUID,
    "decimal": Decimal,
    "secret": Secret,
    "blob": lambda body: _stored_file(body),
    "int": int,
    "float": float,
    # An escaped user dict: its keys are data, only its values revive.
    "dict": _revive_values,
    "map": lambda body: {revive(key): revive(item) for key, item in body},
}


def _resolved(name: str) -> type[Any] | None:
    """The class a saver's conventions find for a name nobody registered here, registered now."""
    resolve = _conventions.current().resolve
    cls = None if resolve is None else resolve(name)
    if cls is None or not _registry.storable(cls) or not _registry.admit(cls, name):
        return None
    return cls


def _stored_file(body: Any) -> StoredFile:
    """A workspace file's reference (the only blob reference left for ``from_data``)."""
    if type(body) is not list or len(body) != 4 or body[0] != "f":
        raise ValueError("a blob reference that was not resolved")
    _, digest, mode, size = body
    if type(digest) is not str or type(mode) is not int or type(size) is not int:
        raise ValueError("a workspace file reference is not [digest, mode, size]")
    return StoredFile(digest, mode, size)


def dumps(value: Any, path: str = "state") -> bytes:
    """Canonical bytes of a pure-data value: sorted keys, tagged extensions.

    Raises:
        SerializationError: naming the path of the first value that cannot be saved.
    """
    try:
        return orjson.dumps(encode_at(value, MAX_DEPTH), option=orjson.OPT_SORT_KEYS)
    except (Unsaveable, orjson.JSONEncodeError, RecursionError) as exc:
        raise refusal(value, path, 0, exc) from None


def loads(data: bytes) -> Any:
    tree = orjson.loads(data)
    # Nothing tagged means nothing to revive: skip the walk (the common case).
    if _TAG.encode() not in data:
        return tree
    return revive(tree)


def canonical(value: Any) -> bytes:
    """The canonical encoding used to compare states byte for byte."""
    return dumps(value)
