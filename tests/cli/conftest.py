"""Fixtures for the CLI tests: a workflow file, a real SQLite store, and a runner."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from savegame.cli import app

WORKFLOW = textwrap.dedent(
    """
    import datetime
    import os

    from savegame import END, Workflow

    FLAG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "FAIL")

    wf = Workflow("counter")


    @wf.step(entry=True)
    def tick(state, ctx):
        n = state.get("n", 0) + 1
        if n == 2 and os.path.exists(FLAG):
            raise RuntimeError("the flaky API said no")
        update = {"n": n, "seen": (*state.get("seen", ()), n), "day": datetime.date(2024, 1, n)}
        return update, ("tick" if n < state.get("until", 3) else END)


    not_a_workflow = 42
    """
)


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return orjson.loads(self.stdout)


@pytest.fixture(autouse=True)
def _isolated_imports() -> Iterator[None]:
    # Loading path/file.py workflows adds to sys.path and sys.modules; keep tests independent.
    path, modules = list(sys.path), set(sys.modules)
    yield
    sys.path[:] = path
    for name in set(sys.modules) - modules:
        if name.startswith("savegame_user_"):
            del sys.modules[name]


@pytest.fixture(autouse=True)
def _no_env_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SAVEGAME_STORE", raising=False)
    monkeypatch.delenv("SAVEGAME_DEBUG", raising=False)


@pytest.fixture
def workflow_file(tmp_path: Path) -> Path:
    path = tmp_path / "counter_flow.py"
    path.write_text(WORKFLOW)
    return path


@pytest.fixture
def ref(workflow_file: Path) -> str:
    return f"{workflow_file}:wf"


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'savegame.db'}"


@pytest.fixture
def cli() -> Any:
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        out = runner.invoke(app, list(args), catch_exceptions=False)
        return Result(out.exit_code, out.stdout, out.stderr)

    return invoke
