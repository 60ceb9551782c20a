"""`resolve --done` must say what the call returned: the re-executed step gets it back, and
whether the step uses it cannot be known from outside, so it is never recorded as null."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from savegame import resolve
from savegame.errors import ConfigurationError
from tests.cli.test_control import crash_mid_charge, ledger
from tests.cli.test_errors import assert_one_error_line


def test_done_without_a_result_is_refused_and_records_nothing(
    cli: Any, proc: Any, shop: Path, store: str
) -> None:
    crash_mid_charge(proc, shop, store)
    out = cli("resolve", "p1", "--effect", "p1:1:0", "--done", "--store", store)
    assert_one_error_line(
        out, "settling p1:1:0 as done needs what the call returned", "--result JSON"
    )
    assert out.exit_code == 2
    [entry] = cli("effects", "p1", "--store", store, "--json").json()
    assert (entry["status"], entry["result"]) == ("pending", None)  # still in doubt

    with pytest.raises(ConfigurationError, match=r"p1:1:0 as done needs what the call returned"):
        resolve("p1", "p1:1:0", done=True, store=store)
    assert cli("effects", "p1", "--store", store, "--json").json()[0]["status"] == "pending"


def test_an_explicit_null_result_is_recorded(cli: Any, proc: Any, shop: Path, store: str) -> None:
    crash_mid_charge(proc, shop, store)
    out = cli("resolve", "p1", "--effect", "p1:1:0", "--done", "--result", "null", "--store", store)
    assert out.exit_code == 0, out.stderr
    result = cli("resume", "p1", "--store", store, "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["state"]["receipt"] is None  # what the person said it returned
    assert ledger(shop) == ["charge 30"]
