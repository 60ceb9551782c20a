"""Invariant 8 across real processes: a live owner blocks a second process; a killed one does not."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from savegame import RunStatus, resume
from savegame.client import get_run
from savegame.errors import LeaseHeldError

from .harness import Outcome, parse_line, run_to_end, spawn

pytestmark = pytest.mark.crash


def test_second_process_cannot_resume_a_live_run_but_can_right_after_kill(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'live.db'}"
    proc = spawn("start", url, "run", "--block-after", "3")
    out = Outcome()
    assert proc.stdout is not None
    for line in proc.stdout:
        parse_line(line, out)
        if out.committed and out.committed[-1][0] == 3:
            break
    try:
        # The owner is alive (blocked between steps, heartbeat running): hands off.
        with pytest.raises(LeaseHeldError, match="run run is being executed by"):
            resume("run", store=url)
        second = run_to_end("resume", url, "run")
        assert second.returncode != 0 and "LeaseHeldError" in second.stderr
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    # The owner is gone: on the same host that is seen at once, no 30 s lease wait.
    started = time.monotonic()
    result = run_to_end("resume", url, "run")
    assert result.done == "completed", result.stderr
    assert time.monotonic() - started < 10
    assert get_run("run", store=url).status is RunStatus.COMPLETED
