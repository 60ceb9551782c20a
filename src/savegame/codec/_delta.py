"""Deltas between two states, computed from the Python values, applied on load.

A delta is a patch tree (pure JSON, canonical like everything else)::

    {"s": [[key, value], ...],     keys set to a whole new value (encoded with to_data)
     "r": [key, ...],              keys removed
     "a": [[key, [item, ...]], ...] lists that only grew: the appended items
     "p": [[key, patch], ...]}     dicts changed in place: a patch of the same shape

Keys are plain strings (a dict with any other key is replaced whole, and so is
one nested deeper than ``_values.LAYOUT_DEPTH``, which bounds how deep a patch
nests). Pairs are lists, never objects, so no user key can look like a codec tag.

Cost: only the top-level keys a step returned are compared, and inside them
identity short-cuts equal subtrees (``old is new``), so an append to a long
list costs one pointer comparison per kept element in C
(``all(map(is_, ...))``) and encodes only the new items. Values are compared
strictly: ``1``, ``1.0`` and ``True`` are equal in Python but encode
differently, so anything not provably identical in its encoding is re-sent.

Contract for steps (documented for users): change state by returning new
values in the update; a value mutated in place below the top level is not
seen until the next keyframe, and an item of a list or dict that a keyframe
already put in a pack not even then (:mod:`savegame.codec._packs` matches items
by identity). ``Workflow(check_mutations=True)`` names the step that does either. Top-level lists and dicts are shallow-copied
when remembered, so ``state["log"].append(x); return {"log": state["log"]}``
is still seen.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from operator import is_
from typing import Any

import orjson

from savegame.codec import _values
from savegame.errors import SerializationError
from savegame.model import StoredFile

Patch = dict[str, list[Any]]
_SAME = object()
_TAG = "$sg:"
_SCALARS = (str, int, bool, StoredFile)  # a workspace file: frozen, compared by value


def shallow(value: Any) -> Any:
    """What a state remembers of a value: top-level containers are copied, nothing deeper."""
    kind = type(value)
    if kind is list:
        return list(value)
    if kind is dict:
        return dict(value)
    if kind is set:
        # A set kept by reference is the set a later step changes in place (LangGraph's
        # barrier channels do): its diff against itself would say "unchanged".
        return set(value)
    return value


def diff(old: Mapping[str, Any], new: Mapping[str, Any], changed: Iterable[str]) -> Patch:
    """The patch turning ``old`` into ``new``, looking only at ``changed`` keys and removals.

    Raises:
        _values.Unsaveable: a new value is not pure data (without a path: the engine
            names it from the state's root).
    """
    patch: Patch = {}
    for key in sorted(set(changed)):
        if key in new:
            _put(
                patch,
                key,
                _diff(old[key], new[key], 1) if key in old else _full(new[key], 1),
            )
    return _removals(patch, old, new)


def diff_trees(old: Mapping[str, Any], new: Mapping[str, Any], changed: Iterable[str]) -> Patch:
    """:func:`diff` for states remembered as their encoded trees (``_values.encode_at``
    of each top-level value): nothing is compared by identity, so a value changed in
    place after it was encoded is still seen. Trees are compared by their JSON, never
    by ``==``, for which ``1``, ``1.0`` and ``True`` are equal.
    """
    patch: Patch = {}
    for key in sorted(set(changed)):
        if key in new:
            _put(patch, key, _tree_diff(old[key], new[key], 1) if key in old else ("s", new[key]))
    return _removals(patch, old, new)


def _removals(patch: Patch, old: Mapping[str, Any], new: Mapping[str, Any]) -> Patch:
    """``patch`` with the top-level keys ``old`` has and ``new`` lacks (``"r"``)."""
    # The keys' set comparison runs in C: the generator it replaces cost 2k a step.
    if not old.keys() <= new.keys():
        patch["r"] = sorted(key for key in old if key not in new)
    return patch


def _tree_diff(old: Any, new: Any, depth: int) -> Any:
    """``depth``: the containers around ``new`` in the state's own tree."""
    if old is new:
        return _SAME
    kind = type(new)
    if type(old) is kind:
        if kind in _SAME_JSON:
            return _SAME if old == new else ("s", new)
        if kind is list:
            n = len(old)
            # Trees are never changed in place: the same item trees are the same items.
            if len(new) < n or (
                not all(map(is_, new, old)) and orjson.dumps(new[:n]) != orjson.dumps(old)
            ):
                return ("s", new)
            return ("a", new[n:]) if len(new) > n else _SAME
        if (
            kind is dict
            and depth <= _values.LAYOUT_DEPTH
            and _values.plain_dict(old)
            and _values.plain_dict(new)
        ):
            return _tree_diff_dict(old, new, depth)
    if orjson.dumps(old) == orjson.dumps(new):
        return _SAME
    return ("s", new)


_dumps = orjson.dumps

#: The leaves of a tree whose JSON two values of the same type share exactly when they
#: are equal (a float is not one: ``0.0 == -0.0``): compared with ``==``, not by their
#: JSON, which cost two ``orjson.dumps`` a leaf of LangGraph's version maps every step.
_SAME_JSON = frozenset((str, int, bool))


def _tree_diff_dict(old: dict[str, Any], new: dict[str, Any], depth: int) -> Any:
    """:func:`_tree_diff` of two plain dicts; a leaf equal to its old one is skipped here,
    without a call (most of a LangGraph checkpoint's keys, every step)."""
    patch: Patch = {}
    for key, value in new.items():
        if key in old:
            before = old[key]
            if before is value:
                continue
            kind = type(value)
            if type(before) is kind and kind in _SAME_JSON:
                if before == value:
                    continue
                op: Any = ("s", value)
            elif kind is dict and type(before) is dict and _dumps(before) == _dumps(value):
                # The same JSON is the same tree (what _tree_diff would find, key by key,
                # in Python): most of a LangGraph checkpoint's ``versions_seen`` a step.
                continue
            else:
                op = _tree_diff(before, value, depth + 1)
                if op is _SAME:
                    continue
        else:
            op = ("s", value)
        patch.setdefault(op[0], []).append([key, op[1]])
    removed = sorted(key for key in old if key not in new)
    if removed:
        patch["r"] = removed
    return ("p", patch) if patch else _SAME


def _full(value: Any, depth: int) -> tuple[str, Any]:
    return ("s", _values.encode_at(value, _values.MAX_DEPTH - depth))


def _put(patch: Patch, key: str, op: Any) -> None:
    if op is _SAME:
        return
    kind, body = op
    patch.setdefault(kind, []).append([key, body])


def _encodes_same(a: Any, b: Any) -> bool:
    try:
        return _values.dumps(a) == _values.dumps(b)
    except SerializationError:
        return False  # the caller re-encodes the new value, which names the path


def _diff(old: Any, new: Any, depth: int) -> Any:
    """``depth``: the containers around ``new`` in the state's own tree."""
    if old is new:
        return _SAME
    kind = type(new)
    if type(old) is kind:
        if kind in _SCALARS and old == new:
            return _SAME
        if kind is list:
            return _diff_list(old, new, depth)
        if kind is dict:
            sub = _diff_dict(old, new, depth)
            if sub is not None:
                return ("p", sub) if sub else _SAME
    return _full(new, depth)


def _diff_list(old: list[Any], new: list[Any], depth: int) -> Any:
    n = len(old)
    if len(new) < n:
        return _full(new, depth)
    # map() stops at the end of ``old``: no copy of the prefix on the usual path.
    if not all(map(is_, new, old)):
        head = new[:n]
        if head != old or not all(
            a is b or _encodes_same(a, b) for a, b in zip(head, old, strict=True)
        ):
            return _full(new, depth)
    if len(new) == n:
        return _SAME
    room = _values.MAX_DEPTH - depth - 1
    return ("a", [_values.encode_at(item, room) for item in new[n:]])


def _diff_dict(old: dict[Any, Any], new: dict[Any, Any], depth: int) -> Patch | None:
    """None when the dict must be replaced whole: a non-string key, an escaped dict
    (values nest one level deeper there), or deeper than ``_values.LAYOUT_DEPTH``: each
    patch level nests 3 where the state nests 1, so that bounds what a patch adds."""
    if depth > _values.LAYOUT_DEPTH:
        return None
    if len(new) == 1:
        (only,) = new
        if type(only) is not str or only.startswith(_TAG):
            return None
    depth += 1
    patch: Patch = {}
    for key, value in new.items():
        if type(key) is not str:
            return None
        if key in old:
            before = old[key]
            if before is value:
                continue
            _put(patch, key, _diff(before, value, depth))
        else:
            _put(patch, key, _full(value, depth))
    if len(old) != len(new) or any(key not in new for key in old):
        removed = [key for key in old if key not in new]
        if any(type(key) is not str for key in removed):
            return None
        if removed:
            patch["r"] = sorted(removed)
    return patch


def apply(state: dict[Any, Any], patch: Mapping[str, Any]) -> None:
    """Apply a patch (blob references already resolved) to decoded values, in place.

    Raises:
        ValueError: the patch does not fit the state (a damaged chain).
    """
    for key, body in patch.get("s", ()):
        state[key] = _values.revive(body)
    for key in patch.get("r", ()):
        if key not in state:
            raise ValueError(f"delta removes missing key {key!r}")
        del state[key]
    for key, items in patch.get("a", ()):
        target = state.get(key)
        if type(target) is not list:
            raise ValueError(f"delta appends to {key!r}, which is not a list")
        target.extend(_values.revive(item) for item in items)
    for key, sub in patch.get("p", ()):
        target = state.get(key)
        if type(target) is not dict:
            raise ValueError(f"delta patches {key!r}, which is not a dict")
        apply(target, sub)
