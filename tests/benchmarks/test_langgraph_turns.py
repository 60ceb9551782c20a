"""benchmarks/langgraph_turns.py drives one thread a turn at a time on both savers: its
table has a row for each quarter of the turns and a total, every ratio a number."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "langgraph_turns.py"


def test_each_graph_gives_four_quarters_and_a_total() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--turns", "8", "--normal"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for graph in ("turns", "subgraph"):
        assert f"| {graph}: turns |" in done.stdout, done.stdout
    quarters = re.findall(r"^\| (\d+)-(\d+) \| [\d.]+ \| [\d.]+ \| [\d.]+x \|$", done.stdout, re.M)
    assert quarters == [("1", "2"), ("3", "4"), ("5", "6"), ("7", "8")] * 2, done.stdout
    assert len(re.findall(r"^\| all 8 \(total s\) \| .* \| [\d.]+x \|$", done.stdout, re.M)) == 2
