"""An ADK agent made durable by SavegamePlugin: its real Gemini model (google-genai over
HTTP) asks the local provider; its model requests and tool calls are journaled calls
of the step, on an SQLite file and on PostgreSQL.

A run stopped at an approval (ADK's ``require_confirmation``) and resumed asks the
provider nothing it recorded and runs no tool again; a fork replays every call from its
origin's journal; a rejected write never runs; a write gets the request id of its
journal entry; a model answer's parallel function calls run in the model's order.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from google.adk.agents import LlmAgent, ParallelAgent
from google.adk.apps import App
from google.adk.runners import InMemoryRunner, Runner
from google.adk.tools import FunctionTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from savegame import END, RunStatus, StepContext, Workflow, approve, reject, resolve, resume, run
from savegame.client import fork, get_run, history, list_effects, model_calls, model_usage
from savegame.errors import ApprovalRejected, ConfigurationError, InDoubtEffectError
from savegame.integrations.adk import SavegamePlugin, current, run_agent
from savegame.model import EffectKind, EffectStatus
from tests.provider import GEMINI, FakeProvider, gemini

from .bank import build, ledger_lines
from .bank import gemini as gemini_model

QUESTION = {"question": "Check c1's balance, then block their card."}


def script_block(fake: FakeProvider) -> None:
    fake.script(
        GEMINI,
        gemini(None, [("balance", {"customer": "c1"})]),
        gemini(None, [("block_card", {"customer": "c1"})]),
        gemini("Your card is blocked."),
    )


def test_a_run_resumed_after_its_approval_asks_nothing_it_recorded(
    fake: FakeProvider, url: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    flow, _ = build("adk-resume", fake.root, ledger)
    script_block(fake)

    paused = run(flow, QUESTION, run_id="r1", store=url)
    assert paused.status is RunStatus.INTERRUPTED
    assert len(fake.bodies(GEMINI)) == 2
    assert ledger_lines(ledger) == []  # the confirmed write waits for a person
    [gate] = [e for e in list_effects("r1", store=url) if e.kind is EffectKind.APPROVAL]
    assert gate.name == "adk:adk_resume.block_card" and gate.status is EffectStatus.PENDING

    decision = approve("r1", store=url, workflow=flow, by="ada")
    assert decision.result is not None and decision.result.status is RunStatus.COMPLETED
    assert decision.result.state["answer"] == "Your card is blocked."
    # Only the turn after the approved call was sent: the two recorded ones were not.
    bodies = fake.bodies(GEMINI)
    assert len(bodies) == 3
    assert [c["role"] for c in bodies[2]["contents"]] == ["user", "model", "user", "model", "user"]
    assert bodies[2]["contents"][-1]["parts"] == [
        {"functionResponse": {"name": "block_card", "response": {"result": "blocked"}}}
    ]
    assert [line.get("blocked") for line in ledger_lines(ledger)] == ["c1"]

    entries = [e for e in list_effects("r1", store=url) if e.kind is not EffectKind.APPROVAL]
    assert [(e.name, e.kind, e.status) for e in entries] == [
        ("llm:gemini-2.5-flash", EffectKind.LLM, EffectStatus.DONE),
        ("adk:adk_resume.balance", EffectKind.READ, EffectStatus.DONE),
        ("llm:gemini-2.5-flash", EffectKind.LLM, EffectStatus.DONE),
        ("adk:adk_resume.block_card", EffectKind.WRITE, EffectStatus.DONE),
        ("llm:gemini-2.5-flash", EffectKind.LLM, EffectStatus.DONE),
    ]
    # What each model request was asked and answered reads like any model call's.
    asked = model_calls("r1", store=url)
    assert [c.response.tool_calls[0].name if c.response.tool_calls else None for c in asked] == [
        "balance", "block_card", None,
    ]  # fmt: skip
    request = asked[0].request
    assert request is not None and request.missing == []
    assert [t["name"] for t in request.tools] == ["balance", "transfer", "block_card"]
    assert request.messages[0]["role"] == "system"
    assert "bank's support agent" in request.messages[0]["content"]
    assert "Check c1's balance" in json.dumps(request.messages)
    usage = model_usage("r1", store=url)
    assert usage.models["gemini-2.5-flash"].calls == 3
    assert usage.models["gemini-2.5-flash"].cost_usd is not None  # priced by LiteLLM's map
    # Usage counts each model request once, replayed or not: as if never stopped.
    totals = decision.result.usage
    assert (totals.llm_calls, totals.tool_calls, totals.input_tokens) == (3, 2, 36)

    # A fork from the run's first checkpoint replays every call from the journal:
    # counted at the server and in the ledger, nothing is asked or written again.
    first = history("r1", store=url)[-1]
    forked = fork(first.checkpoint_id, store=url, workflow=flow)
    assert forked.result is not None and forked.result.status is RunStatus.COMPLETED
    assert forked.result.state["answer"] == "Your card is blocked."
    assert len(fake.bodies(GEMINI)) == 3
    assert len(ledger_lines(ledger)) == 1


def test_a_rejected_write_never_runs(fake: FakeProvider, tmp_path: Path) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("adk-reject", fake.root, ledger)
    script_block(fake)
    assert run(flow, QUESTION, run_id="r1", store=url).status is RunStatus.INTERRUPTED

    decision = reject("r1", reason="not without a call", store=url, workflow=flow)
    # The step sees the rejection as savegame's ApprovalRejected, not an ADK error.
    assert isinstance(decision.error, ApprovalRejected)
    assert get_run("r1", store=url).status is RunStatus.FAILED
    assert ledger_lines(ledger) == []
    assert len(fake.bodies(GEMINI)) == 2


def test_an_approvers_edit_is_what_the_tool_runs_with(fake: FakeProvider, tmp_path: Path) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("adk-edit", fake.root, ledger)
    script_block(fake)
    assert run(flow, QUESTION, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    decision = approve("r1", store=url, workflow=flow, edit={"customer": "c2"})
    assert decision.result is not None and decision.result.status is RunStatus.COMPLETED
    assert [line.get("blocked") for line in ledger_lines(ledger)] == ["c2"]


def test_parallel_function_calls_run_one_by_one_in_the_models_order(
    fake: FakeProvider, tmp_path: Path
) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    seen: list[str] = []

    async def slow(name: str) -> str:
        """Slow: it yields to the loop before it is done."""
        seen.append(f"{name}:start")
        for _ in range(20):
            await asyncio.sleep(0)
        seen.append(f"{name}:end")
        return name

    def fast(name: str) -> str:
        """Fast."""
        seen.append(f"{name}:fast")
        return name

    agent = LlmAgent(name="par", model=gemini_model(fake.root), tools=[slow, fast])
    runner = InMemoryRunner(app=App(name="par", root_agent=agent, plugins=[SavegamePlugin()]))
    flow = Workflow("adk-par")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"answer": (await run_agent(ctx, runner, "go")).text}, END

    calls = [("slow", {"name": "a"}), ("fast", {"name": "b"}), ("slow", {"name": "c"})]
    fake.script(GEMINI, gemini(None, calls), gemini("ok"))
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.COMPLETED
    assert seen == ["a:start", "a:end", "b:fast", "c:start", "c:end"]
    tools = [e for e in list_effects("r1", store=url) if e.kind is EffectKind.READ]
    assert [(e.request_id, e.name) for e in tools] == [
        ("r1:1:1", "adk:par.slow"), ("r1:1:2", "adk:par.fast"), ("r1:1:3", "adk:par.slow"),
    ]  # fmt: skip
    assert ledger.exists() is False


def test_a_write_gets_the_request_id_of_its_entry(fake: FakeProvider, tmp_path: Path) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("adk-request-id", fake.root, ledger)
    fake.script(
        GEMINI, gemini(None, [("transfer", {"customer": "c1", "amount": 20})]), gemini("Sent.")
    )
    assert run(flow, QUESTION, run_id="r1", store=url).status is RunStatus.COMPLETED
    [write] = [e for e in list_effects("r1", store=url) if e.kind is EffectKind.WRITE]
    assert ledger_lines(ledger) == [{"request_id": write.request_id, "amount": 20}]


def test_outside_a_step_the_runner_is_adks_own(fake: FakeProvider, tmp_path: Path) -> None:
    _, runner = build("adk-plain", fake.root, tmp_path / "ledger.jsonl")
    fake.script(GEMINI, gemini(None, [("balance", {"customer": "c1"})]), gemini("100."))
    assert current() is None

    async def turn() -> list[str]:
        session = await runner.session_service.create_session(app_name="adk-plain", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="balance?")])
        texts = []
        async for event in runner.run_async(
            user_id="u", session_id=session.id, new_message=message
        ):
            texts += [p.text for p in (event.content.parts or ()) if event.content and p.text]
        return texts

    assert asyncio.run(turn()) == ["100."]
    assert len(fake.bodies(GEMINI)) == 2


def test_a_conversation_goes_on_from_the_session_kept_in_the_state(
    fake: FakeProvider, tmp_path: Path
) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    _, runner = build("adk-chat", fake.root, ledger)
    flow = Workflow("adk-chat-two")

    @flow.step(entry=True)
    async def first(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        turn = await run_agent(ctx, runner, "Hi, I am c1.", state={"tier": "gold"})
        return {"session": turn.session, "answers": [turn.text]}, "second"

    @flow.step()
    async def second(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        turn = await run_agent(ctx, runner, "My balance?", session=state["session"])
        return {"session": turn.session, "answers": [*state["answers"], turn.text]}, END

    fake.script(
        GEMINI,
        gemini("Hello c1."),
        gemini(None, [("balance", {"customer": "c1"})]),
        gemini("100."),
    )
    done = run(flow, {}, run_id="r1", store=url)
    assert done.status is RunStatus.COMPLETED and done.state["answers"] == ["Hello c1.", "100."]
    # The second turn's model saw the first turn: rebuilt from the state, not remembered.
    assert [c["parts"][0].get("text") for c in fake.bodies(GEMINI)[1]["contents"]] == [
        "Hi, I am c1.", "Hello c1.", "My balance?",
    ]  # fmt: skip
    assert done.state["session"]["state"] == {"tier": "gold"}  # given at the first turn, kept
    events = done.state["session"]["events"]
    assert [e["invocation_id"] for e in events] == ["savegame-1.0"] * 2 + ["savegame-2.0"] * 4
    assert all("id" not in e and "timestamp" not in e for e in events)


def test_tool_declarations_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="unknown savegame option"):
        SavegamePlugin(tools={"refund": {"effct": "write"}})
    with pytest.raises(ConfigurationError, match="are for writes"):
        SavegamePlugin(tools={"refund": {"approval": True}})
    with pytest.raises(ConfigurationError, match="'read' or 'write'"):
        SavegamePlugin(tools={"refund": {"effect": "delete"}})


@pytest.mark.filterwarnings("ignore:ParallelAgent is deprecated:DeprecationWarning")
def test_a_parallel_agent_is_refused_in_a_step(fake: FakeProvider, tmp_path: Path) -> None:
    branches = [LlmAgent(name=n, model=gemini_model(fake.root)) for n in ("left", "right")]
    agent = ParallelAgent(name="both", sub_agents=branches)
    flow = Workflow("adk-parallel")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"answer": (await run_agent(ctx, agent, "go")).text}, END

    with pytest.raises(ConfigurationError, match="'both' is a ParallelAgent"):
        run(flow, {}, run_id="r1", store=f"sqlite:///{tmp_path / 'runs.db'}")
    assert fake.asked == []


def test_what_a_replayed_tool_did_to_the_session_state_is_put_back(
    fake: FakeProvider, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    ran: list[str] = []

    def note(customer: str, tool_context: ToolContext) -> str:
        """Note the customer in the session."""
        ran.append(customer)
        tool_context.state["customer"] = customer
        return "noted"

    def close(customer: str) -> str:
        """Close the account."""
        return "closed"

    tools = [note, FunctionTool(close, require_confirmation=True)]
    agent = LlmAgent(name="noting", model=gemini_model(fake.root), tools=tools)
    flow = Workflow("adk-noting")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        turn = await run_agent(ctx, agent, "close c1")
        return {"answer": turn.text, "session": turn.session}, END

    fake.script(
        GEMINI,
        gemini(None, [("note", {"customer": "c1"})]),
        gemini(None, [("close", {"customer": "c1"})]),
        gemini("Closed."),
    )
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    decision = approve("r1", store=url, workflow=flow)
    assert decision.result is not None and decision.result.status is RunStatus.COMPLETED
    assert ran == ["c1"]  # replayed on the resume, not run again
    assert decision.result.state["session"]["state"] == {"customer": "c1"}
    deltas = [e["actions"]["state_delta"] for e in decision.result.state["session"]["events"]]
    assert {"customer": "c1"} in deltas


def test_your_runners_database_session_service_holds_a_copy_of_the_checkpoint(
    fake: FakeProvider, tmp_path: Path
) -> None:
    # ADK's database sessions need SQLAlchemy and a driver, which google-adk leaves out.
    pytest.importorskip("aiosqlite")
    NullPool = pytest.importorskip("sqlalchemy.pool").NullPool
    from google.adk.sessions import DatabaseSessionService

    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    # No pool: a pooled connection would outlive the event loop of the step that opened it.
    db = f"sqlite+aiosqlite:///{tmp_path / 'adk.db'}"
    sessions = DatabaseSessionService(db, poolclass=NullPool)
    _, memory = build("adk-db", fake.root, ledger)
    runner = Runner(app=memory.app, session_service=sessions)
    flow = Workflow("adk-db-flow")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        turn = await run_agent(ctx, runner, "balance?", session=state.get("session"))
        return {"answer": turn.text, "session": turn.session}, END

    fake.script(GEMINI, gemini(None, [("balance", {"customer": "c1"})]), gemini("100."))
    done = run(flow, {}, run_id="r1", store=url)
    assert done.status is RunStatus.COMPLETED and done.state["answer"] == "100."

    async def stored() -> int:
        found = await sessions.get_session(app_name="adk-db", user_id="user", session_id="r1")
        assert found is not None
        return len(found.events)

    assert asyncio.run(stored()) == len(done.state["session"]["events"]) == 4


def test_a_streamed_turn_journals_each_answer_whole(fake: FakeProvider, tmp_path: Path) -> None:
    from google.adk.agents.run_config import RunConfig, StreamingMode

    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    _, runner = build("adk-sse", fake.root, ledger)
    flow = Workflow("adk-sse-flow")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        sse = RunConfig(streaming_mode=StreamingMode.SSE)
        turn = await run_agent(ctx, runner, "balance?", run_config=sse)
        return {"answer": turn.text}, END

    fake.script(GEMINI, gemini(None, [("balance", {"customer": "c1"})]), gemini("100."))
    done = run(flow, {}, run_id="r1", store=url)
    assert done.status is RunStatus.COMPLETED and done.state["answer"] == "100."
    # Asked as one request each (generateContent), journaled once each.
    assert [a.path for a in fake.asked] == [GEMINI, GEMINI]
    assert [c.response.content for c in model_calls("r1", store=url)] == [None, "100."]


def test_two_turns_at_once_in_one_step_are_refused(fake: FakeProvider, tmp_path: Path) -> None:
    _, runner = build("adk-twice", fake.root, tmp_path / "ledger.jsonl")
    flow = Workflow("adk-twice-flow")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        first, second = await asyncio.gather(
            run_agent(ctx, runner, "one", user_id="a"), run_agent(ctx, runner, "two", user_id="b")
        )
        return {"answers": [first.text, second.text]}, END

    fake.script(GEMINI, gemini("1"), gemini("2"))
    with pytest.raises(ConfigurationError, match="already going on in this step"):
        run(flow, {}, run_id="r1", store=f"sqlite:///{tmp_path / 'runs.db'}")


def test_a_tool_the_agent_lacks_is_answered_by_adk_and_not_journaled(
    fake: FakeProvider, tmp_path: Path
) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("adk-missing", fake.root, ledger)
    fake.script(
        GEMINI,
        gemini(None, [("teleport", {"to": "mars"}), ("balance", {"customer": "c1"})]),
        gemini("No teleport; the balance is 100."),
    )
    done = run(flow, QUESTION, run_id="r1", store=url)
    assert done.status is RunStatus.COMPLETED
    answers = fake.bodies(GEMINI)[1]["contents"][-1]["parts"]
    assert answers[0]["functionResponse"]["name"] == "teleport"
    assert "no tool with that name" in answers[0]["functionResponse"]["response"]["error"]
    assert answers[1]["functionResponse"]["response"] == {"result": 100.0}
    tools = [e.name for e in list_effects("r1", store=url) if e.kind is not EffectKind.LLM]
    assert tools == ["adk:adk_missing.balance"]


def test_the_agents_own_before_tool_callback_still_guards_a_call(
    fake: FakeProvider, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    sent: list[float] = []

    def transfer(amount: float) -> str:
        """Send money."""
        sent.append(amount)
        return "sent"

    def guard(tool: Any, args: dict[str, Any], tool_context: ToolContext) -> dict[str, Any] | None:
        return {"error": "over the limit"} if args.get("amount", 0) > 100 else None

    agent = LlmAgent(
        name="guarded", model=gemini_model(fake.root), tools=[transfer], before_tool_callback=guard
    )
    runner = InMemoryRunner(app=App(name="guarded", root_agent=agent, plugins=[SavegamePlugin(
        tools={"transfer": {"effect": "write"}}
    )]))  # fmt: skip
    flow = Workflow("adk-guarded")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"answer": (await run_agent(ctx, runner, "send 500 and 5")).text}, END

    calls = [("transfer", {"amount": 500}), ("transfer", {"amount": 5})]
    fake.script(GEMINI, gemini(None, calls), gemini("Sent 5; 500 is over the limit."))
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.COMPLETED
    assert sent == [5]
    answers = fake.bodies(GEMINI)[1]["contents"][-1]["parts"]
    assert [p["functionResponse"]["response"] for p in answers] == [
        {"error": "over the limit"}, {"result": "sent"},
    ]  # fmt: skip
    writes = [e for e in list_effects("r1", store=url) if e.kind is EffectKind.WRITE]
    assert [(e.request_id, e.arguments) for e in writes] == [("r1:1:1", {"amount": 5})]


def test_a_write_in_doubt_waits_for_a_person_whose_result_the_model_gets(
    fake: FakeProvider, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    wired: list[float] = []

    def wire(amount: float) -> str:
        """Wire money."""
        wired.append(amount)
        raise TimeoutError("the bank did not answer")  # sent or not: nobody knows

    agent = LlmAgent(name="doubt", model=gemini_model(fake.root), tools=[wire])
    plugin = SavegamePlugin(tools={"wire": {"effect": "write"}})
    runner = InMemoryRunner(app=App(name="doubt", root_agent=agent, plugins=[plugin]))
    flow = Workflow("adk-doubt")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"answer": (await run_agent(ctx, runner, "wire 7")).text}, END

    fake.script(GEMINI, gemini(None, [("wire", {"amount": 7})]), gemini("Wired."))
    with pytest.raises(InDoubtEffectError, match="wire"):
        run(flow, {}, run_id="r1", store=url)
    assert get_run("r1", store=url).status is RunStatus.NEEDS_ATTENTION
    [write] = [e for e in list_effects("r1", store=url) if e.kind is EffectKind.WRITE]
    # A person checks with the bank and settles it; the run goes on with their result.
    resolve("r1", write.request_id, done=True, result="wired 7 (checked by phone)", store=url)
    finished = resume("r1", store=url, workflow=flow)
    assert finished.status is RunStatus.COMPLETED and finished.state["answer"] == "Wired."
    assert wired == [7.0]  # never called again
    answer = fake.bodies(GEMINI)[1]["contents"][-1]["parts"][0]["functionResponse"]
    assert answer["response"] == {"result": "wired 7 (checked by phone)"}


def test_a_call_another_plugin_answered_lets_the_next_ones_run(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from google.adk.plugins import BasePlugin

    class Cached(BasePlugin):
        """Answers the balance itself, before SavegamePlugin sees the call."""

        async def before_tool_callback(self, *, tool: Any, **kwargs: Any) -> Any:
            return {"result": 42.0} if tool.name == "balance" else None

    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    _, memory = build("adk-cached", fake.root, ledger)
    plugins = [Cached(name="cached"), *memory.app.plugins]
    runner = InMemoryRunner(app=App(name="adk-cached", root_agent=memory.agent, plugins=plugins))
    flow = Workflow("adk-cached-flow")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"answer": (await run_agent(ctx, runner, "balance, then send 20")).text}, END

    calls = [("balance", {"customer": "c1"}), ("transfer", {"customer": "c1", "amount": 20})]
    fake.script(GEMINI, gemini(None, calls), gemini("42; sent 20."))
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.COMPLETED
    assert len(ledger_lines(ledger)) == 1
    tools = [e.name for e in list_effects("r1", store=url) if e.kind is not EffectKind.LLM]
    assert tools == ["adk:adk_cached.transfer"]
