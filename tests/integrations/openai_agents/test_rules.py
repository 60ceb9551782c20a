"""savegame's rules, kept for an Agents SDK run: bad input named by its path, a write in
doubt stops the run for a person (the SDK's error-to-message handler does not hide it),
a changed prompt on resume is non-determinism, declarations are checked, and a run
moves between stores by export/import and replays there without asking anything."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, function_tool
from agents.tool import default_tool_error_function

from savegame import END, RunStatus, StepContext, Workflow, approve, resolve, resume, run
from savegame.client import export_run, get_run, history, import_run, list_effects, model_calls
from savegame.errors import (
    ConfigurationError,
    InDoubtEffectError,
    NonDeterminismError,
    SerializationError,
    StepError,
)
from savegame.integrations.openai_agents import SavegameRunner, declare, run_agent
from savegame.model import EffectKind, EffectStatus
from tests.provider import RESPONSES, FakeProvider

from . import bank
from .bank import build, ledger_lines, model, script


def one_tool_flow(fake: FakeProvider, name: str, tool: Any, **runner: Any) -> Workflow:
    agent: Agent[Any] = Agent(name=name, model=model(fake.openai_url), tools=[tool])
    flow = Workflow(name)

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        done = await run_agent(ctx, agent, "go", **runner)
        return {"answer": done.final_output}, END

    return flow


class Handle:
    """Not pure data: a connection-like object."""


def test_a_tool_returning_what_is_not_pure_data_is_named(
    fake: FakeProvider, tmp_path: Path
) -> None:
    @function_tool
    def connect(name: str) -> Any:
        """Open a connection."""
        return {"conn": Handle()}

    flow = one_tool_flow(fake, "oai-impure", connect)
    script(fake, "responses", (None, [("connect", {"name": "db"})]), ("ok", []))
    with pytest.raises(SerializationError, match=r"result\.oai-impure\.connect\.conn") as raised:
        run(flow, {}, run_id="r1", store=f"sqlite:///{tmp_path / 'runs.db'}")
    assert "Handle" in str(raised.value)
    assert len(fake.bodies(RESPONSES)) == 1  # the model was not told a made-up result


@dataclass
class Customer:
    """The SDK's context object: the run's dependencies, not registered with the codec."""

    name: str


def test_an_unregistered_context_object_kept_in_state_is_named(
    fake: FakeProvider, tmp_path: Path
) -> None:
    agent: Agent[Customer] = Agent(
        name="oai-context",
        model=model(fake.openai_url),
        instructions=lambda ctx, agent: f"The customer is {ctx.context.name}.",
    )
    flow = Workflow("oai-context")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        who = Customer("John")
        done = await run_agent(ctx, agent, "hi", context=who)
        return {"answer": done.final_output, "customer": who}, END

    script(fake, "responses", ("Hello John.", []))
    with pytest.raises(SerializationError, match=r"state\.customer") as raised:
        run(flow, {}, run_id="r1", store=f"sqlite:///{tmp_path / 'runs.db'}")
    assert "Customer" in str(raised.value)
    # The context reached the model's instructions, as the SDK passes it.
    assert "The customer is John." in str(fake.bodies(RESPONSES)[0])


def test_a_write_that_raised_is_in_doubt_not_a_message_for_the_model(
    fake: FakeProvider, tmp_path: Path
) -> None:
    wired: list[float] = []

    @function_tool
    def wire(amount: float) -> str:
        """Wire money."""
        wired.append(amount)
        raise TimeoutError("the bank did not answer")  # sent or not: nobody knows

    flow = one_tool_flow(fake, "oai-doubt", wire, tools={"wire": {"effect": "write"}})
    script(fake, "responses", (None, [("wire", {"amount": 7})]), ("Wired.", []))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with pytest.raises(InDoubtEffectError, match="wire"):
        run(flow, {}, run_id="r1", store=url)
    assert get_run("r1", store=url).status is RunStatus.NEEDS_ATTENTION
    assert len(fake.bodies(RESPONSES)) == 1  # the SDK did not tell the model "an error"
    [write] = [e for e in list_effects("r1", store=url) if e.kind is EffectKind.WRITE]
    assert write.status is EffectStatus.PENDING

    # A person checked with the bank: it went through. The model gets their result.
    resolve("r1", write.request_id, done=True, result="wired 7 (checked by phone)", store=url)
    finished = resume("r1", store=url, workflow=flow)
    assert finished.status is RunStatus.COMPLETED and finished.state["answer"] == "Wired."
    assert wired == [7.0]
    told = fake.bodies(RESPONSES)[1]["input"][-1]
    assert told["output"] == "wired 7 (checked by phone)"


def test_a_read_that_raised_is_the_sdks_message_for_the_model(
    fake: FakeProvider, tmp_path: Path
) -> None:
    @function_tool
    def weather(city: str) -> str:
        """The weather."""
        raise ValueError("no such city")

    flow = one_tool_flow(fake, "oai-read-error", weather)
    script(fake, "responses", (None, [("weather", {"city": "X"})]), ("Unknown city.", []))
    done = run(flow, {}, run_id="r1", store=f"sqlite:///{tmp_path / 'runs.db'}")
    assert done.status is RunStatus.COMPLETED and done.state["answer"] == "Unknown city."
    # The SDK's default handler: a fixed message, the exception's text kept from the model.
    # Asked of the SDK, not written here: 0.25 dropped "Please try again." from it.
    told = fake.bodies(RESPONSES)[1]["input"][-1]
    assert told["output"] == default_tool_error_function(None, ValueError("no such city"))  # type: ignore[arg-type]
    assert "no such city" not in told["output"]


def test_a_changed_prompt_on_resume_is_non_determinism(
    fake: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("oai-redeploy", fake.openai_url, ledger)
    script(fake, "responses", (None, [("block_card", {"customer": "c1"})]), ("Blocked.", []))
    assert run(flow, {"question": "block"}, run_id="r1", store=url).status is RunStatus.INTERRUPTED

    monkeypatch.setitem(bank.INSTRUCTIONS, "text", "You are a pirate. Block every card.")
    decision = approve("r1", store=url, workflow=flow)
    assert isinstance(decision.error, NonDeterminismError), decision
    assert "r1:1:0" in str(decision.error) and "llm:gpt-4o" in str(decision.error)
    # Nothing was asked under the other prompt, nothing written on the old approval.
    assert len(fake.bodies(RESPONSES)) == 1
    assert ledger_lines(ledger) == []


def test_an_approvers_edit_is_refused_and_nothing_is_written(
    fake: FakeProvider, tmp_path: Path
) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("oai-edit", fake.openai_url, ledger)
    script(fake, "responses", (None, [("block_card", {"customer": "c1"})]), ("Blocked.", []))
    assert run(flow, {"question": "block"}, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    edit = {"call": {"tool": "block_card", "args": {"customer": "c9"}}}
    decision = approve("r1", store=url, workflow=flow, edit=edit)
    assert isinstance(decision.error, ConfigurationError), decision
    assert "edit of an Agents SDK tool call is not supported" in str(decision.error)
    [write] = [e for e in list_effects("r1", store=url) if e.kind is EffectKind.WRITE]
    assert write.status is EffectStatus.NOT_DONE
    assert ledger_lines(ledger) == []


def test_declarations_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="unknown savegame option"):
        SavegameRunner(tools={"refund": {"effct": "write"}})
    with pytest.raises(ConfigurationError, match="are for writes"):
        SavegameRunner(tools={"refund": {"approval": True}})
    with pytest.raises(ConfigurationError, match="'read' or 'write'"):
        SavegameRunner(tools={"refund": {"effect": "delete"}})
    with pytest.raises(ConfigurationError, match="needs_approval"):
        SavegameRunner(tools={"refund": {"effect": "write", "approval": lambda a: True}})


def test_a_write_declared_on_the_tool_is_gated(fake: FakeProvider, tmp_path: Path) -> None:
    refunds: list[float] = []

    @function_tool
    def refund(amount: float) -> str:
        """Refund."""
        refunds.append(amount)
        return "refunded"

    flow = one_tool_flow(fake, "oai-declared", declare(refund, effect="write", approval=True))
    script(fake, "responses", (None, [("refund", {"amount": 5})]), ("Refunded.", []))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    assert refunds == []
    decision = approve("r1", store=url, workflow=flow)
    assert decision.result is not None and decision.result.status is RunStatus.COMPLETED
    assert refunds == [5.0]


def test_a_run_exported_and_imported_replays_there_asking_nothing(
    fake: FakeProvider, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    flow, _ = build("oai-export", fake.openai_url, ledger, "chat")
    script(
        fake,
        "chat",
        (None, [("transfer", {"customer": "c1", "amount": 20})]),
        ("Sent 20.", []),
    )
    here, there = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    done = run(flow, {"question": "send 20"}, run_id="r1", store=here)
    assert done.status is RunStatus.COMPLETED

    export_run("r1", tmp_path / "r1.export", store=here)
    import_run(tmp_path / "r1.export", store=there)
    assert [e.request_id for e in list_effects("r1", store=there)] == [
        e.request_id for e in list_effects("r1", store=here)
    ]
    # A fork there replays the journal it brought: no request, no second transfer.
    first = history("r1", store=there)[-1]  # the run's first checkpoint
    forked = fork_of(first.checkpoint_id, there, flow)
    assert forked.state == done.state
    assert len(fake.bodies(bank.path_of("chat"))) == 2
    assert len(ledger_lines(ledger)) == 1


def fork_of(checkpoint_id: str, url: str, flow: Workflow) -> Any:
    from savegame.client import fork

    result = fork(checkpoint_id, store=url, workflow=flow).result
    assert result is not None and result.status is RunStatus.COMPLETED
    return result


def test_a_tools_dict_reaches_the_model_as_a_replay_hands_it_back(
    fake: FakeProvider, tmp_path: Path
) -> None:
    """The SDK sends the model its text of a tool's result; a dict's keys come back from
    the journal in the codec's order, so the first execution must send that order too,
    or the resumed step's next request is another request (NonDeterminismError)."""

    @function_tool
    def lookup(order_id: str) -> dict[str, Any]:
        """Look an order up."""
        return {"total": 120.0, "id": order_id}  # not in sorted order

    @function_tool(needs_approval=True)
    def refund(order_id: str) -> str:
        """Refund."""
        return "refunded"

    agent: Agent[Any] = Agent(name="oai-keys", model=model(fake.openai_url), tools=[lookup, refund])
    flow = Workflow("oai-keys")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"answer": (await run_agent(ctx, agent, "refund A-1")).final_output}, END

    script(
        fake,
        "responses",
        (None, [("lookup", {"order_id": "A-1"})]),
        (None, [("refund", {"order_id": "A-1"})]),
        ("Refunded.", []),
    )
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    decision = approve("r1", store=url, workflow=flow)
    assert decision.result is not None, decision.error
    assert decision.result.state["answer"] == "Refunded."
    assert len(fake.bodies(RESPONSES)) == 3


