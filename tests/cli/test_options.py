"""Shared options: a flag's help shows no value placeholder (typer printed ``<bool>``)."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from savegame.cli import app

COMMANDS = [
    "run", "resume", "runs", "history", "show", "demo", "effects", "resolve", "approvals",
    "approve", "reject", "cancel", "compensate", "verify", "prune", "stats", "rekey", "keygen",
    "submit", "worker",
]  # fmt: skip


@pytest.mark.parametrize("command", [[], *[[c] for c in COMMANDS]], ids=["root", *COMMANDS])
def test_help_shows_no_bool_placeholder(command: list[str], monkeypatch: Any) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # rows on one line each
    out = CliRunner().invoke(app, [*command, "--help"])
    assert out.exit_code == 0, out.output
    assert "<bool>" not in out.output
    flags = [line for line in out.output.splitlines() if "--help" in line]
    assert flags and "Show this message and exit." in flags[0]


def test_flags_keep_their_help_and_values_keep_their_metavar(monkeypatch: Any) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    text = CliRunner().invoke(app, ["resolve", "--help"]).output
    done = next(line for line in text.splitlines() if "--done" in line)
    assert "--not-done" in done and "It happened" in done
    result = next(line for line in text.splitlines() if line.lstrip("│ ").startswith("--result"))
    assert " JSON " in result
