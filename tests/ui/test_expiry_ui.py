"""An expiring approval in the UI: the inbox and the run's page show its deadline."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from starlette.testclient import TestClient

import savegame
from savegame import END, StepContext, Workflow, tool
from savegame.ui._site import when


@tool(effect="write", approval=True, expires=timedelta(hours=3), on_expiry="escalate")
def expiring_ship(parcel: str) -> str:
    return parcel


def flow() -> Workflow:
    wf = Workflow("ship")

    @wf.step(entry=True)
    def send(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"shipped": ctx.call(expiring_ship, parcel=state["parcel"])}, END

    return wf


def test_the_approval_view_shows_the_deadline_and_what_it_decides(
    client: Callable[..., TestClient], ui_url: str
) -> None:
    r = savegame.run(flow(), {"parcel": "p1"}, store=ui_url)
    [waiting] = savegame.client.pending_interrupts(r.run_id, store=ui_url)
    assert waiting.expires_at is not None
    said = f"deadline {when(waiting.expires_at)}, then escalate"
    c = client()
    assert said in c.get("/approvals").text
    assert said in c.get(f"/runs/{r.run_id}").text
