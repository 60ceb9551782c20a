"""``savegame --help`` imports no command module, and every command still works as before.

The root lists its commands from ``cli.app.COMMANDS`` and draws its help itself
(``cli.root_help``): these tests keep the table equal to the commands the modules
define, and the drawing equal to typer's.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import subprocess
import sys
from typing import Any

import pytest
from typer.testing import CliRunner

from savegame.cli import app
from savegame.cli.app import COMMANDS, load
from tests.cli.conftest import TYPER_ROOT_HELP, clean_env, python_output

#: Imported by a command, never by the root's help: savegame's layers below the CLI,
#: the web UI's server, typer's help renderer (rich's Markdown and Syntax).
NOT_FOR_HELP = [
    "savegame.runtime",
    "savegame.stores",
    "savegame.codec",
    "savegame.integrations",
    "savegame.ui",
    "starlette",
    "typer.rich_utils",
    "markdown_it",
    "pygments",
    *(f"savegame.cli.{module}" for module in COMMANDS),
]

LISTED = [name for commands in COMMANDS.values() for name in commands]


def test_the_root_help_lists_every_command_and_imports_none_of_them() -> None:
    code = (
        "import contextlib, io, runpy, sys\n"
        "names, sys.argv = sys.argv[1:], ['savegame', '--help']\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "    runpy.run_module('savegame', run_name='__main__')\n"
        "print(out.getvalue())\n"
        "print(sorted(m for m in names if m in sys.modules))\n"
    )
    *shown, loaded = python_output(code, *NOT_FOR_HELP, COLUMNS="200").splitlines()
    assert loaded == "[]"
    listed = [line.split()[1] for line in shown if line.startswith("│ ") and "  " in line]
    assert listed[3:] == LISTED  # after --debug, --version and --help


def test_version_prints_the_installed_version_and_imports_no_command() -> None:
    code = (
        "import contextlib, io, runpy, sys\n"
        "names, sys.argv = sys.argv[1:], ['savegame', '--version']\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "    runpy.run_module('savegame', run_name='__main__')\n"
        "print(out.getvalue(), end='')\n"
        "print(sorted(m for m in names if m in sys.modules))\n"
    )
    shown, loaded = python_output(code, *NOT_FOR_HELP).splitlines()
    assert shown == f"savegame {importlib.metadata.version('savegame')}"
    assert loaded == "[]"
    done = subprocess.run(
        [sys.executable, "-m", "savegame", "--version"],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, shown + "\n", "")


def test_the_root_help_is_drawn_as_typer_draws_it() -> None:
    """Byte for byte, colours on: typer's renderer over the group with every command
    loaded (TYPER_ROOT_HELP)."""
    ours = "from savegame.cli import main\nmain()\n"
    for env in ({"FORCE_COLOR": "1", "TERMINAL_WIDTH": "100"}, {"COLUMNS": "60"}):
        expected = python_output(TYPER_ROOT_HELP, **env)
        assert "\x1b[" in expected or "COLUMNS" in env
        assert python_output(ours, "--help", **env) == expected


@pytest.mark.parametrize("module", list(COMMANDS))
def test_the_table_names_what_each_module_registers(module: str) -> None:
    commands = load(module)
    assert list(commands) == list(COMMANDS[module])
    for name, command in commands.items():
        first = inspect.cleandoc(command.help or "").split("\n\n")[0].strip()
        assert COMMANDS[module][name] == first, name


def _every_command() -> list[list[str]]:
    found: list[list[str]] = []
    for module in COMMANDS:
        for name, command in load(module).items():
            found.append([name])
            found += [[name, sub] for sub in getattr(command, "commands", {})]
    return found


@pytest.mark.parametrize("command", _every_command(), ids=" ".join)
def test_each_command_shows_its_own_help(command: list[str], monkeypatch: Any) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    out = CliRunner().invoke(app, [*command, "--help"])
    assert out.exit_code == 0, out.output
    assert f"Usage: savegame {' '.join(command)} " in out.output
    assert "Show this message and exit." in out.output


def test_a_command_imports_its_own_module_alone() -> None:
    code = (
        "import contextlib, io, sys\n"
        "from savegame.cli import main\n"
        "sys.argv = ['savegame', 'keygen']\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main()\n"
        "print(sorted(m for m in sys.modules if m.endswith('_cmds')))\n"
    )
    assert python_output(code) == "['savegame.cli.storage_cmds']\n"


def test_a_misspelt_command_is_still_suggested() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "savegame", "histroy"],
        env={**clean_env(), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "No such command 'histroy'. Did you mean 'history'?" in done.stderr
