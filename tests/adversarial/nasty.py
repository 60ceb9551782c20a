"""Hypothesis strategies for states a step may hand back that are legal Python but hard
to save: nesting near and past the depth limit, cycles, lone surrogates, huge ints,
NaN and infinities (as keys too), sets of tuples, long strings, bytes, lists long
enough to be packed, and dicts that look like the codec's own tags.

A drawn :class:`Case` knows where it planted each value that cannot be saved (none for
a state that must round-trip), from the documented counting rule of
``savegame.codec._values.MAX_DEPTH`` (a list or dict is one level; a tuple, set or
escaped dict two; a dict with non-string keys or a registered object three), not from
the codec's own code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from savegame import codec
from savegame.codec._values import MAX_DEPTH


@dataclass(frozen=True)
class Box:
    """A registered object: three levels around what it holds."""

    item: Any


codec.register(Box, name="adversarial.Box")


class Case:
    """A drawn value, where its unsaveable parts are, and what it holds (for failure reports).

    Not a dataclass: Hypothesis prints those field by field, and the value may nest
    10,000 levels or contain itself.
    """

    def __init__(self, value: Any, bad: list[str] | None = None, notes: list[str] | None = None):
        self.value = value
        self.bad = bad or []
        """Paths of the values that cannot be saved; a refusal must name one (or a path inside)."""
        self.notes = notes or []

    def __repr__(self) -> str:
        return f"Case({'; '.join(self.notes) or 'plain'}; bad at {self.bad})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


def within(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or names something inside it."""
    return path == root or (path.startswith(root) and path[len(root)] in ".[{<")


# A wrapper kind: its levels and how it wraps a value. Hashable ones only around hashables.
_WRAPS: dict[str, tuple[int, Any]] = {
    "list": (1, lambda v: [v]),
    "dict": (1, lambda v: {"a": v}),
    "tuple": (2, lambda v: (v,)),
    "escaped": (2, lambda v: {"$sg:tuple": v}),
    "map": (3, lambda v: {1: v}),
    "box": (3, lambda v: Box(v)),
}
_HASHABLE_WRAPS: dict[str, tuple[int, Any]] = {
    "tuple": (2, lambda v: (v,)),
    "frozenset": (2, lambda v: frozenset([v])),
}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(),  # NaN and infinities included
    st.text(max_size=20),  # no surrogates: st.text() leaves category Cs out
    st.binary(max_size=20),
)
odd_keys = st.one_of(
    st.sampled_from([float("nan"), float("inf"), float("-inf"), 2**100, -(2**70), (1, "a")]),
    st.integers(),
    st.booleans(),
    st.frozensets(st.integers(), max_size=2),
)
tag_lookalikes = st.sampled_from(
    [
        {"$sg:tuple": 1},
        {"$sg:blob": ["s", "0" * 64]},
        {"$sg:pack": [[], [], []]},
        {"$sg:dict": {"a": 1}},
        {"$sg:x": {"$sg:y": [2]}},
        {"$sg:bytes": "not base64!"},
    ]
)
surrogates = st.integers(min_value=0xD800, max_value=0xDFFF).map(chr)


def _label(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]"


@st.composite
def _nest(draw: st.DrawFn, path: str, depth: int) -> Case:
    """A chain of wrappers around a leaf, its levels drawn near the room left at ``depth``."""
    room = MAX_DEPTH - depth
    hashable = draw(st.booleans())
    wraps = _HASHABLE_WRAPS if hashable else _WRAPS
    if draw(st.integers(0, 9)) == 0:
        target, pattern = 10_000, ["tuple" if hashable else "list"]
    else:
        target = draw(st.integers(max(0, room - 4), room + 4))
        pattern = draw(st.lists(st.sampled_from(sorted(wraps)), min_size=1, max_size=3))
    value: Any = draw(st.sampled_from([0, "leaf", "x" * 3000, b"\x00" * 3000, 2**80]))
    levels, i = 0, 0
    while levels < target:
        cost, wrap = wraps[pattern[i % len(pattern)]]
        value, levels, i = wrap(value), levels + cost, i + 1
    note = f"{levels} levels of {'/'.join(pattern)} at depth {depth}"
    return Case(value, [path] if depth + levels > MAX_DEPTH else [], [note])


@st.composite
def _cycle(draw: st.DrawFn, path: str, depth: int) -> Case:
    shape = draw(st.sampled_from(["dict", "list", "tuple-list", "deep"]))
    if shape == "dict":
        d: dict[str, Any] = {"x": 1}
        d["me"] = d
        return Case(d, [path], ["a dict containing itself"])
    if shape == "list":
        items: list[Any] = [1]
        items.append(items)
        return Case(items, [path], ["a list containing itself"])
    if shape == "tuple-list":
        inner: list[Any] = []
        outer = (inner,)
        inner.append(outer)
        return Case(outer, [path], ["a tuple holding a list that holds the tuple"])
    loop: dict[str, Any] = {}
    loop["back"] = {"to": [loop]}
    return Case({"a": {"b": [loop]}}, [path], ["a cycle three levels down"])


