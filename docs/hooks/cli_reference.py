"""MkDocs hook: the CLI reference, generated from the commands themselves.

``docs/reference/cli.md`` holds ``<!-- cli-reference -->``; at build time it is replaced
by one section per command of ``savegame.cli.app.COMMANDS`` (subcommands of a group
after it): what the command does (its docstring), its usage line, and a table of its
arguments and options with their help. A command added to the CLI is in the reference
at the next build, and a test (tests/docs/test_cli_reference.py) holds the two equal.
"""

from __future__ import annotations

import inspect
from typing import Any

PLACEHOLDER = "<!-- cli-reference -->"


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if PLACEHOLDER not in markdown:
        return markdown
    return markdown.replace(PLACEHOLDER, reference())


def reference() -> str:
    """Every command of the CLI as markdown, in the order ``savegame --help`` lists them."""
    import typer

    from savegame.cli.app import COMMANDS, app

    click: Any = getattr(typer, "_click", None) or __import__("click")
    root = typer.main.get_command(app)
    ctx = click.Context(root, info_name="savegame")
    out: list[str] = []
    for commands in COMMANDS.values():
        for name in commands:
            out += _command(click, root.get_command(ctx, name), name, ctx, level=2)
    return "\n".join(out)


def _command(click: Any, command: Any, name: str, parent: Any, level: int) -> list[str]:
    ctx = click.Context(command, info_name=name, parent=parent)
    path = ctx.command_path
    text = inspect.cleandoc(command.help or "")
    lines = [f"{'#' * level} {path}", "", text, ""]
    lines += ["```text", f"{path} {' '.join(command.collect_usage_pieces(ctx))}", "```", ""]
    rows = [_row(param) for param in command.params if not getattr(param, "hidden", False)]
    if rows:
        lines += ["| argument or option | what it does |", "|---|---|", *rows, ""]
    for sub_name, sub in getattr(command, "commands", {}).items():
        if not sub.hidden:
            lines += _command(click, sub, sub_name, ctx, level + 1)
    return lines


def _row(param: Any) -> str:
    if param.param_type_name == "argument":
        name = f"`{param.metavar or param.name.upper()}`"
    else:
        names = ", ".join(f"`{opt}`" for opt in [*param.opts, *param.secondary_opts])
        meta = "" if getattr(param, "is_flag", False) else f" {param.metavar or 'VALUE'}"
        name = names + (f" `{meta.strip()}`" if meta else "")
    help_text = " ".join((getattr(param, "help", None) or "").split())
    default = param.default
    if (
        param.param_type_name == "option"
        and default not in (None, False, (), "")
        and not (getattr(param, "is_flag", False) and param.secondary_opts)
    ):
        help_text += f" (default: `{default}`)"
    if param.required:
        help_text += " (required)"
    return f"| {name} | {help_text.replace('|', '&#124;')} |"
