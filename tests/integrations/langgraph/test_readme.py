"""The README's LangGraph example, run as a reader would: a file, run twice in one folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("langgraph")

import savegame

ROOT = Path(__file__).resolve().parents[3]
SRC = str(Path(savegame.__file__).resolve().parents[1])


def test_the_durable_tool_example_sends_one_email(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("\n## Using savegame with LangGraph\n") :]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    example = next(b for b in blocks if "durable_tool" in b)
    (tmp_path / "example.py").write_text(example)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAVEGAME_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH")) if p)
    printed = []
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "example.py"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        printed.append(out.stdout.strip())
    assert printed == ["email queued; close the ticket?", "ticket closed: yes"]
    assert (tmp_path / "outbox.txt").read_text() == "ann@example.com: Your refund is on its way\n"
