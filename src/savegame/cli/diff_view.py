"""``savegame diff`` for people: one line per change, long values cut with their length."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from rich.console import Console
from rich.text import Text

from savegame.cli.words import plural
from savegame.codec import to_data
from savegame.inspect import Change, ChangeKind, StateDiff
from savegame.model import CheckpointHeader

#: Values longer than this are cut, their full length said.
WIDTH = 72
#: At most this many new items of a list that grew are listed.
ITEMS = 10

_MARK = {
    ChangeKind.ADDED: ("+", "green"),
    ChangeKind.REMOVED: ("-", "red"),
    ChangeKind.CHANGED: ("~", "yellow"),
    ChangeKind.GREW: ("+", "green"),
    ChangeKind.SHRANK: ("-", "red"),
    ChangeKind.UNCHANGED: (" ", "dim"),
}


def path(keys: tuple[str | int, ...]) -> str:
    """``plan.steps[2]``; a key that is not a plain name is quoted: ``notes["a b"]``."""
    out = ""
    for key in keys:
        if isinstance(key, int):
            out += f"[{key}]"
        elif key.isidentifier():
            out += f".{key}" if out else key
        else:
            out += f"[{orjson.dumps(key).decode()}]"
    return out or "(state)"


def value(v: Any, width: int = WIDTH) -> str:
    """A value on one line: a string quoted, anything else as JSON of its stored form,
    cut to ``width`` with its full length (a string's in characters)."""
    text = v if isinstance(v, str) else orjson.dumps(to_data(v, "value")).decode()
    cut = text if len(text) <= width else text[: width - 1] + "…"
    shown = orjson.dumps(cut).decode() if isinstance(v, str) else cut
    return shown if cut is text else f"{shown} ({len(text):,} chars)"


def _changed(v: Any, other: Any, show: Callable[[Any], str] = value) -> str:
    """A long string that differs from ``other`` is shown from where they part."""
    if isinstance(v, str) and isinstance(other, str) and len(v) > WIDTH:
        start = next(
            (i for i, (x, y) in enumerate(zip(v, other, strict=False)) if x != y),
            min(len(v), len(other)),
        )
        if start > WIDTH // 2:
            tail = v[start - 8 :]
            shown = orjson.dumps(
                "…" + tail[: WIDTH - 1] + ("…" if len(tail) >= WIDTH else "")
            ).decode()
            return f"{shown} ({len(v):,} chars, differs from char {start:,})"
    return show(v)


def _header(h: CheckpointHeader) -> str:
    where = f"after {h.node}" if h.node else "input"
    return f"{h.checkpoint_id} (run {h.run_id}, step {h.step}, {where}, {h.status.value})"


def _line(change: Change, show: Callable[[Any], str] = value) -> Text:
    mark, style = _MARK[change.kind]
    line = Text(f"{mark} ", style=style)
    line.append(
        path(change.path), style="bold" if change.kind is not ChangeKind.UNCHANGED else "dim"
    )
    line.append(": ")
    if change.kind is ChangeKind.ADDED:
        line.append(show(change.new))
    elif change.kind is ChangeKind.REMOVED:
        line.append(show(change.old), style="dim")
    elif change.kind is ChangeKind.CHANGED:
        line.append(_changed(change.old, change.new, show), style="red")
        line.append(" -> ")
        line.append(_changed(change.new, change.old, show), style="green")
    elif change.kind is ChangeKind.UNCHANGED:
        line.append(show(change.new), style="dim")
    else:
        n = len(change.items)
        sign = "+" if change.kind is ChangeKind.GREW else "-"
        line.append(f"{sign}{plural(n, 'item')}", style=style)
    return line


def diff(out: Console, result: StateDiff) -> None:
    out.print(Text(f"from {_header(result.a)}"))
    out.print(Text(f"  to {_header(result.b)}"))
    for name in ("status", "next", "step"):
        old, new = getattr(result.a, name), getattr(result.b, name)
        if old != new:
            old, new = ("(end)" if v is None else v for v in (old, new))
            out.print(Text(f"  {name}: {old} -> {new}", style="yellow"))
    changes(out, result)


def changes(
    out: Console, result: StateDiff, show: Callable[[Any], str] = value, what: str = "states"
) -> None:
    """One line per change, values (and the items a list gained or lost) shown by ``show``."""
    if result.same:
        out.print(f"{what} are equal")
        return
    for change in result.changes:
        out.print(_line(change, show))
        if change.kind in (ChangeKind.GREW, ChangeKind.SHRANK):
            start = change.at or 0
            for i, new in enumerate(change.items[:ITEMS]):
                out.print(Text(f"    [{start + i}] {show(new)}"))
            if len(change.items) > ITEMS:
                out.print(Text(f"    ... and {len(change.items) - ITEMS} more", style="dim"))
