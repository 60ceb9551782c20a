"""`savegame run` prints one line per checkpoint, with the run's status at it."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def progress_lines(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines() if line.startswith("step ")]


def test_each_progress_line_shows_the_checkpoint_status(cli: Any, ref: str, store: str) -> None:
    out = cli("run", ref, "--input", '{"until": 2}', "--store", store)
    assert out.exit_code == 0, out.stderr
    # step N  node -> next  status  checkpoint_id  size unit  ms
    assert [(w[1], w[5]) for w in progress_lines(out.stdout)] == [
        ("0", "running"),
        ("1", "running"),
        ("2", "completed"),
    ]


def test_a_pause_and_a_failure_show_in_the_progress(
    cli: Any, shop: Path, ref: str, store: str, workflow_file: Path
) -> None:
    out = cli("run", f"{shop}:ask", "--store", store)
    assert [w[5] for w in progress_lines(out.stdout)] == ["running", "interrupted"]
    (workflow_file.parent / "FAIL").touch()
    out = cli("run", ref, "--store", store)
    assert out.exit_code == 1
    assert [w[5] for w in progress_lines(out.stdout)] == ["running", "running", "failed"]
