"""A pydantic-ai Agent made durable by SavegameDurability: its real OpenAIChatModel asks
the local provider, its model requests and tool calls are journaled calls of the step.

A run stopped mid-way (at an approval) and resumed asks the provider nothing it
recorded and runs no tool again; a fork replays every call from its origin's journal;
a write gated by approval runs only once approved, never once rejected; a write gets
the request id of its journal entry; outside ``durable(ctx)`` the agent is
pydantic-ai's own.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterable
from pathlib import Path

import pytest
from pydantic_ai import Agent, AgentStreamEvent, RunContext
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from savegame import END, RunStatus, StepContext, Workflow, approve, reject, resolve, resume, run
from savegame.client import fork, get_run, history, list_effects, model_calls, model_usage
from savegame.errors import ApprovalRejected, ConfigurationError, InDoubtEffectError
from savegame.integrations.pydantic_ai import SavegameDurability, current, run_agent
from savegame.model import EffectKind, EffectStatus
from tests.provider import CHAT, FakeProvider, chat, chat_stream

from .bank import build, ledger_lines

QUESTION = {"question": "Check c1's balance, then block their card."}


def script_block(fake: FakeProvider) -> None:
    fake.script(
        CHAT,
        chat(None, [("balance", {"customer": "c1"})]),
        chat(None, [("block_card", {"customer": "c1"})]),
        chat("Your card is blocked."),
    )


def test_a_run_resumed_after_its_approval_asks_nothing_it_recorded(
    fake: FakeProvider, tmp_path: Path
) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("pai-resume", fake.openai_url, ledger)
    script_block(fake)

    paused = run(flow, QUESTION, run_id="r1", store=url)
    assert paused.status is RunStatus.INTERRUPTED
    assert len(fake.bodies(CHAT)) == 2
    assert ledger_lines(ledger) == []  # the gated write waits for a person

    decision = approve("r1", store=url, workflow=flow, by="ada")
    assert decision.result is not None and decision.result.status is RunStatus.COMPLETED
    assert decision.result.state["answer"] == "Your card is blocked."
    # Only the turn after the approved call was sent: the two recorded ones were not.
    bodies = fake.bodies(CHAT)
    assert len(bodies) == 3
    assert [m["role"] for m in bodies[2]["messages"]] == [
        "system", "user", "assistant", "tool", "assistant", "tool",
    ]  # fmt: skip
    assert [line.get("blocked") for line in ledger_lines(ledger)] == ["c1"]

    entries = [e for e in list_effects("r1", store=url) if e.kind is not EffectKind.APPROVAL]
    assert [(e.name.split("__")[-1], e.kind, e.status) for e in entries] == [
        ("llm:gpt-4o", EffectKind.LLM, EffectStatus.DONE),
        ("<agent>.call_tool:balance", EffectKind.READ, EffectStatus.DONE),
        ("llm:gpt-4o", EffectKind.LLM, EffectStatus.DONE),
        ("<agent>.call_tool:block_card", EffectKind.WRITE, EffectStatus.DONE),
        ("llm:gpt-4o", EffectKind.LLM, EffectStatus.DONE),
    ]
    assert entries[1].name == "pai-resume__function_toolset__<agent>.call_tool:balance"
    # What each model request was asked and answered reads like any model call's.
    asked = model_calls("r1", store=url)
    assert [c.model for c in asked] == ["gpt-4o"] * 3
    assert [c.response.tool_calls[0].name if c.response.tool_calls else None for c in asked] == [
        "balance", "block_card", None,
    ]  # fmt: skip
    assert asked[2].response.content == "Your card is blocked."
    request = asked[0].request
    assert request is not None and request.missing == []
    assert [t["name"] for t in request.tools] == ["balance", "transfer", "block_card"]
    assert "Check c1's balance" in json.dumps(request.messages)
    assert len(asked[2].request.messages) == 5  # each stored once per run, by parts
    assert model_usage("r1", store=url).models["gpt-4o"].calls == 3
    # Usage counts each model request once, replayed or not: as if never stopped.
    usage = decision.result.usage
    assert (usage.llm_calls, usage.tool_calls, usage.input_tokens) == (3, 2, 36)

    # A fork from the run's first checkpoint replays every call from the journal.
    first = history("r1", store=url)[-1]  # newest first: [-1] is the first checkpoint
    forked = fork(first.checkpoint_id, store=url, workflow=flow)
    assert forked.result is not None and forked.result.status is RunStatus.COMPLETED
    assert forked.result.state["answer"] == "Your card is blocked."
    assert len(fake.bodies(CHAT)) == 3
    assert len(ledger_lines(ledger)) == 1


def test_a_rejected_write_never_runs(fake: FakeProvider, tmp_path: Path) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("pai-reject", fake.openai_url, ledger)
    script_block(fake)
    assert run(flow, QUESTION, run_id="r1", store=url).status is RunStatus.INTERRUPTED

    decision = reject("r1", reason="not without a call", store=url, workflow=flow)
    # The step sees the rejection as savegame's ApprovalRejected, not a pydantic-ai error.
    assert isinstance(decision.error, ApprovalRejected)
    assert get_run("r1", store=url).status is RunStatus.FAILED
    assert ledger_lines(ledger) == []
    assert len(fake.bodies(CHAT)) == 2


def test_a_write_gets_the_request_id_of_its_entry(fake: FakeProvider, tmp_path: Path) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("pai-request-id", fake.openai_url, ledger)
    fake.script(CHAT, chat(None, [("transfer", {"customer": "c1", "amount": 20})]), chat("Sent."))
    assert run(flow, QUESTION, run_id="r1", store=url).status is RunStatus.COMPLETED
    [write] = [e for e in list_effects("r1", store=url) if e.kind is EffectKind.WRITE]
    assert ledger_lines(ledger) == [{"request_id": write.request_id, "amount": 20.0}]


def test_outside_durable_the_agent_is_pydantic_ais_own(fake: FakeProvider, tmp_path: Path) -> None:
    _, agent = build("pai-plain", fake.openai_url, tmp_path / "ledger.jsonl")
    fake.script(CHAT, chat(None, [("balance", {"customer": "c1"})]), chat("100."))
    assert current() is None
    assert asyncio.run(agent.run("balance?")).output == "100."
    assert len(fake.bodies(CHAT)) == 2


def test_tool_declarations_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="unknown savegame option"):
        SavegameDurability(tools={"refund": {"effct": "write"}})
    with pytest.raises(ConfigurationError, match="are for writes"):
        SavegameDurability(tools={"refund": {"approval": True}})
    with pytest.raises(ConfigurationError, match="'read' or 'write'"):
        SavegameDurability(tools={"refund": {"effect": "delete"}})


def test_a_write_declared_in_the_tools_metadata_is_gated(
    fake: FakeProvider, tmp_path: Path
) -> None:
    model = OpenAIChatModel(
        "gpt-4o", provider=OpenAIProvider(base_url=fake.openai_url, api_key="k")
    )
    agent = Agent(model, name="pai-meta", capabilities=[SavegameDurability()])
    refunds: list[float] = []

    @agent.tool_plain(metadata={"savegame": {"effect": "write", "approval": True}})
    def refund(amount: float) -> str:
        """Refund."""
        refunds.append(amount)
        return "refunded"

    flow = Workflow("pai-meta")

    @flow.step(entry=True)
    async def ask(state: dict[str, object], ctx: StepContext) -> tuple[dict[str, object], str]:
        return {"answer": (await run_agent(ctx, agent, "refund 5")).output}, END

    fake.script(CHAT, chat(None, [("refund", {"amount": 5})]), chat("Refunded."))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    assert refunds == []
    decision = approve("r1", store=url, workflow=flow)
    assert decision.result is not None and decision.result.status is RunStatus.COMPLETED
    assert refunds == [5.0]
    assert len(fake.bodies(CHAT)) == 2


def test_a_write_in_doubt_waits_for_a_person_whose_result_the_model_gets(
    fake: FakeProvider, tmp_path: Path
) -> None:
    model = OpenAIChatModel(
        "gpt-4o", provider=OpenAIProvider(base_url=fake.openai_url, api_key="k")
    )
    durability = SavegameDurability(tools={"wire": {"effect": "write"}})
    agent = Agent(model, name="pai-doubt", capabilities=[durability])
    wired: list[float] = []

    @agent.tool_plain
    def wire(amount: float) -> str:
        """Wire money."""
        wired.append(amount)
        raise TimeoutError("the bank did not answer")  # sent or not: nobody knows

    flow = Workflow("pai-doubt")

    @flow.step(entry=True)
    async def ask(state: dict[str, object], ctx: StepContext) -> tuple[dict[str, object], str]:
        return {"answer": (await run_agent(ctx, agent, "wire 7")).output}, END

    fake.script(CHAT, chat(None, [("wire", {"amount": 7})]), chat("Wired."))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with pytest.raises(InDoubtEffectError, match="wire"):
        run(flow, {}, run_id="r1", store=url)
    assert get_run("r1", store=url).status is RunStatus.NEEDS_ATTENTION
    [write] = [e for e in list_effects("r1", store=url) if e.kind is EffectKind.WRITE]
    assert write.status is EffectStatus.PENDING

    # The person checked with the bank: it was sent. The model is told what they said.
    resolve("r1", write.request_id, done=True, result="wired 7 (checked by phone)", store=url)
    finished = resume("r1", store=url, workflow=flow)
    assert finished.status is RunStatus.COMPLETED
    assert wired == [7.0]
    bodies = fake.bodies(CHAT)
    assert len(bodies) == 2
    assert bodies[1]["messages"][-1]["content"] == "wired 7 (checked by phone)"


def test_a_streamed_run_journals_each_final_message_once(
    fake: FakeProvider, tmp_path: Path
) -> None:
    model = OpenAIChatModel(
        "gpt-4o", provider=OpenAIProvider(base_url=fake.openai_url, api_key="k")
    )
    seen: list[str] = []

    async def handler(ctx: RunContext[None], events: AsyncIterable[AgentStreamEvent]) -> None:
        async for event in events:
            seen.append(type(event).__name__)

    agent = Agent(
        model, name="pai-stream", capabilities=[SavegameDurability(event_stream_handler=handler)]
    )

    @agent.tool_plain
    def balance(customer: str) -> float:
        """The balance."""
        return 1.0

    flow = Workflow("pai-stream")

    @flow.step(entry=True)
    async def ask(state: dict[str, object], ctx: StepContext) -> tuple[dict[str, object], str]:
        return {"answer": (await run_agent(ctx, agent, "balance?")).output}, END

    fake.script(
        CHAT,
        chat_stream([], calls=[("balance", {"customer": "c1"})]),
        chat_stream(["The bal", "ance is 1."]),
    )
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    done = run(flow, {}, run_id="r1", store=url)
    assert done.status is RunStatus.COMPLETED and done.state["answer"] == "The balance is 1."
    # The handler saw the pieces live, inside the model calls, and the tool's events.
    assert seen.count("PartDeltaEvent") >= 2
    assert "FunctionToolCallEvent" in seen and "FunctionToolResultEvent" in seen
    # Each streamed request is journaled once, as its final message.
    asked = model_calls("r1", store=url)
    assert [(c.response.content, len(c.response.tool_calls)) for c in asked] == [
        (None, 1), ("The balance is 1.", 0),
    ]  # fmt: skip
    assert len(fake.bodies(CHAT)) == 2 and all(b["stream"] for b in fake.bodies(CHAT))
