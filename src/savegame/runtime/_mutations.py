"""The debug check for state changed in place (``Workflow(check_mutations=True)``).

Checkpoints store what a step returns. A step that changes a value in place and
does not return it would lose the change in every checkpoint (and in a resumed
run); :func:`fingerprints` takes the state before a step, and
:func:`refuse_hidden_mutations` names the step and the path after it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from savegame import codec
from savegame.errors import ConfigurationError, SerializationError


@dataclass(slots=True)
class Prints:
    """The state as it was before a step, for the debug check below."""

    top: dict[str, bytes]
    """Each top-level value's encoding."""
    kept: dict[int, tuple[Any, bytes, str]]
    """Every list and dict below the top level, by id: the object, its encoding, its path."""


def _below(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(path, container) for every list and dict strictly inside ``value``."""
    stack = [(path, value)]
    while stack:
        where, node = stack.pop()
        if type(node) is list:
            children: Iterable[tuple[Any, Any]] = enumerate(node)
        elif type(node) is dict:
            children = node.items()
        else:
            continue
        for label, child in children:
            if type(child) is list or type(child) is dict:
                inner = f"{where}[{label!r}]"
                yield inner, child
                stack.append((inner, child))


def fingerprints(state: Mapping[str, Any]) -> Prints:
    """What the check below compares; it encodes the state once per nesting level."""
    prints = Prints({}, {})
    for key, value in state.items():
        try:
            prints.top[key] = codec.canonical(value)
            for where, child in _below(value, f"state[{key!r}]"):
                prints.kept[id(child)] = (child, codec.canonical(child), where)
        except SerializationError:
            continue  # reported with its path when the state is saved
    return prints


def refuse_hidden_mutations(
    node: str, before: Prints, state: Mapping[str, Any], update: Mapping[str, Any]
) -> None:
    """Checkpoints store what a step returns; a key changed in place and not returned
    would be missing from them (and from a resumed run). So would a list or dict kept
    inside a returned value but changed in place: deltas and packs keep what they
    stored for objects they have seen, matched by identity. Say so at the step."""
    for key, encoded in before.top.items():
        if key in update or key not in state:
            continue
        try:
            now = codec.canonical(state[key])
        except SerializationError:
            continue
        if now != encoded:
            raise ConfigurationError(
                f"step {node!r} changed state[{key!r}] in place without returning it; "
                f"return {{{key!r}: <new value>}} so checkpoints keep the change"
            )
    for key, value in update.items():
        for _, child in _below(value, f"state[{key!r}]"):
            seen = before.kept.get(id(child))
            if seen is None or seen[0] is not child:
                continue  # a new object: stored as it is
            try:
                same = codec.canonical(child) == seen[1]
            except SerializationError:
                continue
            if not same:
                raise ConfigurationError(
                    f"step {node!r} changed {seen[2]} in place; replace it "
                    "(a new list or dict in a new parent) so checkpoints keep the change"
                )
