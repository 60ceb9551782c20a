"""The CLI reference (docs/reference/cli.md) is generated from the commands by the site's
hook (docs/hooks/cli_reference.py): every command and subcommand has its section, with
every option it takes, so a command added to the CLI cannot be missing from the docs."""

from __future__ import annotations

import importlib.util
import re
from types import ModuleType
from typing import Any

import typer

from savegame.cli.app import COMMANDS, app
from tests.docs.pages import ROOT


def hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "cli_reference", ROOT / "docs" / "hooks" / "cli_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_command_and_option_is_in_the_reference() -> None:
    text = hook().reference()
    headings = re.findall(r"^#+ (savegame .*)$", text, re.M)
    click: Any = getattr(typer, "_click", None) or __import__("click")
    root = typer.main.get_command(app)
    ctx = click.Context(root, info_name="savegame")
    expected = []
    for name in (name for commands in COMMANDS.values() for name in commands):
        command = root.get_command(ctx, name)
        expected.append(f"savegame {name}")
        expected += [f"savegame {name} {sub}" for sub in getattr(command, "commands", {})]
        section = text[text.index(f"# savegame {name}\n") :]
        for param in command.params:
            for opt in param.opts if param.param_type_name == "option" else ():
                assert f"`{opt}`" in section.split("\n#")[0], f"savegame {name} {opt}"
    assert headings == expected


def test_the_page_holds_the_placeholder_the_hook_fills() -> None:
    module = hook()
    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    assert module.PLACEHOLDER in page
    built = module.on_page_markdown(page, page=None)
    assert module.PLACEHOLDER not in built and "## savegame approve\n" in built
