"""examples/local_model.py on the real local model: the run killed in its tool and
resumed asks the server twice in all, and a fork from its start asks nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from savegame.models._local import missing
from tests.services import unusable

from .conftest import EXAMPLES, ROOT


def test_a_real_models_calls_are_journaled_resumed_and_replayed(tmp_path: Path) -> None:
    lacking = missing()
    if lacking is not None:
        unusable(f"the local model is not there: {lacking}")
    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "local_model.py"),
            "--store",
            f"sqlite:///{tmp_path / 'r.db'}",
        ],
        cwd=tmp_path,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        },
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    out = done.stdout
    # The server's own count after the kill, the resume, and the fork's replay.
    assert re.findall(r"requests the server answered: (\d+)", out) == ["1", "2", "2"], out
    assert "resumed local-" in out and ": completed" in out
    assert re.search(r"1\. smollm2-135m, \d+ in / \d+ out: asked for lookup_order\(", out), out
    assert re.search(r"2\. smollm2-135m, \d+ in / \d+ out: answered '", out), out
    assert "replayed: the same answer: True" in out
