"""Every ``savegame ...`` command the README and the docs show parses with the CLI's own
parser: the command and its subcommand exist, and so does every option it is given.

A shown line may be a summary (``savegame approve RUN [--no-resume] | reject RUN``):
an optional ``[part]`` is checked as if given, ``a | b`` is two commands, ``...`` stands
for what the text says. Placeholders (``RUN``, ``$URL``) are values: a value of the wrong
type (``--port N``) is the reader's to fill in, an option that does not exist is a bug.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest
import typer

from savegame.cli.app import COMMANDS, app
from tests.docs.pages import Block, all_blocks

SHELLS = ("bash", "console", "sh", "shell")
# typer 0.2x carries its own copy of click (typer._click); older releases use click's.
click: Any = getattr(typer, "_click", None) or __import__("click")
NAMES = {name for commands in COMMANDS.values() for name in commands}


def commands(block: Block) -> list[list[str]]:
    """The savegame command lines of a shell block, each as its arguments."""
    found: list[list[str]] = []
    text = re.sub(r"\\\n\s*", " ", block.code)  # continued lines
    for raw in text.splitlines():
        line = raw.strip()
        if block.lang == "console":
            if not line.startswith("$ "):
                continue  # output
            line = line[2:]
        for inner in re.findall(r"\$\((savegame [^)]*)\)", line):
            found.append(shlex.split(inner)[1:])
        line = re.sub(r"\$\([^)]*\)", "VALUE", line)
        line = re.sub(r"\[([^\]]*)\]", r"\1", line)  # an optional part, checked as given
        words = [w for w in shlex.split(line, comments=True) if w != "..."]
        current: list[str] | None = None
        for word in words:
            if word in ("&&", ";", "|", "||"):
                current = None
            elif current is None:
                if word == "savegame":
                    current = []
                    found.append(current)
                elif word in NAMES and found and words[words.index(word) - 1] == "|":
                    current = [word]  # `approvals | approve RUN`: the summary's alternatives
                    found.append(current)
            else:
                current.append(word)
    return found


SHOWN = [
    pytest.param(args, id=f"{b.where} savegame {' '.join(args)}"[:120])
    for b in all_blocks()
    if b.lang in SHELLS
    for args in commands(b)
]


def parse(args: list[str]) -> None:
    """Parse ``args`` as ``savegame`` would, down to the command that runs, without
    running it; raise what the parser raises for a command or option that is not there."""
    command: Any = typer.main.get_command(app)
    ctx = command.make_context("savegame", list(args), resilient_parsing=True)
    while hasattr(command, "get_command"):  # a group: its first word names the command
        rest = [*getattr(ctx, "_protected_args", ()), *ctx.args]
        if not rest:
            return  # the group's own help
        name, *rest = rest
        sub = command.get_command(ctx, name)
        if sub is None:
            raise click.exceptions.UsageError(f"no command {name!r}")
        command = sub
        try:
            ctx = command.make_context(name, list(rest), parent=ctx)
        except (click.exceptions.BadParameter, click.exceptions.MissingParameter):
            return  # a placeholder where a number or a choice goes: the reader's part
        except typer.Exit:
            return  # --help
        if not hasattr(command, "get_command") and ctx.args:
            raise click.exceptions.UsageError(f"unexpected extra arguments {ctx.args}")


@pytest.mark.parametrize("args", SHOWN)
def test_the_command_exists_with_its_options(args: list[str]) -> None:
    try:
        parse(args)
    except click.exceptions.UsageError as exc:
        pytest.fail(f"savegame {shlex.join(args)}: {exc.format_message()}")


def test_the_docs_show_commands() -> None:
    assert len(SHOWN) > 50
    shown = {args[0] for args in (p.values[0] for p in SHOWN) if args}
    missing = sorted(NAMES - shown - {"import"})
    assert missing == [], f"commands the docs never show: {missing}"


@pytest.mark.parametrize(
    "line",
    [
        "savegame aprove RUN",
        "savegame approve RUN --edits '{}'",
        "savegame resume RUN extra",
        "savegame schedule add x f.py:wf --cron '* * * * *' --every 5",
        "savegame queues undeclare emails",  # a subcommand that does not exist
    ],
)
def test_a_command_or_option_that_is_not_there_is_caught(line: str) -> None:
    shown = commands(Block("x.md", 1, "bash", None, (), line + "\n", ""))
    assert len(shown) == 1
    with pytest.raises(click.exceptions.UsageError):
        parse(shown[0])
