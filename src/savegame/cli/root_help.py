"""``savegame --help``, drawn as typer draws it, without importing typer's help renderer.

``typer.rich_utils`` imports rich's Markdown, Syntax and Traceback (markdown-it,
pygments: ~100 ms, more than half of the whole ``savegame --help``) to draw three
panels of plain text. These are the same panels from the same rich parts, with typer's
styles and its environment settings (``TERMINAL_WIDTH``, ``FORCE_COLOR``...);
tests/cli/test_startup.py checks the output equals typer's byte for byte, colours on.
A command's own ``--help`` is still typer's (it imports that command's module anyway).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable
from typing import Any

from rich.align import Align
from rich.columns import Columns
from rich.console import Console, Group
from rich.highlighter import RegexHighlighter
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.theme import Theme


class _Options(RegexHighlighter):
    highlights = [  # noqa: RUF012 - rich's API: a class attribute
        r"(^|\W)(?P<switch>\-\w+)(?![a-zA-Z0-9])",
        r"(^|\W)(?P<option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
        r"(?P<types>\<[^\>]+\>)",
        r"(?P<usage>Usage: )",
    ]


class _Negative(RegexHighlighter):
    highlights = [  # noqa: RUF012
        r"(^|\W)(?P<negative_switch>\-\w+)(?![a-zA-Z0-9])",
        r"(^|\W)(?P<negative_option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
    ]


class _Types(RegexHighlighter):
    highlights = [  # noqa: RUF012
        r"^(?P<types_sep>(\[|<))",
        r"(?P<types_sep>\|)",
        r"(?P<types_sep>(\]|>))(\.\.\.)?$",
    ]


_options, _negative, _types = _Options(), _Negative(), _Types()

_THEME = {
    "option": "bold cyan",
    "switch": "bold green",
    "negative_option": "bold magenta",
    "negative_switch": "bold red",
    "types": "bold yellow",
    "types_sep": "dim",
    "usage": "yellow",
}


def _console() -> Console:
    width = os.getenv("TERMINAL_WIDTH")
    force = (
        True
        if os.getenv("GITHUB_ACTIONS") or os.getenv("FORCE_COLOR") or os.getenv("PY_COLORS")
        else None
    )
    return Console(
        theme=Theme(_THEME),
        highlighter=_options,
        color_system="auto",
        force_terminal=False if os.getenv("_TYPER_FORCE_DISABLE_TERMINAL") else force,
        width=int(width) if width else None,
    )


def _markup(text: str, style: str = "") -> Text:
    return _options(Text.from_markup(inspect.cleandoc(text), style=style))


def _help_text(help_text: str) -> Iterable[Text]:
    first, *rest = inspect.cleandoc(help_text).partition("\f")[0].split("\n\n")
    yield _markup(first.replace("\n", " ").strip())
    if rest:
        yield Text("")
        yield _markup("\n\n".join(rest), style="dim")


def _option_help(param: Any) -> Columns:
    items: list[Text] = []
    if param.help:
        paragraphs = [p.replace("\n", " ").strip() for p in param.help.split("\n\n")]
        items.append(_markup("\n".join(paragraphs).strip()))
    if param.envvar and param.show_envvar:
        items.append(Text(f"[env var: {param.envvar}]", style="dim yellow"))
    return Columns(items)


def _table(*, highlight: bool) -> Table:
    return Table(
        highlight=highlight,
        show_header=False,
        expand=True,
        box=None,
        show_lines=False,
        leading=0,
        row_styles=None,
        border_style=None,
        pad_edge=False,
        padding=(0, 1),
    )


def print_help(group: Any, ctx: Any, commands: Iterable[tuple[str, str]]) -> None:
    """The root's usage, help, options (flags with help and env vars: what the root has)
    and ``commands``: (name, one-line help) in order."""
    console = _console()
    console.print(Padding(_options(group.get_usage(ctx)), 1), style="bold")
    if group.help:
        console.print(Padding(Align(Group(*_help_text(group.help)), pad=False), (0, 1, 1, 1)))

    options = _table(highlight=True)
    for param in group.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        longs = [o for o in param.opts if "--" in o]
        shorts = [o for o in param.opts if "--" not in o]
        negative = [o for o in param.secondary_opts if "--" in o]
        negative_short = [o for o in param.secondary_opts if "--" not in o]
        kind = Text(style="bold yellow", overflow="fold")
        shown = param.display_type_rich(ctx=ctx)
        if shown is not None:
            kind.append(shown)
        options.add_row(
            _options(",".join(longs)),
            _options(",".join(shorts)),
            _negative(",".join(negative)),
            _negative(",".join(negative_short)),
            _types(kind),
            _option_help(param),
        )
    if options.row_count:
        console.print(Panel(options, border_style="dim", title="Options", title_align="left"))

    rows = list(commands)
    table = _table(highlight=False)
    table.add_column(style="bold cyan", no_wrap=True, width=max(len(n) for n, _ in rows))
    table.add_column("Description", justify="left", no_wrap=False, ratio=10)
    for name, help_text in rows:
        table.add_row(Text(name), _markup(help_text))
    console.print(Panel(table, border_style="dim", title="Commands", title_align="left"))
