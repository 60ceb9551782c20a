"""A value as HTML: a collapsible tree of a state, an argument, a result.

Built here in Python rather than in a template macro: a state of thousands of
values renders in one pass, and every piece of text goes through ``escape`` on
its way in, so nothing a run stored (a ``<script>`` in a tool's result) can become
markup. Containers are ``<details>`` elements, open near the root; long strings
show their start and fold the rest; very large containers stop after
:data:`MAX_ITEMS` items and a page stops after :data:`MAX_NODES` values, saying
how many it left out. A :class:`~savegame.secrets.Secret` shows its name, never its value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import date, datetime, time
from typing import Any

from markupsafe import Markup, escape

from savegame.codec import Unregistered, to_data
from savegame.secrets import Secret

#: Characters of a string shown before the rest is folded.
FOLD_AT = 160
#: Items of one list or dict shown; the rest are counted.
MAX_ITEMS = 500
#: Values rendered in one tree; past it, containers are summarised.
MAX_NODES = 20_000
#: Levels open when the page loads.
OPEN_LEVELS = 2


class _Budget:
    __slots__ = ("left",)

    def __init__(self, nodes: int) -> None:
        self.left = nodes


def render(value: Any, *, open_levels: int = OPEN_LEVELS, max_nodes: int = MAX_NODES) -> Markup:
    """``value`` as a tree of HTML, every text escaped."""
    parts: list[str] = []
    _value(parts, value, 0, open_levels, _Budget(max_nodes))
    return Markup('<div class="tree">' + "".join(parts) + "</div>")


def scalar(value: Any) -> Markup:
    """A short value on one line (a table cell): folded like a tree's strings."""
    parts: list[str] = []
    _value(parts, value, 0, 0, _Budget(50))
    return Markup("".join(parts))


def _value(out: list[str], value: Any, depth: int, open_levels: int, budget: _Budget) -> None:
    budget.left -= 1
    if isinstance(value, Secret):
        out.append(f'<span class="v secret" title="a secret: only its name is stored">'
                   f"Secret({escape(value.name)})</span>")  # fmt: skip
    elif value is None or isinstance(value, bool):
        out.append(f'<span class="v lit">{escape(_literal(value))}</span>')
    elif isinstance(value, int | float):
        out.append(f'<span class="v num">{escape(repr(value))}</span>')
    elif isinstance(value, str):
        _string(out, value)
    elif isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        more = "…" if len(data) > 32 else ""
        out.append(
            f'<span class="v bytes">{len(data)} bytes: {escape(data[:32].hex())}{more}</span>'
        )
    elif isinstance(value, datetime | date | time):
        out.append(f'<span class="v time">{escape(value.isoformat())}</span>')
    elif isinstance(value, Mapping):
        _container(out, "{…}", list(value.items()), depth, open_levels, budget, keyed=True)
    elif isinstance(value, list | tuple | set | frozenset):
        items = list(
            enumerate(value if not isinstance(value, set | frozenset) else sorted(value, key=repr))
        )
        _container(
            out, "[…]", items, depth, open_levels, budget, keyed=False, kind=type(value).__name__
        )
    else:
        _other(out, value, depth, open_levels, budget)


def _literal(value: bool | None) -> str:
    return "null" if value is None else ("true" if value else "false")


def _string(out: list[str], text: str) -> None:
    if len(text) <= FOLD_AT:
        out.append(f'<span class="v str">{escape(text)}</span>')
        return
    out.append(
        f'<span class="v str">{escape(text[:FOLD_AT])}</span>'
        f'<details class="fold"><summary>… {len(text) - FOLD_AT:,} more characters</summary>'
        f'<span class="v str">{escape(text[FOLD_AT:])}</span></details>'
    )


def _container(
    out: list[str],
    empty: str,
    items: list[tuple[Any, Any]],
    depth: int,
    open_levels: int,
    budget: _Budget,
    *,
    keyed: bool,
    kind: str = "dict",
) -> None:
    if not items:
        out.append(f'<span class="v empty">{"{}" if keyed else "[]"}</span>')
        return
    label = f"{len(items):,} {'keys' if keyed else 'items'}" + (
        "" if kind in ("dict", "list") else f" ({kind})"
    )
    if budget.left <= 0:
        out.append(
            f'<span class="v more">{escape(label)}, not shown (the page shows {MAX_NODES:,} values)</span>'
        )
        return
    opened = " open" if depth < open_levels else ""
    out.append(f'<details class="node"{opened}><summary>{escape(label)}</summary><ul>')
    for key, item in items[:MAX_ITEMS]:
        shown = escape(repr(key) if keyed and not isinstance(key, str) else key)
        out.append(f'<li><span class="k{"" if keyed else " i"}">{shown}</span>')
        _value(out, item, depth + 1, open_levels, budget)
        out.append("</li>")
    if len(items) > MAX_ITEMS:
        out.append(f'<li class="more">… {len(items) - MAX_ITEMS:,} more not shown</li>')
    out.append("</ul></details>")


def _other(out: list[str], value: Any, depth: int, open_levels: int, budget: _Budget) -> None:
    """A registered type (a dataclass, a model response ...): its fields, under its type's name;
    one this process does not have (read as a placeholder) under its registered name."""
    name = type(value).__name__
    if isinstance(value, Unregistered):
        out.append(
            f'<span class="type" title="not registered in the UI\'s process">'
            f"{escape(value.name)}</span>"
        )
        _container(out, "{…}", list(value.fields.items()), depth, open_levels, budget,
                   keyed=True, kind=value.name)  # fmt: skip
        return
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    else:
        try:
            fields = {"value": to_data(value, "value")}
        except Exception:  # not pure data: shown as its repr, which is escaped like any text
            out.append(
                f'<span class="v other">{escape(name)}: {escape(repr(value)[:FOLD_AT])}</span>'
            )
            return
    out.append(f'<span class="type">{escape(name)}</span>')
    _container(out, "{…}", list(fields.items()), depth, open_levels, budget, keyed=True, kind=name)
