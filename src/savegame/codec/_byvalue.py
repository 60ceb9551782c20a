"""What a ``by_value`` encoder knows of a long list it encoded, so the next step does
not encode every item again.

A ``by_value`` encoder (LangGraph's channels, which change values in place) cannot
trust that an item it saw before is unchanged because it is the same object; encoding
the whole list again at every step is exact but cost 4.6 ms a step for 400 LangChain
messages (11 us an item, in Python), where LangGraph's msgpack took 1.4 ms. A
fingerprint tells in C whether anything changed: ``orjson.dumps`` of the whole list,
objects as their ``__dict__`` (0.26 ms for the same 400 messages). Since a JSON array's
text is its items' texts in order, the old fingerprint (without its ``]``) followed by a
``,`` at the start of the new one says the first items serialize exactly as before; if
they are also the same objects, their encoded trees are reused and only the new items
are encoded.

The fingerprint is exact for what the codec stores except where orjson writes two
values the same way that the codec keeps apart: an ``Enum`` member and its value, a
``UUID`` and its string, ``None`` and a float that is not finite (orjson writes ``NaN``
and the infinities as ``null``; ``test_none_turned_infinite_in_place_is_stored`` pins it). An item that is the same object and changed only that way in
place (``message.id = str(message.id)``) keeps its old encoding until the list is
encoded whole again (a keyframe's ``changed=None``). Anything orjson cannot write
(slots without ``__dict__``, non-string keys, a deque) falls back to encoding whole, and
so does what it would write without what the codec keeps: an object with slots beside
its ``__dict__`` (a slotted dataclass subclassing one without slots: the slot fields
are stored but not in ``__dict__``), and a list or tuple (orjson writes both as an
array) unless tuples are stored as lists (LangGraph's conventions).

A list decoded from the encoder's last record is known by its new objects where it
prints as the list encoded (``Encoder.loaded``). The same ambiguities apply there: a
field a model's validation turns, when decoding, into another type that orjson writes
alike (a ``str`` held in a ``UUID`` or enum field of a model built without validation)
keeps the tree of the value as it was encoded. It loads back the same, since decoding
validates it the same way, but its bytes are not those of encoding it afresh.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import is_
from typing import Any

import orjson

from savegame.codec import _conventions, _values

#: Keys sorted, as the codec stores a dict's (its trees are written with sorted keys): a
#: list decoded from a record, whose dicts come back in sorted order (a chat model's
#: ``response_metadata``), prints as the list it was encoded from.
_OPTIONS = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_SORT_KEYS
)


_BUILTINS = (str, int, float, list, dict)


@dataclass(frozen=True, slots=True)
class Seen:
    """A list as it was encoded: its items (held for identity), fingerprint and tree."""

    items: tuple[Any, ...]
    fingerprint: bytes
    tree: list[Any]
    depth: list[int] = field(default_factory=lambda: [-1], compare=False, repr=False)
    """How deep ``tree`` nests (-1: not known), worked out when first asked (:func:`fits`,
    a walk of the whole tree: as long as encoding it) and from then on kept up with each
    step's new items."""


def fits(seen: Seen, room: int) -> bool:
    """Whether ``seen``'s tree fits at ``room`` (``_values.encode_at``'s): a list inside
    a dict is a level deeper than the list at the top of the state it was encoded as,
    and an item that only just fitted there must be refused here, as encoding it whole
    would. Containers counted as levels: a scalar's tag counts one that ``encode_at``
    does not (then the list is encoded whole, which decides)."""
    if seen.depth[0] < 0:
        seen.depth[0] = _depth(seen.tree)
    return seen.depth[0] <= room


def _depth(tree: Any) -> int:
    if type(tree) is list:
        return 1 + max(map(_depth, tree), default=0)
    if type(tree) is dict:
        return 1 + max(map(_depth, tree.values()), default=0)
    return 0


# Bounded: a process that makes classes as it goes (pydantic's create_model per
# request) must not keep every one of them alive here.
@functools.lru_cache(maxsize=4096)
def _slotted(kind: type) -> bool:
    """Whether ``kind`` has slots of its own that hold state (pydantic's bookkeeping
    slots hold none the codec stores: it stores ``model_fields``, all in ``__dict__``)."""
    names: list[str] = []
    for cls in kind.__mro__:
        slots = cls.__dict__.get("__slots__", ())
        names += [slots] if isinstance(slots, str) else list(slots)
    return any(
        n not in ("__dict__", "__weakref__") and not n.startswith("__pydantic_") for n in names
    )


