"""benchmarks/langgraph_parts.py splits a LangGraph run's saver CPU by part: every part it
names must be reached (a renamed function would leave its row at zero, unnoticed)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "langgraph_parts.py"


def test_every_part_of_an_interrupt_run_is_counted() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--case", "interrupt", "--runs", "3"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = re.findall(r"^\| (?:- )?([^|*]+?) \| (\d+) \| ([\d.]+) \|$", done.stdout, re.M)
    calls = {label: float(n) for label, _, n in rows}
    # Each saver's three methods and savegame's 15 parts: an interrupt run reaches them all
    # (a resume loads a checkpoint, the interrupt's own write commits alone).
    assert len(calls) == 21, done.stdout
    assert all(n > 0 for n in calls.values()), done.stdout
    assert calls["sqlite put"] == calls["savegame put"] == 5
    assert re.search(r"savegame over sqlite, the three methods: \d+\.\d+x", done.stdout)
