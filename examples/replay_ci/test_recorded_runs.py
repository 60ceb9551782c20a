"""Every run exported under runs/ still replays against the support agent as the code is now.

    python -m pytest examples/replay_ci

A change to the agent's prompt, its tools' arguments or its steps that would make a run
in flight go another way fails here, with the report: the first call that differs (what
the journal holds, what the code asked) and the first state that differs. Nothing is
called: each model and tool call is answered from the run's journal.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from savegame.testing import assert_replays

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the support agent: examples/support_agent.py

import support_agent  # noqa: E402

RUNS = sorted((HERE / "runs").glob("*.sgrun"))


@pytest.mark.parametrize("run", RUNS, ids=[p.stem for p in RUNS])
def test_a_recorded_run_replays(run: Path) -> None:
    assert_replays(run, support_agent.agent)
