"""Checkpoints as a timeline: durations, and where a run stopped and went on."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from savegame import RunStatus
from savegame.model import CheckpointHeader
from savegame.ui._timeline import timeline

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _h(n: int, status: RunStatus = RunStatus.RUNNING, **metadata: Any) -> CheckpointHeader:
    return CheckpointHeader(
        thread_id="t", run_id="r", checkpoint_id=f"c{n}", parent_id=f"c{n - 1}" if n else None,
        step=n, node=None if n == 0 else "work", status=status, next="work",
        metadata=metadata, created_at=T0 + timedelta(seconds=1.5 * n),
    )  # fmt: skip


def test_oldest_first_with_the_time_each_step_took() -> None:
    moments = timeline([_h(2), _h(1), _h(0)])  # as history returns them: newest first
    assert [m.header.checkpoint_id for m in moments] == ["c0", "c1", "c2"]
    assert [m.took for m in moments] == [None, 1.5, 1.5]
    assert all(m.marks == () for m in moments)
    earlier = timeline([_h(2)], earlier=_h(1))
    assert earlier[0].took == 1.5


def test_pauses_resumes_retries_and_a_takeover_are_marked() -> None:
    moments = timeline(
        [
            _h(7, writer="host-c:9:3"),
            _h(6, RunStatus.INTERRUPTED),
            _h(5, writer="host-b:77:2"),
            _h(4),
            _h(3, retrying="work", attempt=2, writer="host-a:42:1"),
            _h(2, RunStatus.FAILED),
            _h(1, RunStatus.INTERRUPTED, interrupt="r:1:0:approval"),
            replace(
                _h(0),
                metadata={"source": "fork", "fork": {"run_id": "o", "step": 3, "edited": ["a.b"]}},
            ),
        ]
    )
    kinds = [[kind for kind, _ in m.marks] for m in moments]
    assert kinds == [
        ["fork"],
        ["pause"],
        ["resume"],
        ["resume", "retry"],
        [],
        ["crash"],
        [],
        ["resume"],
    ]
    assert moments[0].marks[0][1] == "forked from step 3 of run o, edited a.b"
    assert moments[2].marks[0][1] == "resumed after the pause"
    assert moments[3].marks[0][1] == "resumed after the failure"
    # host-a's last checkpoint said running and host-b went on: host-a was killed.
    assert moments[5].marks[0][1] == "taken over: host-a:42:1 stopped mid-run, host-b:77:2 went on"
    # After a pause, another process going on is a resume, not a crash.
    assert moments[7].marks[0][1] == "resumed after the pause by host-c:9:3"
