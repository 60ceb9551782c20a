"""A user's project, as users lay it out, and ``savegame`` run in it as they run it.

The command is the ``savegame`` console script, not ``python -m savegame``: ``-m`` puts the
working directory on the import path itself, which would hide whether savegame does. The
environment has no SAVEGAME_ settings and a PYTHONPATH of savegame's sources only (no
path to the project): what the project imports, savegame must find by itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import savegame

SRC = str(Path(savegame.__file__).resolve().parents[1])


def savegame_command() -> list[str]:
    """``savegame`` as a user types it."""
    script = Path(sys.executable).with_name("savegame")
    if script.exists():
        return [str(script)]
    if sys.version_info >= (3, 11):  # -P: no working directory on the path, as the script
        return [sys.executable, "-P", "-m", "savegame"]
    pytest.skip("no savegame console script beside this interpreter")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAVEGAME_")}
    env["PYTHONPATH"] = SRC
    env.update(extra)
    return env


def completed(
    command: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``command`` run in ``cwd`` to its end, with no stdin, its output captured."""
    return subprocess.run(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def sg(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``savegame ARGS`` run in ``cwd``, to its end."""
    return completed([*savegame_command(), *args], cwd=cwd, env=clean_env(), timeout=timeout)


def start(*args: str, cwd: Path) -> subprocess.Popen[str]:
    """``savegame ARGS`` started in ``cwd`` (a worker), its output piped."""
    return subprocess.Popen(
        [*savegame_command(), *args],
        cwd=cwd,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def python(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python SCRIPT ARGS`` in ``cwd``, as the user runs their own scripts; must exit 0."""
    done = completed([sys.executable, script, *args], cwd=cwd, env=clean_env())
    assert done.returncode == 0, done.stdout + done.stderr
    return done
