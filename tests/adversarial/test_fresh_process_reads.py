"""A fresh process reads what savegame wrote, without the user's help; every public
function takes a store URL (issue 30, point 9).

``savegame.client.get_checkpoint`` and ``savegame.client.diff`` import only the readers (the package
is lazy), and ``ChildRun``, which a planner keeps in its state, was registered by the
runtime: in a process that had not run anything they raised ``type 'savegame.ChildRun'
is not registered``. ``restore_workspace(store=URL)`` raised ``AttributeError`` where
every other public function opens a URL.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import savegame
from savegame import END, StepContext, Workflow, Workspace

ROOT = Path(__file__).resolve().parents[2]
SRC = Path(savegame.__file__).resolve().parents[1]

RESEARCH = Workflow("fresh_research")


@RESEARCH.step(entry=True)
def research(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], Any]:
    return {"summary": f"notes on {state['topic']}"}, END


PLANNER = Workflow("fresh_planner")


@PLANNER.step(entry=True)
def plan(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"kids": [ctx.start_child(RESEARCH, {"topic": t}) for t in ("a", "b")]}, "gather"


@PLANNER.step
def gather(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], Any]:
    return {"summaries": [r["summary"] for r in ctx.wait_children(state["kids"])]}, END


def _fresh(code: str) -> str:
    """What ``code`` prints in a new interpreter that imports savegame and nothing else."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAVEGAME_")}
    env["PYTHONPATH"] = str(SRC)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_planners_state_reads_in_a_fresh_process(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'planner.db'}"
    result = savegame.run(PLANNER, {}, store=url, wait=True)
    assert result.status.value == "completed"
    first, *_, last = savegame.client.history(result.run_id, store=url)
    code = (
        "import savegame\n"
        f"cp = savegame.client.get_checkpoint({first.checkpoint_id!r}, store={url!r})\n"
        "print(sorted(type(k).__name__ + ':' + k.workflow for k in cp.state['kids']))\n"
        f"d = savegame.client.diff({last.checkpoint_id!r}, {first.checkpoint_id!r}, store={url!r})\n"
        "print(sorted(c.path for c in d.changes))\n"
    )
    kids, paths = _fresh(code).splitlines()
    assert kids == "['ChildRun:fresh_research', 'ChildRun:fresh_research']"
    assert "summaries" in paths and "kids" in paths


def test_every_type_savegame_registers_is_there_once_its_readers_are() -> None:
    """The types savegame registers under its own name are registered by the time
    ``savegame.inspect`` (what every reader imports) is imported, in a fresh process."""
    listing = (
        "from savegame.codec import _registry\n"
        "print(sorted(n for n in _registry._by_name if n.startswith('savegame.')))\n"
    )
    readers = _fresh("import savegame.inspect\n" + listing)
    everything = _fresh(
        "import savegame.agent, savegame.runtime, savegame.maintenance, savegame.models\n" + listing
    )
    assert "savegame.ChildRun" in everything
    assert readers == everything


def test_restore_workspace_takes_a_store_url(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    wf = Workflow("fresh_files", workspace=Workspace(folder))

    @wf.step(entry=True)
    def write(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], Any]:
        (folder / "notes.txt").write_text("draft")
        return {}, END

    url = f"sqlite:///{tmp_path / 'files.db'}"
    result = savegame.run(wf, {}, store=url)
    head = savegame.client.get_checkpoint(result.checkpoint_id, store=url)
    elsewhere = tmp_path / "restored"
    restored = savegame.client.restore_workspace(head, elsewhere, store=url)
    assert restored is not None
    assert (elsewhere / "notes.txt").read_text() == "draft"
