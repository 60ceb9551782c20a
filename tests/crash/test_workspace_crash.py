"""Workspace snapshots under real SIGKILL: a step that edited files and was killed
half way is re-run on resume against the workspace of the last checkpoint, restored
byte for byte (its half-made writes and deletions undone), and the run ends with the
same files as a run never killed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from savegame import RunStatus
from savegame.client import get_run

from .harness import kill_at_hook, run_to_end
from .workspace_workload import tree

pytestmark = pytest.mark.crash

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "effects_child.py")


def _world(root: Path) -> dict[str, str]:
    (root / "ws").mkdir(parents=True)
    (root / "ws" / "base.txt").write_text("there before the run\n")
    os.symlink("base.txt", root / "ws" / "link")
    return {
        "WS_WORLD": str(root),
        "SAVEGAME_WORKLOAD": "workspace_workload.py:wf",
        "SAVEGAME_INPUT": "{}",
    }


def _seen(root: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (root / "seen.jsonl").read_text().splitlines()]


def test_a_step_killed_mid_write_reruns_on_the_last_checkpoints_workspace(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    ref_env = _world(reference)
    done = run_to_end("start", f"sqlite:///{reference / 'runs.db'}", "r", script=CHILD, env=ref_env)
    assert done.done == "completed", done.stderr

    crashed = tmp_path / "crashed"
    env = _world(crashed)
    url = f"sqlite:///{crashed / 'runs.db'}"
    killed = kill_at_hook("start", url, "r", "midstep", script=CHILD, env=env)
    assert killed.hooks == ["midstep"] and killed.done is None
    assert (crashed / "ws" / "shared.txt").read_text().startswith("half written")
    assert not (crashed / "ws" / "base.txt").exists()
    assert get_run("r", store=url).status is RunStatus.RUNNING

    resumed = run_to_end("resume", url, "r", script=CHILD, env=env)
    assert resumed.done == "completed", resumed.stderr
    seen = _seen(crashed)
    # Step 3 began twice: before the kill, and on resume with the same files, restored.
    assert [s["step"] for s in seen] == [1, 2, 3, 3, 4, 5]
    assert seen[3]["tree"] == seen[2]["tree"] == _seen(reference)[2]["tree"]
    assert tree(crashed / "ws") == tree(reference / "ws")
