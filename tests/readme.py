"""The README's examples, run as a reader would: a block written to a file in a fresh
folder and run there by a new interpreter, with no SAVEGAME_ variables of the suite's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import savegame

ROOT = Path(__file__).resolve().parents[1]
SRC = str(Path(savegame.__file__).resolve().parents[1])


def readme_example(section: str, containing: str | None = None) -> str:
    """The first python block under ``## section`` (the first holding ``containing``)."""
    text = (ROOT / "README.md").read_text()
    after = text[text.index(f"\n## {section}\n") :]
    end = after.find("\n## ", 1)
    blocks = re.findall(r"```python\n(.*?)```", after if end < 0 else after[:end], re.S)
    found = [b for b in blocks if containing is None or containing in b]
    assert found, f"no python block under ## {section}" + (
        f" holding {containing!r}" if containing else ""
    )
    return found[0]


def run_example(
    folder: Path,
    code: str,
    *,
    env: Mapping[str, str] | None = None,
    drop: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """Write ``code`` to ``folder/example.py`` (once) and run it there; ``env`` added to
    the environment, variables starting with one of ``drop`` (and SAVEGAME_) removed."""
    script = folder / "example.py"
    if not script.exists():
        script.write_text(code)
    given = {k: v for k, v in os.environ.items() if not k.startswith(("SAVEGAME_", *drop))}
    given["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, given.get("PYTHONPATH")) if p)
    given.update(env or {})
    return subprocess.run(
        [sys.executable, "example.py"],
        cwd=folder,
        env=given,
        capture_output=True,
        text=True,
        timeout=60,
    )