@st.composite
def _surrogate(draw: st.DrawFn, path: str, depth: int) -> Case:
    text = draw(st.text(max_size=5)) + draw(surrogates) + draw(st.text(max_size=5))
    where = draw(st.sampled_from(["value", "key", "long", "set"]))
    if where == "key":
        return Case({text: 1}, [path], ["a lone surrogate in a key"])
    if where == "long":  # a blob: the codec encodes it itself, not through orjson
        return Case("y" * 5000 + text, [path], ["a lone surrogate in a long string"])
    if where == "set":
        return Case({("a", text)}, [path], ["a lone surrogate in a set of tuples"])
    return Case(text, [path], ["a lone surrogate"])


@st.composite
def _long_list(draw: st.DrawFn, path: str, depth: int) -> Case:
    """Long enough to be packed in a keyframe; maybe one bad item."""
    n = draw(st.integers(60, 200))
    items: list[Any] = [
        {"role": "user", "content": f"message {i} " + "words " * 100} for i in range(n)
    ]
    bad: list[str] = []
    if draw(st.booleans()):
        at = draw(st.integers(0, n - 1))
        items[at] = {"role": "user", "content": "broken " + draw(surrogates)}
        bad.append(f"{path}[{at}]")
    return Case(items, bad, [f"{n} messages"])


@st.composite
def _many_keys(draw: st.DrawFn, path: str, depth: int) -> Case:
    """A dict with many entries (packed too); maybe one bad entry."""
    n = draw(st.integers(40, 120))
    entries: dict[str, Any] = {f"call-{i}": "result " * 60 + str(i) for i in range(n)}
    bad: list[str] = []
    if draw(st.booleans()):
        at = f"call-{draw(st.integers(0, n - 1))}"
        entries[at] = [entries[at], draw(surrogates)]
        bad.append(_label(path, at))
    return Case(entries, bad, [f"{n} entries"])


@st.composite
def nasty(draw: st.DrawFn, path: str = "state.v", depth: int = 1, budget: int = 3) -> Case:
    """A value to be saved at ``path``, with ``depth`` containers around it."""
    kinds = ["scalar", "lookalike", "odd keys", "set", "long", "nest", "cycle", "surrogate"]
    kinds += ["long list", "many keys"]
    if budget > 0:
        kinds += ["list", "tuple", "dict", "dict"]
    kind = draw(st.sampled_from(kinds))
    if kind == "scalar":
        return Case(draw(scalars))
    if kind == "lookalike":
        return Case(draw(tag_lookalikes), notes=["looks like a tag"])
    if kind == "odd keys":
        keys = draw(st.lists(odd_keys, min_size=1, max_size=4, unique_by=repr))
        return Case({key: draw(scalars) for key in keys}, notes=["NaN/inf/int/tuple keys"])
    if kind == "set":
        pairs = st.tuples(st.integers(), st.text(max_size=3))
        made = draw(st.sets(pairs, max_size=4))
        return Case(frozenset(made) if draw(st.booleans()) else made, notes=["a set of tuples"])
    if kind == "long":
        size = draw(st.sampled_from([1025, 16 * 1024 + 1, 300_000]))
        text = (draw(st.text(min_size=1, max_size=8)) * size)[:size]
        return Case(text.encode() if draw(st.booleans()) else text, notes=[f"{size} long"])
    if kind == "nest":
        return draw(_nest(path, depth))
    if kind == "cycle":
        return draw(_cycle(path, depth))
    if kind == "surrogate":
        return draw(_surrogate(path, depth))
    if kind == "long list":
        return draw(_long_list(path, depth))
    if kind == "many keys":
        return draw(_many_keys(path, depth))
    n = draw(st.integers(0, 3))
    if kind == "dict":
        keys = draw(st.lists(st.text("abcxyz", min_size=1, max_size=3), max_size=n, unique=True))
        children = {k: draw(nasty(_label(path, k), depth + 1, budget - 1)) for k in keys}
        return _gather({k: c.value for k, c in children.items()}, children.values())
    cost = 1 if kind == "list" else 2
    kids = [draw(nasty(f"{path}[{i}]", depth + cost, budget - 1)) for i in range(n)]
    items = [c.value for c in kids]
    return _gather(items if kind == "list" else tuple(items), kids)


def _gather(value: Any, children: Any) -> Case:
    case = Case(value)
    for child in children:
        case.bad += child.bad
        case.notes += child.notes
    return case


@st.composite
def nasty_updates(draw: st.DrawFn) -> Case:
    """A step's update: a few top-level keys, each a nasty value."""
    keys = draw(st.lists(st.sampled_from(["v", "w", "odd key"]), min_size=1, unique=True))
    children = {k: draw(nasty(_label("state", k), 1)) for k in keys}
    return _gather({k: c.value for k, c in children.items()}, children.values())
