"""A command opens the store its ``--store`` names once, however many calls it makes, and
closes it when it ends (tests/conftest.py's ``opened`` counts the stores opened)."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from savegame import Store


def _closed(store: Store) -> bool:
    try:
        store.list_runs(limit=1)
    except sqlite3.ProgrammingError:  # "Cannot operate on a closed database."
        return True
    return False


@pytest.mark.parametrize(
    "args",
    [
        ["history", "r1"],  # LangGraph's reader, the history, the tree of forks
        ["runs"],
        ["show", "r1"],
        ["effects", "r1"],
        ["fork", "FIRST", "--yes"],  # the plan, the fork, its end
    ],
    ids=lambda args: args[0],
)
def test_a_command_opens_its_store_once_and_closes_it(
    cli: Any, ref: str, store: str, opened: list[Store], args: list[str]
) -> None:
    assert cli("run", ref, "--run-id", "r1", "--store", store).exit_code == 0
    first = cli("history", "r1", "--json", "--store", store).json()[-1]["checkpoint_id"]
    del opened[:]
    given = [first if arg == "FIRST" else arg for arg in args]
    out = cli(*given, "--store", store)
    assert out.exit_code == 0, out.stderr
    assert [s.url for s in opened] == [store]
    assert _closed(opened[0])


def test_a_failing_command_closes_its_store_too(cli: Any, store: str, opened: list[Store]) -> None:
    out = cli("show", "nope", "--store", store)
    assert out.exit_code == 3
    assert [s.url for s in opened] == [store] and _closed(opened[0])
