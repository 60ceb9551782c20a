"""Handoffs and agents called as tools, run by savegame's runner: the model requests and
tools of every agent of the graph are journaled calls of the step, so a resume after a
pause deep in the graph asks the provider nothing it recorded."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, function_tool, handoff

from savegame import END, RunStatus, StepContext, Workflow, approve, reject, run
from savegame.client import fork, history, list_effects
from savegame.errors import ConfigurationError
from savegame.integrations.openai_agents import run_agent
from savegame.model import EffectKind
from tests.provider import RESPONSES, FakeProvider, responses

from .bank import model


def turn(n: int, text: str | None, calls: Sequence[tuple[str, dict[str, Any]]] = ()) -> Any:
    return responses(text, calls, call_ids=[f"call_{n}_{i}" for i in range(len(calls))])


def test_a_handoff_and_an_agent_tool_are_journaled_and_resumed(
    fake: FakeProvider, tmp_path: Path
) -> None:
    refunds: list[tuple[str, float]] = []
    looked: list[str] = []

    @function_tool
    def lookup(order_id: str) -> dict[str, Any]:
        """Look an order up."""
        looked.append(order_id)
        return {"id": order_id, "total": 30.0}

    @function_tool(needs_approval=True)
    def refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        refunds.append((order_id, amount))
        return f"refunded {amount}"

    m = model(fake.openai_url)
    # An agent called as a tool, with a tool of its own.
    researcher = Agent(name="researcher", model=m, tools=[lookup])
    billing = Agent(
        name="billing",
        model=m,
        tools=[refund, researcher.as_tool("research", "Look into an order.")],
    )
    triage: Agent[Any] = Agent(name="triage", model=m, handoffs=[handoff(billing)])
    billing.handoffs = [triage]  # a cycle: billing can hand back

    flow = Workflow("oai-graph")

    @flow.step(entry=True)
    async def answer(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        done = await run_agent(ctx, triage, "Refund order A-1.")
        return {"answer": done.final_output, "agent": done.last_agent}, END

    fake.script(
        RESPONSES,
        turn(0, None, [("transfer_to_billing", {})]),
        turn(1, None, [("research", {"input": "order A-1"})]),
        turn(2, None, [("lookup", {"order_id": "A-1"})]),  # the researcher's turns
        turn(3, "A-1 was 30.0."),
        turn(4, None, [("refund", {"order_id": "A-1", "amount": 30.0})]),
        turn(5, "Refunded 30.0."),
    )
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    assert len(fake.bodies(RESPONSES)) == 5 and looked == ["A-1"] and refunds == []

    decision = approve("r1", store=url, workflow=flow)
    assert decision.result is not None and decision.result.status is RunStatus.COMPLETED
    assert decision.result.state == {"answer": "Refunded 30.0.", "agent": "billing"}
    # Only the turn after the refund was asked again; the researcher's tool ran once.
    assert len(fake.bodies(RESPONSES)) == 6 and looked == ["A-1"]
    assert refunds == [("A-1", 30.0)]
    entries = [e for e in list_effects("r1", store=url) if e.kind is not EffectKind.APPROVAL]
    assert [e.name for e in entries] == [
        "llm:gpt-4o", "llm:gpt-4o", "llm:gpt-4o", "researcher.lookup", "llm:gpt-4o",
        "llm:gpt-4o", "billing.refund", "llm:gpt-4o",
    ]  # fmt: skip
    # The agent tool itself is no call of its own: its model requests and tools are.
    assert "research" not in {e.name.split(".")[-1] for e in entries}
    # The user's agents are left as they were.
    assert triage.handoffs[0].agent_name == "billing" and billing.tools[0] is refund


def test_two_agents_in_a_steps_branches_keep_their_own_positions(
    fake: FakeProvider, tmp_path: Path
) -> None:
    """``ctx.gather`` runs two agents at once, each in a branch of its own: each branch's
    calls are numbered within it, whichever finishes first, and a fork replays both."""
    m = model(fake.openai_url)
    first = Agent(name="first", model=m, instructions="Answer first.")
    second = Agent(name="second", model=m, instructions="Answer second.")
    flow = Workflow("oai-branches")

    @flow.step(entry=True)
    async def both(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        answers = await ctx.gather(
            lambda c: run_agent(c, first, "one?"), lambda c: run_agent(c, second, "two?")
        )
        return {"answers": sorted(a.last_agent for a in answers)}, END

    fake.script(RESPONSES, turn(0, "A."), turn(1, "B."))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    done = run(flow, {}, run_id="r1", store=url)
    assert done.status is RunStatus.COMPLETED and done.state["answers"] == ["first", "second"]
    entries = list_effects("r1", store=url)
    # Each branch's model call at a position of its own branch (``...:b0:0``, ``...:b1:0``).
    assert sorted(e.request_id.split(":", 2)[2] for e in entries) == ["0:b0:0", "0:b1:0"]
    assert len(fake.bodies(RESPONSES)) == 2
    forked = fork(history("r1", store=url)[-1].checkpoint_id, store=url, workflow=flow)
    assert forked.result is not None and forked.result.state == done.state
    assert len(fake.bodies(RESPONSES)) == 2  # both branches replayed from the journal


def test_two_agents_at_once_on_one_journal_are_refused(fake: FakeProvider, tmp_path: Path) -> None:
    m = model(fake.openai_url)
    first, second = Agent(name="first", model=m), Agent(name="second", model=m)
    flow = Workflow("oai-bare-gather")

    @flow.step(entry=True)
    async def both(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        await asyncio.gather(run_agent(ctx, first, "one?"), run_agent(ctx, second, "two?"))
        return {}, END

    fake.script(RESPONSES, turn(0, "A."), turn(1, "B."))
    with pytest.raises(ConfigurationError, match=r"ctx\.gather"):
        run(flow, {}, run_id="r1", store=f"sqlite:///{tmp_path / 'runs.db'}")


def test_a_gated_tool_inside_an_agent_tool_pauses_the_run(
    fake: FakeProvider, tmp_path: Path
) -> None:
    refunds: list[str] = []

    @function_tool(needs_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order."""
        refunds.append(order_id)
        return "refunded"

    m = model(fake.openai_url)
    clerk = Agent(name="clerk", model=m, tools=[refund])
    boss: Agent[Any] = Agent(name="boss", model=m, tools=[clerk.as_tool("clerk", "Ask the clerk.")])
    flow = Workflow("oai-nested-gate")

    @flow.step(entry=True)
    async def answer(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"answer": (await run_agent(ctx, boss, "Refund A-1.")).final_output}, END

    fake.script(
        RESPONSES,
        turn(0, None, [("clerk", {"input": "refund A-1"})]),
        turn(1, None, [("refund", {"order_id": "A-1"})]),  # the clerk's turns
        turn(2, "Done."),
        turn(3, "The clerk refunded A-1."),
    )
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    assert refunds == [] and len(fake.bodies(RESPONSES)) == 2
    decision = approve("r1", store=url, workflow=flow)
    assert decision.result is not None, decision.error
    assert decision.result.state["answer"] == "The clerk refunded A-1."
    assert refunds == ["A-1"] and len(fake.bodies(RESPONSES)) == 4