def test_the_sdks_own_errors_end_the_step_as_they_are(fake: FakeProvider, tmp_path: Path) -> None:
    """An SDK error that is no journal's verdict (``MaxTurnsExceeded``) fails the step as
    the SDK raised it; the model calls made before it stay journaled."""

    @function_tool
    def ping() -> str:
        """Ping."""
        return "pong"

    agent: Agent[Any] = Agent(name="oai-turns", model=model(fake.openai_url), tools=[ping])
    flow = Workflow("oai-turns")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"answer": (await run_agent(ctx, agent, "ping", max_turns=1)).final_output}, END

    script(fake, "responses", (None, [("ping", {})]), (None, [("ping", {})]))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with pytest.raises(StepError) as raised:
        run(flow, {}, run_id="r1", store=url)
    assert type(raised.value.__cause__).__name__ == "MaxTurnsExceeded"
    assert get_run("r1", store=url).status is RunStatus.FAILED
    kinds = [e.kind for e in list_effects("r1", store=url)]
    assert kinds == [EffectKind.LLM, EffectKind.READ]


def test_a_needs_approval_predicate_gates_only_the_calls_it_says(
    fake: FakeProvider, tmp_path: Path
) -> None:
    refunds: list[float] = []

    async def large(ctx: Any, args: dict[str, Any], call_id: str) -> bool:
        return float(args["amount"]) > 100

    @function_tool(needs_approval=large)
    def refund(amount: float) -> str:
        """Refund."""
        refunds.append(amount)
        return f"refunded {amount}"

    flow = one_tool_flow(fake, "oai-predicate", refund)
    script(
        fake,
        "responses",
        (None, [("refund", {"amount": 50}), ("refund", {"amount": 500})]),
        ("Both refunded.", []),
    )
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    assert refunds == [50.0]  # the small one ran; the large one waits for a person
    # Both are writes (a tool the SDK may gate changes something); one is gated.
    writes = [e for e in list_effects("r1", store=url) if e.kind is EffectKind.WRITE]
    assert [e.request_id for e in writes] == ["r1:1:1"]
    [gate] = [e for e in list_effects("r1", store=url) if e.kind is EffectKind.APPROVAL]
    assert gate.request_id == "r1:1:2:approval"
    decision = approve("r1", store=url, workflow=flow)
    assert decision.result is not None and decision.result.state["answer"] == "Both refunded."
    assert refunds == [50.0, 500.0]
    assert len(fake.bodies(RESPONSES)) == 2


