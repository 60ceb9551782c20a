"""``assert_replays``: a recorded run, exported to a file, as a test of the code that runs it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from savegame.codec.storage import StorageConfig
from savegame.inspect import ReplayReport, replay_file


def assert_replays(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    against: Any,
    *,
    storage: StorageConfig | None = None,
) -> ReplayReport:
    """Replay the runs of export files (a directory: every file in it) against
    ``against`` and fail unless each replays identical: the same calls, the same states.

    Nothing is called (each model and tool call is answered from the run's journal) and
    no store is needed::

        def test_refunds_still_replay():
            assert_replays("tests/runs/refund.sgrun", support_agent)

    Raises:
        AssertionError: a run diverged; the message is the replay report (where, what
            the journal holds there, what the code asked, the first state that differs).
    """
    report = replay_file(path, against=against, storage=storage)
    if not report.identical:
        raise AssertionError("recorded runs diverged from the code:\n" + report.text())
    return report


__all__ = ["assert_replays"]