#: The classes whose instances :func:`_default` writes as ``[id(type), __dict__]`` (no
#: slots holding state, not a builtin's subclass, ``__class__`` not overridden): what
#: decides it is the class's, so it is decided once. Bounded, as :func:`_slotted`.
_OBJECTS: set[type[Any]] = set()
_OBJECTS_KEPT = 4096


def _default(value: Any) -> Any:
    """orjson's fallback: every value it hands over, written with its type, so that two
    values the codec stores differently never print the same. The type as its ``id``:
    a fingerprint is compared only within the process (and costs a third less)."""
    kind = type(value)
    if kind in _OBJECTS:
        # A message of a list fingerprinted at every step: its class's checks skipped
        # (half of this call's cost, once per message and step).
        fields = value.__dict__
        if type(fields) is dict:
            return [id(kind), fields]
    fields = getattr(value, "__dict__", None)
    if type(fields) is dict and not isinstance(value, _BUILTINS):
        if _slotted(value.__class__):
            # A slot's value would not be in the fingerprint: a change to it unseen.
            raise TypeError(type(value).__qualname__)
        if value.__class__ is kind and all(
            "__class__" not in c.__dict__ for c in kind.__mro__[:-1]
        ):
            if len(_OBJECTS) >= _OBJECTS_KEPT:
                _OBJECTS.clear()
            _OBJECTS.add(kind)
        return [id(kind), fields]  # a registered object: a message, a dataclass
    tag = id(kind)
    # Subclasses of the builtins (passed through): their value and their own fields.
    builtin: type[Any]
    for builtin in _BUILTINS:
        if isinstance(value, builtin):
            return [tag, builtin(value), fields]
    if isinstance(value, set | frozenset):
        return [tag, list(value)]
    if isinstance(value, dt.date | dt.time):
        return [tag, repr(value)]  # the zone and fold too, as the codec keeps them
    raise TypeError(type(value).__qualname__)


def fingerprint(value: list[Any]) -> bytes | None:
    """The list's fingerprint, or None when orjson cannot write it."""
    try:
        return orjson.dumps(value, default=_default, option=_OPTIONS)
    except orjson.JSONEncodeError:
        return None


def encode_list(
    value: list[Any], room: int, *befores: Seen | None
) -> tuple[list[Any], Seen | None]:
    """``_values.encode_at(value, room)`` for a list, reusing the trees of the first of
    ``befores`` whose items it starts with (the same objects, printing the same); and
    what to remember of it."""
    # orjson writes a tuple as it writes a list: only where the codec stores both the
    # same way does the fingerprint tell them apart as well as the codec does.
    printed = fingerprint(value) if _conventions.current().tuples_as_lists else None
    tree: list[Any] | None = None
    depth = -1
    for before in befores:
        if printed is None or before is None:
            continue
        n = len(before.items)
        old = before.fingerprint
        if (
            0 < n <= len(value)
            and all(map(is_, value, before.items))
            and printed.startswith(old[:-1])
            and (printed[len(old) - 1 : len(old)] == b"," if len(value) > n else printed == old)
        ):
            # ``before.tree`` was encoded at this room: the new items fit one level down.
            tree = [*before.tree, *(_values.encode_at(item, room - 1) for item in value[n:])]
            if before.depth[0] >= 0:  # known once asked (fits): kept up with the new items
                depth = max(before.depth[0], _depth(tree[n:]))
            break
    if tree is None:
        tree = _values.encode_at(value, room)
    if printed is None:
        return tree, None
    return tree, Seen(tuple(value), printed, tree, [depth])


def encode_dict(
    value: dict[Any, Any], room: int, known: Callable[[str, list[Any]], Seen | None]
) -> dict[str, Any] | None:
    """``_values.encode_at(value, room)`` for a non-empty dict it writes key for key (str
    keys, not one tag-like key), each of its lists by way of the ``Seen`` that ``known``
    gives for it, if any (:func:`encode_list`); None for any other dict, which the
    caller encodes whole. A LangGraph subgraph's input, ``{"messages": [...]}``, holds
    the caller's list of every message of the thread."""
    if not value or not _values.plain_dict(value):
        return None
    room -= 1
    if room < 0:
        return None  # the caller's whole encoding refuses it, naming the path
    out: dict[str, Any] = {}
    for key, item in value.items():
        if type(item) is list and (before := known(key, item)) is not None and fits(before, room):
            out[key] = encode_list(item, room, before)[0]
        else:
            out[key] = _values.encode_at(item, room)
    return out
