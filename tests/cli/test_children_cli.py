"""history and tree of a run that started child runs, through the real entry point."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

PLANNER = textwrap.dedent(
    """
    from savegame import END, Workflow

    research = Workflow("research")


    @research.step(entry=True)
    def look(state, ctx):
        return {"summary": "notes on " + state["topic"]}, END


    planner = Workflow("planner")


    @planner.step(entry=True)
    def plan(state, ctx):
        kids = [ctx.start_child(research, {"topic": t}) for t in ("a", "b")]
        return {"summaries": [r["summary"] for r in ctx.wait_children(kids)]}, END
    """
)


def test_history_and_tree_show_parent_and_children(cli: Any, tmp_path: Path, store: str) -> None:
    flow = tmp_path / "planner_flow.py"
    flow.write_text(PLANNER)
    out = cli("run", f"{flow}:planner", "--run-id", "p1", "--store", store, "--json")
    assert out.exit_code == 0, out.stderr
    assert out.json()["status"] == "waiting"
    for child in ("p1:1:0", "p1:1:1"):
        assert cli("resume", child, "--store", store).exit_code == 0
    done = cli("resume", "p1", "--store", store, "--json")
    assert done.json()["state"]["summaries"] == ["notes on a", "notes on b"]

    history = cli("history", "p1", "--store", store)
    assert history.exit_code == 0, history.stderr
    assert "child runs" in history.stdout and "p1:1:0" in history.stdout
    child = cli("history", "p1:1:1", "--store", store)
    assert "child of run p1" in child.stdout
    drawn = cli("tree", "p1", "--store", store)
    assert "p1:1:0" in drawn.stdout and "child of run p1" in drawn.stdout
    as_json = cli("tree", "p1", "--store", store, "--json").json()
    (root,) = as_json["runs"]
    assert [c["run_id"] for c in root["spawned"]] == ["p1:1:0", "p1:1:1"]
    assert root["spawned"][0]["spawned_by"] == "p1"
