"""savegame export / import through the real entry point: a run moved to another store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import savegame


def test_export_then_import_into_another_store(
    cli: Any, ref: str, store: str, tmp_path: Path
) -> None:
    assert (
        cli("run", ref, "--input", '{"until": 3}', "--store", store, "--run-id", "r").exit_code == 0
    )
    path = tmp_path / "r.sgx"
    out = cli("export", "r", "-o", str(path), "--store", store)
    assert out.exit_code == 0, out.stderr
    assert out.stdout.startswith("exported run r: 4 checkpoints, 0 journal entries")
    other = f"sqlite:///{tmp_path / 'other.db'}"
    out = cli("import", str(path), "--store", other, "--json")
    assert out.exit_code == 0, out.stderr
    assert out.json()["run_ids"] == ["r"] and out.json()["checkpoints"] == 4
    assert cli("verify", "--store", other).exit_code == 0
    shown = cli("show", "r", "--store", other, "--json").json()
    assert shown["state"] == cli("show", "r", "--store", store, "--json").json()["state"]
    assert savegame.client.get_run("r", store=other).status.value == "completed"

    again = cli("import", str(path), "--store", other)
    assert again.exit_code != 0 and "run r exists already" in again.stderr


def test_a_damaged_file_is_one_line_naming_the_record(
    cli: Any, ref: str, store: str, tmp_path: Path
) -> None:
    assert cli("run", ref, "--store", store, "--run-id", "r").exit_code == 0
    path = tmp_path / "r.sgx"
    assert cli("export", "r", "-o", str(path), "--store", store).exit_code == 0
    path.write_bytes(path.read_bytes()[:-10])
    other = f"sqlite:///{tmp_path / 'other.db'}"
    out = cli("import", str(path), "--store", other)
    assert out.exit_code != 0
    assert "export file record" in out.stderr and "truncated" in out.stderr
    assert "Traceback" not in out.stderr
    assert savegame.client.list_runs(store=other) == []
