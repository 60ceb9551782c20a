"""google-adk is an optional extra: savegame works without it, and the integration says
how to get it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[3] / "src")

WITHOUT = """
import sys
sys.modules["google.adk"] = None  # as if not installed: its import raises ImportError
import savegame, savegame.cli, savegame.integrations, savegame.models, savegame.ui
assert not any(name.startswith("google.adk") and sys.modules[name] for name in sys.modules)
try:
    import savegame.integrations.adk
except ImportError as exc:
    print(exc)
"""


def test_savegame_imports_without_adk_and_the_integration_says_what_to_install() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "pip install 'savegame[adk]'" in done.stdout
