"""A structural diff of two checkpoints' states: ``savegame diff A B``.

States are pure data, so the walk is short: dicts by key, lists and tuples by
position, anything else compared with ``==``. Written here rather than taken
from DeepDiff or jsonpatch because what a person needs is the shape of the
change, which neither gives: a list that grew is one change (``+3 items``, the
new ones), not three insertions; unchanged siblings are shown on request as
context; the renderer cuts long text. An RFC 6902 patch also cannot say that a
list grew, and DeepDiff's string paths (``root['a'][0]``) would have to be
parsed back into the typed paths this module returns.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from savegame.codec.storage import StorageConfig
from savegame.inspect._history import get_checkpoint
from savegame.model import Checkpoint, CheckpointHeader
from savegame.stores import Store

Key = str | int
"""A step in a path: a dict key or a list position."""


class ChangeKind(str, enum.Enum):
    """What happened at a path from ``a`` to ``b``."""

    ADDED = "added"
    """The key is in ``b`` only."""
    REMOVED = "removed"
    """The key is in ``a`` only."""
    CHANGED = "changed"
    """Another value (or another type) at the same path."""
    GREW = "grew"
    """A list ends with new items: ``items`` holds them, from position ``at``."""
    SHRANK = "shrank"
    """A list lost its last items: ``items`` holds them, from position ``at``."""
    UNCHANGED = "unchanged"
    """Context only (``context=N``): a sibling of a change, the same in both."""

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between two states, at one path."""

    path: tuple[Key, ...]
    """From the state's root: ``("plan", "steps", 2)`` is ``state["plan"]["steps"][2]``."""
    kind: ChangeKind
    old: Any = None
    """The value in ``a`` (added, grew, shrank: None; the list's items are in ``items``)."""
    new: Any = None
    """The value in ``b`` (removed, grew, shrank: None)."""
    items: tuple[Any, ...] = ()
    """For a list that grew, the new items; for one that shrank, the items it lost."""
    at: int | None = None
    """For grew and shrank: the position of the first item in ``items``."""

    @property
    def pointer(self) -> str:
        """The path as a JSON pointer (RFC 6901): ``/plan/steps/2``."""
        return "".join("/" + str(k).replace("~", "~0").replace("/", "~1") for k in self.path)


@dataclass(frozen=True, slots=True)
class StateDiff:
    """What changed from checkpoint ``a`` to checkpoint ``b``."""

    a: CheckpointHeader
    b: CheckpointHeader
    changes: tuple[Change, ...]
    """In path order; ``UNCHANGED`` entries only when context was asked for."""

    @property
    def same(self) -> bool:
        """True when the states are equal (context entries aside)."""
        return all(c.kind is ChangeKind.UNCHANGED for c in self.changes)


def diff(
    a: str,
    b: str,
    *,
    context: int = 0,
    store: Store,
    storage: StorageConfig | None = None,
) -> StateDiff:
    """Compare the states of two checkpoints (a run id means the run's latest checkpoint).

    The operation behind :meth:`savegame.Savegame.diff`, which documents it, on the open
    ``store``.
    """
    left = get_checkpoint(a, store=store, storage=storage)
    right = get_checkpoint(b, store=store, storage=storage)
    return compare(left, right, context=context)


def compare(a: Checkpoint, b: Checkpoint, *, context: int = 0) -> StateDiff:
    """The diff of two decoded checkpoints."""
    if context < 0:
        raise ValueError("context must be 0 or more")
    changes = tuple(_walk((), a.state, b.state, context))
    return StateDiff(a.header, b.header, changes)


def _is_list(value: Any) -> bool:
    return isinstance(value, list | tuple)


def _walk(path: tuple[Key, ...], old: Any, new: Any, context: int) -> Iterator[Change]:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        yield from _walk_dict(path, old, new, context)
    elif _is_list(old) and _is_list(new) and type(old) is type(new):
        yield from _walk_list(path, old, new, context)
    elif type(old) is not type(new) or old != new:
        yield Change(path, ChangeKind.CHANGED, old, new)


def _near(changed: Sequence[bool], context: int) -> list[bool]:
    """Which unchanged positions lie within ``context`` of a changed one."""
    near = [False] * len(changed)
    for i, hit in enumerate(changed):
        if hit:
            for j in range(max(0, i - context), min(len(changed), i + context + 1)):
                near[j] = True
    return near


def _sort_key(key: Any) -> tuple[str, str]:
    return (type(key).__name__, str(key))


def _walk_dict(
    path: tuple[Key, ...], old: Mapping[Any, Any], new: Mapping[Any, Any], context: int
) -> Iterator[Change]:
    keys = sorted(set(old) | set(new), key=_sort_key)
    found: list[list[Change]] = []
    for key in keys:
        here = (*path, key)
        if key not in new:
            found.append([Change(here, ChangeKind.REMOVED, old=old[key])])
        elif key not in old:
            found.append([Change(here, ChangeKind.ADDED, new=new[key])])
        else:
            found.append(list(_walk(here, old[key], new[key], context)))
    near = _near([bool(f) for f in found], context) if context else [False] * len(keys)
    for key, changes, close in zip(keys, found, near, strict=True):
        if changes:
            yield from changes
        elif close:
            yield Change((*path, key), ChangeKind.UNCHANGED, old[key], new[key])


def _walk_list(
    path: tuple[Key, ...], old: Sequence[Any], new: Sequence[Any], context: int
) -> Iterator[Change]:
    common = min(len(old), len(new))
    found = [list(_walk((*path, i), old[i], new[i], context)) for i in range(common)]
    tail = len(old) != len(new)
    near = _near([bool(f) for f in found] + [tail], context)[:common] if context else []
    for i, changes in enumerate(found):
        if changes:
            yield from changes
        elif near and near[i]:
            yield Change((*path, i), ChangeKind.UNCHANGED, old[i], new[i])
    if len(new) > common:
        yield Change(path, ChangeKind.GREW, items=tuple(new[common:]), at=common)
    elif len(old) > common:
        yield Change(path, ChangeKind.SHRANK, items=tuple(old[common:]), at=common)
