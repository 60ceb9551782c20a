"""A file rewritten at the same size within one clock tick is in every checkpoint.

A capture trusts a file's (size, mtime, inode, mode) to say it is unchanged. The kernel
stamps a write with a clock that ticks every 1 to 10 ms on ext2/3, NFS, and ext4/xfs
before Linux 6.13, so a step that rewrites ``counter.txt`` in place within the tick of
the last capture leaves it the same stat on new content: checkpoints held the old file,
and a resume put the old file back (issue 30, point 1). These run on a loop-mounted
ext2 filesystem (``coarse_dir``, skipped where the machine refuses to mount one), and
on any filesystem with the stamp forced, the way a filesystem keeping whole seconds
gives it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from savegame import END, Workflow, resume, run
from savegame.client import get_checkpoint, history, restore_workspace
from savegame.errors import StepError
from savegame.model import WORKSPACE_KEY
from savegame.stores import MemoryStore, SqliteStore, Store
from tests.adversarial.counter_workload import KILL_AT
from tests.adversarial.counter_workload import STEPS as CRASH_STEPS
from tests.crash.harness import kill_at_hook, run_to_end

CHILD = str(Path(__file__).parents[1] / "crash" / "effects_child.py")
WORKLOAD = str(Path(__file__).with_name("counter_workload.py"))

STEPS = 40


def counting(
    ws: Path, steps: int = STEPS, *, stamp: int | None = None, dies: dict[str, int] | None = None
) -> Workflow:
    """A counter at 0 in ``ws``; each step reads it and rewrites it in place, 8 digits:
    its number.

    With ``stamp``, each write's mtime is set to it: one tick of a clock that has not
    moved since the run began. Step ``dies["at"]`` writes garbage over it and raises.
    """
    ws.mkdir()
    (ws / "counter.txt").write_text(f"{0:08d}")
    wf = Workflow("same-size-rewrites", workspace=ws)

    @wf.step(entry=True)
    def count(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
        n = state.get("n", 0) + 1
        read = int((ws / "counter.txt").read_text())
        (ws / "counter.txt").write_text(f"{n:08d}")
        if stamp is not None:
            os.utime(ws / "counter.txt", ns=(stamp, stamp))
        if dies is not None and n == dies["at"]:
            (ws / "counter.txt").write_text("garbage!")  # undone by the restore
            raise RuntimeError("dies after its writes")
        return {"n": n, "read": read}, ("count" if n < steps else END)

    return wf


def counters(run_id: str, store: Store, look: Path) -> dict[int, int]:
    """Each checkpoint with a workspace: its step -> the counter its manifest holds."""
    out: dict[int, int] = {}
    for h in history(run_id, store=store):
        cp = get_checkpoint(h.checkpoint_id, store=store)
        if WORKSPACE_KEY in cp.state:
            restore_workspace(cp, look, store=store)
            out[cp.state.get("n", 0)] = int((look / "counter.txt").read_text())
    return out


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_each_checkpoint_holds_the_counter_its_step_wrote(
    coarse_dir: Path, tmp_path: Path, kind: str
) -> None:
    store = MemoryStore() if kind == "memory" else SqliteStore(tmp_path / "runs.db")
    result = run(counting(coarse_dir / "ws"), store=store)
    held = counters(result.run_id, store, tmp_path / "look")
    # Before the fix: 36 of 41 on the memory store held an older counter, 10 on SQLite.
    assert held == {n: n for n in range(STEPS + 1)}


def test_a_rewrite_stamped_like_the_last_capture_is_read_again(tmp_path: Path) -> None:
    """Any filesystem: each write's mtime forced to one whole second, as ext3 with
    128-byte inodes or HFS+ stamps every write within that second."""
    stamp = time.time_ns() // 1_000_000_000 * 1_000_000_000
    store = MemoryStore()
    result = run(counting(tmp_path / "ws", steps=5, stamp=stamp), store=store)
    assert counters(result.run_id, store, tmp_path / "look") == {n: n for n in range(6)}


def test_a_step_that_rewrites_what_resume_restored_is_captured(
    coarse_dir: Path, tmp_path: Path
) -> None:
    """The restore's own writes are as recent as a capture: a step that rewrites one
    of them at once, in the same tick, is read again too."""
    fail = {"at": 3}
    wf = counting(coarse_dir / "ws", steps=6, dies=fail)
    store = SqliteStore(tmp_path / "runs.db")
    with pytest.raises(StepError):
        run(wf, run_id="r", store=store)
    fail["at"] = 0
    result = resume("r", store=store, workflow=wf)
    assert result.state["read"] == 5
    assert counters("r", store, tmp_path / "look") == {n: n for n in range(7)}


@pytest.mark.slow
@pytest.mark.crash
def test_a_run_killed_and_resumed_on_a_coarse_clock_keeps_every_counter(
    coarse_dir: Path, tmp_path: Path
) -> None:
    """The issue's case in real processes: SIGKILLed in step 20 after its write, resumed;
    step 20 runs again on the counter step 19 left, and every checkpoint holds its own."""
    world = coarse_dir / "world"
    (world / "ws").mkdir(parents=True)
    (world / "ws" / "counter.txt").write_text(f"{0:08d}")
    env = {
        "WS_WORLD": str(world),
        "SAVEGAME_WORKLOAD": f"{WORKLOAD}:wf",
        "SAVEGAME_INPUT": "{}",
    }
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    killed = kill_at_hook("start", url, "r", "midstep", script=CHILD, env=env)
    assert killed.hooks == ["midstep"] and killed.done is None, killed.stderr
    resumed = run_to_end("resume", url, "r", script=CHILD, env=env)
    assert resumed.done == "completed", resumed.stderr

    reads = [json.loads(line) for line in (world / "read.jsonl").read_text().splitlines()]
    begun = [r["step"] for r in reads]
    assert begun == [*range(1, KILL_AT + 1), *range(KILL_AT, CRASH_STEPS + 1)]
    assert [r for r in reads if r["read"] != r["step"] - 1] == []
    store = SqliteStore(tmp_path / "runs.db")
    assert counters("r", store, tmp_path / "look") == {n: n for n in range(CRASH_STEPS + 1)}