@pytest.mark.parametrize("decide", ["approve", "reject"])
def test_an_agent_tools_needs_approval_is_a_savegame_approval(
    fake: FakeProvider, tmp_path: Path, decide: str
) -> None:
    """``as_tool(needs_approval=True)``: the nested agent runs only once a person approved
    the call; a rejection is the SDK's, told to the model, and the clerk never runs."""
    m = model(fake.openai_url)
    clerk = Agent(name="clerk", model=m)
    boss: Agent[Any] = Agent(
        name="boss", model=m, tools=[clerk.as_tool("clerk", "Ask the clerk.", needs_approval=True)]
    )
    flow = Workflow(f"oai-gated-agent-{decide}")

    @flow.step(entry=True)
    async def answer(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"answer": (await run_agent(ctx, boss, "Ask the clerk.")).final_output}, END

    fake.script(RESPONSES, turn(0, None, [("clerk", {"input": "hello"})]))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    [gate] = [e for e in list_effects("r1", store=url) if e.kind is EffectKind.APPROVAL]
    assert gate.name == "boss.clerk" and len(fake.bodies(RESPONSES)) == 1

    if decide == "approve":
        fake.script(RESPONSES, turn(1, "Hi from the clerk."), turn(2, "The clerk says hi."))
        decision = approve("r1", store=url, workflow=flow)
        assert decision.result is not None, decision.error
        assert decision.result.state["answer"] == "The clerk says hi."
        assert len(fake.bodies(RESPONSES)) == 3
    else:
        fake.script(RESPONSES, turn(1, "The clerk is busy."))
        decision = reject("r1", reason="not now", store=url, workflow=flow)
        assert decision.result is not None, decision.error
        assert decision.result.state["answer"] == "The clerk is busy."
        told = fake.bodies(RESPONSES)[1]["input"][-1]
        assert told["output"] == "Tool execution was not approved. not now"
        assert len(fake.bodies(RESPONSES)) == 2  # the clerk was never asked
