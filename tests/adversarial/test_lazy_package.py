"""Attacks on the lazy package (PEP 562 ``savegame.__getattr__``) and the lazy CLI.

Each check runs in a fresh interpreter, since what is already imported decides what
a lazy name does: star imports, subpackages read as attributes, a misspelt name,
threads reading names at once on first access, and the root help's drawing under
NO_COLOR, a dumb terminal and narrow widths.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.cli.conftest import TYPER_ROOT_HELP, clean_env, python_output


def test_a_star_import_binds_every_public_name_to_the_package_s_own() -> None:
    code = (
        "import savegame\n"
        "ns = {}\n"
        "exec('from savegame import *', ns)\n"
        "missing = [n for n in savegame.__all__ if n not in ns]\n"
        "other = [n for n in savegame.__all__ if n in ns and ns[n] is not getattr(savegame, n)]\n"
        "extra = sorted(k for k in ns if k != '__builtins__' and k not in savegame.__all__)\n"
        "print(missing, other, extra, set(savegame.__all__) <= set(dir(savegame)))\n"
    )
    assert python_output(code) == "[] [] [] True\n"


def test_a_subpackage_read_as_an_attribute_is_there_whatever_was_read_first() -> None:
    # The eager package imported errors, stores, model...: `import savegame` then
    # `savegame.errors.NotFoundError` worked, and must not hang on a name read before.
    code = (
        "import savegame\n"
        "print(savegame.errors.NotFoundError.__name__, savegame.stores.open_store.__name__,"
        " savegame.model.RunStatus.__name__, savegame.testing.__name__)\n"
    )
    assert python_output(code) == "NotFoundError open_store RunStatus savegame.testing\n"


def test_a_name_that_does_not_exist_is_a_plain_attribute_error() -> None:
    code = (
        "import savegame, sys\n"
        "try:\n"
        "    savegame.Wrokflow\n"
        "except AttributeError as exc:\n"
        "    print(exc)\n"
        "print(hasattr(savegame, 'nope'), hasattr(savegame, '__main__'))\n"
        "print('savegame.cli.app' in sys.modules)\n"  # __main__ was not run for the probe
        "try:\n"
        "    from savegame import Wrokflow\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    assert python_output(code) == (
        "module 'savegame' has no attribute 'Wrokflow'\nFalse False\nFalse\nImportError\n"
    )


@pytest.mark.parametrize("round_", range(4))
def test_threads_reading_names_at_once_on_first_access_all_get_the_same_object(
    round_: int,
) -> None:
    # Each thread reads names in another order, all released at once: the imports
    # they start race (partly initialised modules, import locks) in a fresh process.
    code = (
        "import random, sys, threading, savegame\n"
        "names = [n for n in savegame.__all__ if n != '__version__']\n"
        f"rng = random.Random({round_})\n"
        "gate = threading.Barrier(16)\n"
        "seen, errors = [], []\n"
        "def read():\n"
        "    order = names[:]\n"
        "    rng.shuffle(order)\n"
        "    gate.wait()\n"
        "    try:\n"
        "        seen.append({n: id(getattr(savegame, n)) for n in order})\n"
        "    except BaseException as exc:\n"
        "        errors.append(repr(exc))\n"
        "threads = [threading.Thread(target=read) for _ in range(16)]\n"
        "[t.start() for t in threads]\n"
        "[t.join(60) for t in threads]\n"
        "print(errors, len(seen), all(s == seen[0] for s in seen))\n"
    )
    assert python_output(code) == "[] 16 True\n"


# -- the root help, drawn by cli.root_help as typer draws it ------------------------------
@pytest.mark.parametrize(
    "env",
    [
        {"NO_COLOR": "1", "COLUMNS": "30"},
        {"COLUMNS": "20"},
        {"TERM": "dumb", "COLUMNS": "80"},
        {"NO_COLOR": "1", "FORCE_COLOR": "1", "COLUMNS": "45"},
        {"FORCE_COLOR": "1", "COLUMNS": "300"},
    ],
)
def test_the_root_help_matches_typer_s_under_any_terminal(env: dict[str, str]) -> None:
    ours = "from savegame.cli import main\nmain()\n"
    assert python_output(ours, "--help", **env) == python_output(TYPER_ROOT_HELP, **env)


@pytest.mark.parametrize(("typo", "meant"), [("rnu", "'run'"), ("ru", "'run', 'runs'")])
def test_a_typo_is_answered_with_its_nearest_commands(typo: str, meant: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "savegame", typo],
        env={**clean_env(), "NO_COLOR": "1", "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert f"No such command '{typo}'. Did you mean {meant}?" in done.stderr
