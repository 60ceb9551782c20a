"""An expiring approval's deadline in `savegame approvals` and `savegame history` (real SQLite file)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import savegame
from savegame import END, StepContext, Workflow, tool


@tool(effect="write", approval=True, expires=timedelta(hours=2))
def expiring_wire(amount: int) -> int:
    return amount


def wf() -> Workflow:
    flow = Workflow("wire")

    @flow.step(entry=True)
    def send(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"sent": ctx.call(expiring_wire, amount=state["amount"])}, END

    return flow


def test_approvals_and_history_show_the_deadline(cli: Any, store: str) -> None:
    savegame.run(wf(), {"amount": 9}, run_id="w1", store=store)
    [item] = cli("approvals", "--store", store, "--json").json()
    assert item["on_expiry"] == "reject"
    due = datetime.fromisoformat(item["expires_at"])
    assert (
        timedelta(hours=1) < due - datetime.fromisoformat(item["created_at"]) <= timedelta(hours=2)
    )
    table = cli("approvals", "--store", store)
    assert "deadline (UTC)" in table.stdout and "then reject" in table.stdout
    history = cli("history", "w1", "--store", store)
    assert history.exit_code == 0, history.stderr
    assert "waiting for: approval of expiring_wire (w1:1:0:approval) until " in history.stdout


def test_run_of_an_expiring_approval_says_how_to_decide_and_its_deadline(
    cli: Any, store: str, tmp_path: Any
) -> None:
    module = tmp_path / "wired.py"
    module.write_text("from tests.cli.test_expiry_cli import wf\nflow = wf()\n")
    out = cli(
        "run", f"{module}:flow", "--input", '{"amount": 3}', "--run-id", "w2", "--store", store
    )
    assert out.exit_code == 0, out.stderr
    # A person decides it: the approve/reject commands, not only "resume --wait".
    assert f"savegame approve w2 --store {store}" in out.stdout
    assert f"savegame reject w2 --store {store}" in out.stdout
    assert "deadline:" in out.stdout and "(then reject, by a worker" in out.stdout
