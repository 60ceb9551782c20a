"""An Agents SDK Agent run by savegame's runner: the SDK's own OpenAI models (Responses
API and Chat Completions) ask the local provider over HTTP; each model request and
each function tool call is a journaled call of the step, on an SQLite file and on
PostgreSQL.

A run stopped at the SDK's own ``needs_approval`` (a savegame approval of that call)
and resumed asks the provider nothing it recorded and runs no tool again; its usage,
the SDK's and savegame's, is an uninterrupted run's; a fork replays every call from
its origin's journal; a rejected call is the SDK's rejection, told to the model.
"""

from __future__ import annotations

import json
from pathlib import Path

from savegame import RunStatus, approve, reject, run
from savegame.client import fork, history, list_effects, model_calls, model_usage
from savegame.model import EffectKind, EffectStatus
from tests.provider import FakeProvider

from .bank import build, ledger_lines, path_of, script

QUESTION = {"question": "Check c1's balance, then block their card."}


def script_block(fake: FakeProvider, api: str) -> None:
    script(
        fake,
        api,
        (None, [("balance", {"customer": "c1"})]),
        (None, [("block_card", {"customer": "c1"})]),
        ("Your card is blocked.", []),
    )


def test_a_run_resumed_after_its_approval_asks_nothing_it_recorded(
    fake: FakeProvider, tmp_path: Path, url: str, api: str
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    flow, _ = build("oai-resume", fake.openai_url, ledger, api)
    script_block(fake, api)

    paused = run(flow, QUESTION, run_id="r1", store=url)
    assert paused.status is RunStatus.INTERRUPTED
    assert len(fake.bodies(path_of(api))) == 2
    assert ledger_lines(ledger) == []  # the gated write waits for a person
    [gate] = [e for e in list_effects("r1", store=url) if e.kind is EffectKind.APPROVAL]
    # The approval is bound to the call the person sees: the tool and its arguments.
    assert gate.name == "oai-resume.block_card" and gate.status is EffectStatus.PENDING

    decision = approve("r1", store=url, workflow=flow, by="ada")
    assert decision.result is not None and decision.result.status is RunStatus.COMPLETED
    assert decision.result.state["answer"] == "Your card is blocked."
    # Only the turn after the approved call was sent: the two recorded ones were not.
    bodies = fake.bodies(path_of(api))
    assert len(bodies) == 3
    assert "blocked" in json.dumps(bodies[2])
    assert [line.get("blocked") for line in ledger_lines(ledger)] == ["c1"]

    entries = [e for e in list_effects("r1", store=url) if e.kind is not EffectKind.APPROVAL]
    assert [(e.name, e.kind, e.status) for e in entries] == [
        ("llm:gpt-4o", EffectKind.LLM, EffectStatus.DONE),
        ("oai-resume.balance", EffectKind.READ, EffectStatus.DONE),
        ("llm:gpt-4o", EffectKind.LLM, EffectStatus.DONE),
        ("oai-resume.block_card", EffectKind.WRITE, EffectStatus.DONE),
        ("llm:gpt-4o", EffectKind.LLM, EffectStatus.DONE),
    ]
    # The write ran under the request id of its journal entry.
    assert ledger_lines(ledger)[0]["request_id"] == entries[3].request_id
    # What each model request was asked and answered reads like any model call's.
    asked = model_calls("r1", store=url)
    assert [c.response.tool_calls[0].name if c.response.tool_calls else None for c in asked] == [
        "balance", "block_card", None,
    ]  # fmt: skip
    request = asked[0].request
    assert request is not None and request.missing == []
    assert [t["name"] for t in request.tools] == ["balance", "transfer", "block_card"]
    assert "Check c1's balance" in json.dumps(request.messages)
    assert request.messages[0]["role"] == "system"
    usage = model_usage("r1", store=url)
    assert usage.models["gpt-4o"].calls == 3 and usage.total.input_tokens == 36
    # Usage counts each request once, replayed or not: as if never stopped. The SDK's
    # own usage of the resumed run too (3 requests, not the 2 + 1 of two executions).
    sdk = decision.result.state["usage"]
    assert (sdk["requests"], sdk["input_tokens"], sdk["output_tokens"]) == (3, 36, 15)
    ours = decision.result.usage
    assert (ours.llm_calls, ours.tool_calls, ours.input_tokens) == (3, 2, 36)

    # A fork from the run's first checkpoint replays every call from the journal: no
    # request reaches the server, no write the ledger.
    first = history("r1", store=url)[-1]  # newest first: the oldest is last
    forked = fork(first.checkpoint_id, store=url, workflow=flow)
    assert forked.result is not None and forked.result.status is RunStatus.COMPLETED
    assert forked.result.state["answer"] == "Your card is blocked."
    assert forked.result.state["usage"] == sdk
    # It ran the step again: every call of its journal was reused from the origin's.
    replayed = list_effects(forked.result.run_id, store=url)
    assert [e.name for e in replayed if e.kind is EffectKind.LLM] == ["llm:gpt-4o"] * 3
    assert len(fake.bodies(path_of(api))) == 3
    assert len(ledger_lines(ledger)) == 1


def test_a_rejected_call_is_the_sdks_rejection_told_to_the_model(
    fake: FakeProvider, tmp_path: Path, api: str
) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("oai-reject", fake.openai_url, ledger, api)
    script(
        fake,
        api,
        (None, [("block_card", {"customer": "c1"})]),
        ("I could not block it.", []),
    )
    assert run(flow, QUESTION, run_id="r1", store=url).status is RunStatus.INTERRUPTED

    decision = reject("r1", reason="call the customer first", store=url, workflow=flow)
    assert decision.result is not None and decision.result.status is RunStatus.COMPLETED
    assert decision.result.state["answer"] == "I could not block it."
    assert ledger_lines(ledger) == []
    told = json.dumps(fake.bodies(path_of(api))[1])
    assert "Tool execution was not approved. call the customer first" in told
    [gate] = [e for e in list_effects("r1", store=url) if e.kind is EffectKind.APPROVAL]
    assert gate.status is EffectStatus.REJECTED


def test_a_turns_tools_take_their_positions_in_the_models_order(
    fake: FakeProvider, tmp_path: Path
) -> None:
    """The SDK starts a turn's tools at once by default; the runner has them run one after
    another, in the order the model asked, so each execution numbers them the same."""
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("oai-order", fake.openai_url, ledger)
    calls = [("transfer", {"customer": "c1", "amount": n}) for n in (1, 2, 3)]
    script(fake, "responses", (None, [*calls, ("balance", {"customer": "c1"})]), ("Done.", []))
    assert run(flow, QUESTION, run_id="r1", store=url).status is RunStatus.COMPLETED
    assert [line["amount"] for line in ledger_lines(ledger)] == [1.0, 2.0, 3.0]
    assert [line["request_id"] for line in ledger_lines(ledger)] == ["r1:1:1", "r1:1:2", "r1:1:3"]
    tools = [e.name for e in list_effects("r1", store=url) if e.kind is not EffectKind.LLM]
    assert tools == ["oai-order.transfer"] * 3 + ["oai-order.balance"]


def test_outside_a_step_the_agent_is_the_sdks_own(fake: FakeProvider, tmp_path: Path) -> None:
    import asyncio

    from agents import Runner

    _, agent = build("oai-plain", fake.openai_url, tmp_path / "ledger.jsonl")
    script(fake, "responses", (None, [("balance", {"customer": "c1"})]), ("100.", []))
    result = asyncio.run(Runner.run(agent, "balance?"))
    assert result.final_output == "100."
    assert len(fake.bodies(path_of("responses"))) == 2
