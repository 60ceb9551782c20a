"""Bad input to a durable ADK run gets savegame's errors, naming the path: a tool that
returns something that is not pure data, a tool that puts an object in ADK's session
state; a model's usage below zero is refused before it is journaled; the Gemini API key
reaches the server and never the store; a redeploy that changed the agent's instruction
stops the resume with NonDeterminismError instead of replaying an answer to another
prompt."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.tools.tool_context import ToolContext

from savegame import END, RunStatus, StepContext, Workflow, approve, run
from savegame.client import get_run, model_calls
from savegame.errors import ModelTransientError, NonDeterminismError, SerializationError
from savegame.integrations.adk import run_agent
from tests.provider import GEMINI, FakeProvider, gemini

from . import bank
from .test_durable import QUESTION, script_block


def one_turn(name: str, agent: LlmAgent) -> Workflow:
    flow = Workflow(name)

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        turn = await run_agent(ctx, agent, "go")
        return {"answer": turn.text, "session": turn.session}, END

    return flow


def test_a_tool_result_that_is_not_pure_data_is_refused_by_path(
    fake: FakeProvider, tmp_path: Path
) -> None:
    def connect(host: str) -> Any:
        """Open a connection."""
        return threading.Lock()

    agent = LlmAgent(name="leaky", model=bank.gemini(fake.root), tools=[connect])
    fake.script(GEMINI, gemini(None, [("connect", {"host": "db"})]), gemini("ok"))
    with pytest.raises(SerializationError, match=r"result\.adk:leaky\.connect"):
        run(one_turn("adk-leaky", agent), {}, run_id="r1", store=f"sqlite:///{tmp_path / 'r.db'}")
    assert len(fake.bodies(GEMINI)) == 1  # nothing asked after the refused result


class Connection:
    """Not pure data (and not registered with savegame's codec)."""


def test_an_object_in_the_session_state_is_refused_by_path(
    fake: FakeProvider, tmp_path: Path
) -> None:
    def remember(tool_context: ToolContext) -> str:
        """Keep a connection for later."""
        tool_context.state["conn"] = Connection()
        return "kept"

    agent = LlmAgent(name="stateful", model=bank.gemini(fake.root), tools=[remember])
    fake.script(GEMINI, gemini(None, [("remember", {})]), gemini("ok"))
    url = f"sqlite:///{tmp_path / 'r.db'}"
    # Caught where the tool's call is journaled, before any checkpoint.
    with pytest.raises(SerializationError, match=r"adk:stateful\.remember.*state_delta.*conn"):
        run(one_turn("adk-stateful", agent), {}, run_id="r1", store=url)


# genai-prices and ADK read the usage as they find it; the integration refuses any count
# below zero before it reaches the journal or the run's usage.
def test_usage_below_zero_never_reaches_the_journal(fake: FakeProvider, tmp_path: Path) -> None:
    agent = LlmAgent(name="negative", model=bank.gemini(fake.root))
    fake.script(GEMINI, gemini("hi", usage=(-1_000_000, 5, 0)))
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with pytest.raises(ModelTransientError, match="below zero"):
        run(one_turn("adk-negative", agent), {}, run_id="r1", store=url)
    assert model_calls("r1", store=url) == []


def test_the_api_key_reaches_the_server_but_never_the_store(
    fake: FakeProvider, tmp_path: Path
) -> None:
    agent = LlmAgent(name="keyed", model=bank.gemini(fake.root))
    fake.script(GEMINI, gemini("hi"))
    done = run(one_turn("adk-keyed", agent), {}, store=f"sqlite:///{tmp_path / 'r.db'}")
    assert done.state["answer"] == "hi"
    [asked] = fake.asked
    assert asked.headers["X-Goog-Api-Key"] == "test-key"
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("r.db*"))
    assert b"test-key" not in stored and b"Do not" not in stored


def test_a_changed_instruction_on_resume_is_non_determinism(
    fake: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = bank.build("adk-redeploy", fake.root, ledger)
    script_block(fake)
    assert run(flow, QUESTION, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    monkeypatch.setitem(bank.INSTRUCTIONS, "text", "You are a pirate. Block every card.")

    decision = approve("r1", store=url, workflow=flow)
    assert isinstance(decision.error, NonDeterminismError), decision
    assert "r1:1:0" in str(decision.error) and "llm:gemini-2.5-flash" in str(decision.error)
    assert get_run("r1", store=url).status is RunStatus.FAILED
    # Nothing was asked under the other prompt, nothing written on the old approval.
    assert len(fake.bodies(GEMINI)) == 2
    assert bank.ledger_lines(ledger) == []
