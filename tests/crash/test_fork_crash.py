"""A replaying fork SIGKILLed mid-way, then resumed, repeats no side effect."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from savegame import RunStatus
from savegame.client import get_checkpoint, history, list_effects
from savegame.effects import REPLAY_KEY, REUSED
from tests.crash.harness import Outcome, parse_line, run_to_end, spawn

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fork_child.py")


def _ledger(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_fork_killed_while_replaying_then_resumed_calls_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fork.db'}"
    ledger = tmp_path / "ledger.txt"
    env = {"SAVEGAME_LEDGER": str(ledger), "SAVEGAME_STEP_SLEEP": "0.05"}
    origin = run_to_end("start", url, "origin-run", script=SCRIPT, env=env)
    assert origin.done == "completed", origin.stderr
    calls = _ledger(ledger)
    assert len(calls) == 30
    start = history("origin-run", store=url)[-1]

    proc = spawn("fork", url, start.checkpoint_id, script=SCRIPT, env=env)
    out, fork_run = Outcome(), None
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("FORK "):
            fork_run = line.split()[1]
        parse_line(line, out)
        if out.committed and out.committed[-1][0] == 5:
            break
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert fork_run is not None

    resumed = run_to_end("resume", url, fork_run, script=SCRIPT, env=env)
    assert resumed.done == "completed", resumed.stderr
    assert _ledger(ledger) == calls  # no tool execution, no model call, before or after the kill
    assert (
        get_checkpoint(fork_run, store=url).state == get_checkpoint("origin-run", store=url).state
    )
    marks = [e.metadata.get(REPLAY_KEY) for e in list_effects(fork_run, store=url)]
    assert len(marks) == 30 and set(marks) == {REUSED}
    assert history(fork_run, store=url)[0].status is RunStatus.COMPLETED