@pytest.mark.parametrize("how", ["provider", "run_config.model"])
def test_a_model_named_by_string_or_set_on_the_run_config_is_journaled(
    fake: FakeProvider, tmp_path: Path, how: str
) -> None:
    """A model the SDK resolves through the run config's provider (here Chat Completions,
    ``use_responses=False``), or a ``Model`` given as ``RunConfig(model=...)``, is wrapped
    like an agent's own."""
    from agents import OpenAIProvider, RunConfig

    if how == "provider":
        provider = OpenAIProvider(base_url=fake.openai_url, api_key="k", use_responses=False)
        config, api, named = RunConfig(model_provider=provider), "chat", "gpt-4o-mini"
    else:
        config, api, named = RunConfig(model=model(fake.openai_url)), "responses", "gpt-4o"
    agent: Agent[Any] = Agent(name="oai-named", model="gpt-4o-mini")
    flow = Workflow("oai-named")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        done = await run_agent(ctx, agent, "hi", run_config=config)
        return {"answer": done.final_output}, END

    script(fake, api, ("Hello.", []))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert run(flow, {}, run_id="r1", store=url).state["answer"] == "Hello."
    [call] = list_effects("r1", store=url)
    assert call.kind is EffectKind.LLM and call.name == f"llm:{named}"
    assert fake.bodies(bank.path_of(api))[0]["model"] == named


def test_extra_headers_reach_the_server_but_never_the_journal(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from agents import ModelSettings

    secret = "sk-gateway-77d1"
    agent: Agent[Any] = Agent(
        name="oai-headers",
        model=model(fake.openai_url),
        model_settings=ModelSettings(extra_headers={"Authorization": secret}, temperature=0),
    )
    flow = Workflow("oai-headers")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"answer": (await run_agent(ctx, agent, "hi")).final_output}, END

    script(fake, "responses", ("hi", []))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert run(flow, {}, run_id="r1", store=url).state["answer"] == "hi"
    assert fake.asked[0].headers["Authorization"] == secret
    [call] = model_calls("r1", store=url)
    assert call.request is not None
    assert call.request.params["extra_headers"] == {"Authorization": "(not recorded)"}
    assert call.request.params["temperature"] == 0
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("runs.db*"))
    assert secret.encode() not in stored
