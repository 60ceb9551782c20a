"""The README's Agent example, run as a reader would: a file, run twice in one folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import savegame

ROOT = Path(__file__).resolve().parents[2]
SRC = str(Path(savegame.__file__).resolve().parents[1])


def readme_example(section: str) -> str:
    text = (ROOT / "README.md").read_text()
    after = text[text.index(f"\n## {section}\n") :]
    match = re.search(r"```python\n(.*?)```", after, re.S)
    assert match is not None, f"no python block under ## {section}"
    return match.group(1)


def test_the_agent_example_runs_twice(tmp_path: Path) -> None:
    # The second run asked ScriptedModel for a third answer (it continued the first
    # run's thread) and left a failed run behind.
    (tmp_path / "example.py").write_text(readme_example("Agents"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAVEGAME_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH")) if p)
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
        assert out.stdout.startswith("Order A-1 totals 120. Usage(")
    runs = savegame.list_runs(store=f"sqlite:///{tmp_path / 'savegame.db'}")
    assert [r.status.value for r in runs] == ["completed", "completed"]
