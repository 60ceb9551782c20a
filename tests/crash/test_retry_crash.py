"""Retries under real SIGKILL: a run killed while it waits to try again resumes where it
was. The write before the failing call or step is not made again, and the attempts
already made count against the budget: two more, not a fresh three.

The child blocks in stamina's retry hook, which runs after the failed attempt was
journaled and before the sleep, and is killed there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from savegame import RunStatus
from savegame.client import get_run, history, list_effects

from .harness import kill_at_hook, run_to_end

pytestmark = pytest.mark.crash

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "effects_child.py")


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("workflow", ["tools", "steps"])
def test_a_run_killed_mid_backoff_resumes_without_repeating(tmp_path: Path, workflow: str) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    env = {
        "RETRY_WORLD": str(tmp_path),
        "SAVEGAME_WORKLOAD": f"retry_workload.py:{workflow}",
        "SAVEGAME_INPUT": "{}",
    }
    killed = kill_at_hook("start", url, "r", "backoff", script=CHILD, env=env)
    assert killed.hooks == ["backoff"] and killed.done is None
    assert len(lines(tmp_path / "attempts.txt")) == 1
    assert get_run("r", store=url).status is RunStatus.RUNNING

    resumed = run_to_end("resume", url, "r", script=CHILD, env=env)
    assert resumed.error == "StepError", resumed.stderr
    assert len(lines(tmp_path / "attempts.txt")) == 3  # 1 before the kill, 2 after
    assert len(lines(tmp_path / "ledger.txt")) == 1  # the write replayed, never repeated
    info = get_run("r", store=url)
    assert info.status is RunStatus.FAILED
    last = "quote service down (attempt 3)" if workflow == "tools" else "courier down (execution 3"
    assert last in (info.error or "")  # failed with the last attempt's error
    if workflow == "tools":
        numbers = [
            e.metadata["attempt"]
            for e in list_effects("r", store=url)
            if ":attempt:" in e.request_id
        ]
    else:
        numbers = sorted(
            h.metadata["attempt"] for h in history("r", store=url) if "attempt" in h.metadata
        )
    assert numbers == [1, 2, 3]
