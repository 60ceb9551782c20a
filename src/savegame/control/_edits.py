"""A person's edit of a checkpoint's state before a fork: top-level keys and paths.

Paths read as they print in errors: ``order.amount``, ``items[2].qty`` (``items.2.qty``
too). A path sets a value inside the state; each step on the way must exist (a dict
key, a list index in range) except the last key of a dict, which may be new.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from savegame.codec import to_data
from savegame.errors import ConfigurationError

_PART = re.compile(r"([^.\[\]]+)|\[(-?\d+)\]")


def parse_path(path: str) -> list[str | int]:
    """``"items[2].qty"`` -> ``["items", 2, "qty"]``."""
    text = path[len("state.") :] if path.startswith("state.") else path
    parts: list[str | int] = []
    pos = 0
    while pos < len(text):
        if text[pos] == ".":
            pos += 1
            continue
        found = _PART.match(text, pos)
        if found is None:
            raise ConfigurationError(f"cannot read the path {path!r} at {text[pos:]!r}")
        key, index = found.groups()
        parts.append(int(index) if index is not None else (int(key) if key.isdigit() else key))
        pos = found.end()
    if not parts or not isinstance(parts[0], str):
        raise ConfigurationError(f"the path {path!r} must start with a state key")
    return parts


def _set(state: dict[str, Any], path: str, value: Any) -> None:
    parts = parse_path(path)
    node: Any = state
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        where = path if last else ".".join(str(p) for p in parts[: depth + 1])
        if isinstance(node, dict) and isinstance(part, (str, int)):
            key = str(part)
            if last:
                node[key] = value
                return
            if key not in node:
                raise ConfigurationError(f"cannot set {path!r}: {where!r} is not in the state")
            node = node[key]
        elif isinstance(node, list) and isinstance(part, int):
            if not -len(node) <= part < len(node):
                raise ConfigurationError(
                    f"cannot set {path!r}: no index {part} in a list of {len(node)}"
                )
            if last:
                node[part] = value
                return
            node = node[part]
        else:
            raise ConfigurationError(
                f"cannot set {path!r}: {where!r} is inside a {type(node).__qualname__}"
            )


def apply_edits(
    state: Mapping[str, Any],
    update: Mapping[str, Any] | None,
    paths: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], list[str]]:
    """A copy of ``state`` with ``update`` (top-level keys) and then ``paths`` applied,
    and the names of what changed, in order (top-level keys, then paths).

    Raises:
        ConfigurationError: ``update`` is not a dict of keys, or a path does not lead
            into the state.
        SerializationError: a value is not pure data.
    """
    if update is not None and (
        not isinstance(update, Mapping) or not all(isinstance(k, str) for k in update)
    ):
        raise ConfigurationError(
            f"a fork's update must be a dict of state keys, not {type(update).__qualname__}"
        )
    for name in [*(update or {}), *(paths or {})]:
        # Keys of savegame's own ($sg:workspace, the manifest a restore deletes by) are
        # not the user's to edit: a fork edit must not empty a directory.
        if str(name).startswith("$sg:"):
            raise ConfigurationError(
                f"a fork cannot edit {name!r}: keys starting with '$sg:' are savegame's own"
            )
    edited = copy.deepcopy(dict(state))
    changed: list[str] = []
    for key, value in (update or {}).items():
        to_data(value, f"update[{key!r}]")
        edited[key] = copy.deepcopy(value)
        changed.append(key)
    for path, value in (paths or {}).items():
        to_data(value, f"set[{path!r}]")
        _set(edited, path, copy.deepcopy(value))
        changed.append(path)
    return edited, changed
