"""Several ADK agents in one durable turn: a coordinator that transfers to a sub-agent
(ADK's ``transfer_to_agent``, whose effect is an EventAction the journal keeps), and an
agent called as a tool (``AgentTool``, whose agent's calls are journaled one by one).
Stopped at an approval inside the second agent and resumed, each run asks the provider
nothing it recorded; a tool that asks for a confirmation from inside its code pauses
the run at a savegame interrupt a person answers, and is called again with the answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.tools import FunctionTool
from google.adk.tools.agent_tool import AgentTool
from google.adk.tools.tool_context import ToolContext

from savegame import END, RunStatus, StepContext, Workflow, approve, run, supply
from savegame.client import list_effects
from savegame.integrations.adk import run_agent
from savegame.model import EffectKind
from tests.provider import GEMINI, FakeProvider, gemini

from .bank import gemini as gemini_model


def one_turn(name: str, agent: LlmAgent) -> Workflow:
    flow = Workflow(name)

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        turn = await run_agent(ctx, agent, "I want my money back for A-1.")
        return {"answer": turn.text, "session": turn.session}, END

    return flow


def test_a_transfer_to_a_sub_agent_replays_to_the_same_agent(
    fake: FakeProvider, tmp_path: Path
) -> None:
    refunds: list[str] = []

    def refund(order_id: str) -> str:
        """Refund an order."""
        refunds.append(order_id)
        return "refunded"

    billing = LlmAgent(
        name="billing",
        description="Refunds and payments.",
        model=gemini_model(fake.root),
        tools=[FunctionTool(refund, require_confirmation=True)],
    )
    front = LlmAgent(name="front", model=gemini_model(fake.root), sub_agents=[billing])
    fake.script(
        GEMINI,
        gemini(None, [("transfer_to_agent", {"agent_name": "billing"})]),
        gemini(None, [("refund", {"order_id": "A-1"})]),
        gemini("Refunded A-1."),
    )
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    flow = one_turn("adk-transfer", front)
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    decision = approve("r1", store=url, workflow=flow)
    assert decision.result is not None and decision.result.status is RunStatus.COMPLETED
    assert decision.result.state["answer"] == "Refunded A-1."
    assert refunds == ["A-1"]
    # The resume replayed the transfer and asked only billing's last turn.
    assert len(fake.bodies(GEMINI)) == 3
    calls = [
        (e.name, e.kind) for e in list_effects("r1", store=url) if e.kind is not EffectKind.LLM
    ]
    assert calls == [
        ("adk:front.transfer_to_agent", EffectKind.READ),
        ("adk:billing.refund", EffectKind.APPROVAL),
        ("adk:billing.refund", EffectKind.WRITE),
    ]
    authors = [e["author"] for e in decision.result.state["session"]["events"]]
    assert authors == ["user", "front", "front", "billing", "billing", "billing"]


# ADK's AgentTool builds its Runner with the argument ADK itself deprecates.
@pytest.mark.filterwarnings("ignore:The `plugins` argument is deprecated:DeprecationWarning")
def test_an_agent_tool_s_calls_are_journaled_one_by_one(fake: FakeProvider, tmp_path: Path) -> None:
    looked: list[str] = []

    def lookup_order(order_id: str) -> dict[str, Any]:
        """Look an order up."""
        looked.append(order_id)
        return {"total": 120}

    def close(order_id: str) -> str:
        """Close the order."""
        return "closed"

    helper = LlmAgent(
        name="orders", description="Knows orders.", model=gemini_model(fake.root),
        tools=[lookup_order],
    )  # fmt: skip
    main = LlmAgent(
        name="desk",
        model=gemini_model(fake.root),
        tools=[AgentTool(helper), FunctionTool(close, require_confirmation=True)],
    )
    fake.script(
        GEMINI,
        gemini(None, [("orders", {"request": "total of A-1?"})]),
        gemini(None, [("lookup_order", {"order_id": "A-1"})]),
        gemini("A-1 is 120."),
        gemini(None, [("close", {"order_id": "A-1"})]),
        gemini("Closed A-1."),
    )
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    flow = one_turn("adk-agent-tool", main)
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    assert len(fake.bodies(GEMINI)) == 4
    decision = approve("r1", store=url, workflow=flow)
    assert decision.result is not None and decision.result.status is RunStatus.COMPLETED
    assert decision.result.state["answer"] == "Closed A-1."
    assert looked == ["A-1"]  # the helper's tool replayed, not run again
    assert len(fake.bodies(GEMINI)) == 5
    reads = [e.name for e in list_effects("r1", store=url) if e.kind is EffectKind.READ]
    assert reads == ["adk:orders.lookup_order"]  # the AgentTool itself is not one call


@pytest.mark.parametrize("confirmed", [True, False])
def test_a_confirmation_asked_from_inside_a_tool_is_answered_by_a_person(
    fake: FakeProvider, tmp_path: Path, confirmed: bool
) -> None:
    wiped: list[tuple[str, Any]] = []
    asked: list[str] = []

    def wipe(account: str, tool_context: ToolContext) -> str:
        """Wipe an account."""
        confirmation = tool_context.tool_confirmation
        if confirmation is None:
            asked.append(account)
            tool_context.request_confirmation(hint="Really wipe?", payload={"keep_days": 30})
            return "asked"
        if not confirmation.confirmed:
            return "not wiped"
        wiped.append((account, confirmation.payload))
        return "wiped"

    agent = LlmAgent(name="asker", model=gemini_model(fake.root), tools=[wipe])
    flow = one_turn("adk-asker", agent)
    fake.script(GEMINI, gemini(None, [("wipe", {"account": "c1"})]), gemini("Done."))
    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    [question] = [e for e in list_effects("r1", store=url) if e.kind is EffectKind.INTERRUPT]
    assert question.name == "adk:asker.wipe:confirmation"
    assert question.arguments == {
        "tool": "wipe", "args": {"account": "c1"}, "hint": "Really wipe?",
        "payload": {"keep_days": 30},
    }  # fmt: skip
    assert wiped == [] and len(fake.bodies(GEMINI)) == 1

    answer = {"confirmed": confirmed, "payload": {"keep_days": 7}}
    decision = supply("r1", answer, store=url, workflow=flow)
    assert decision.result is not None and decision.result.status is RunStatus.COMPLETED
    assert wiped == ([("c1", {"keep_days": 7})] if confirmed else [])
    assert asked == ["c1", "c1"]  # the unconfirmed ask again on the resume, nothing more
    # The model got the confirmed call's result, in one more request.
    bodies = fake.bodies(GEMINI)
    assert len(bodies) == 2
    result = bodies[1]["contents"][-1]["parts"][0]["functionResponse"]["response"]
    assert result == {"result": "wiped" if confirmed else "not wiped"}
