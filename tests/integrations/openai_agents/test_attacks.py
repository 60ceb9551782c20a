"""Attacks on the durable Agents SDK run (issue 32): ``savegame replay`` of a recorded
run against unchanged code; credentials handed to the SDK in every place a request
carries them; hostile model output; the SDK's own retries of a failed request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from savegame import RunStatus, approve, run
from savegame.client import replay
from tests.provider import FakeProvider

from .bank import build, ledger_lines, path_of, script

QUESTION = {"question": "Check c1's balance, then block their card."}


def test_savegame_replay_of_a_run_is_identical_and_asks_nothing(
    fake: FakeProvider, tmp_path: Path
) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("oai-replay", fake.openai_url, ledger)
    script(
        fake,
        "responses",
        (None, [("balance", {"customer": "c1"})]),
        (None, [("block_card", {"customer": "c1"})]),
        ("Your card is blocked.", []),
    )
    assert run(flow, QUESTION, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    decided = approve("r1", store=url, workflow=flow)
    assert decided.result is not None and decided.result.status is RunStatus.COMPLETED
    asked = len(fake.bodies(path_of("responses")))

    report = replay("r1", against=flow, store=url)
    assert report.identical, report.text()
    assert len(fake.bodies(path_of("responses"))) == asked  # nothing asked again
    assert len(ledger_lines(ledger)) == 1  # nothing written again


def _store_bytes(folder: Path) -> bytes:
    """Every byte the SQLite store wrote: the file and its WAL, whatever was checkpointed."""
    return b"".join(p.read_bytes() for p in sorted(folder.glob("runs.db*")))


def test_credentials_in_the_model_settings_never_reach_the_store(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from agents import Agent, ModelSettings, OpenAIResponsesModel
    from openai import AsyncOpenAI

    from savegame import END, StepContext, Workflow
    from savegame.integrations.openai_agents import run_agent

    client = AsyncOpenAI(base_url=fake.openai_url, api_key="sk-CLIENT-1111", max_retries=0)
    settings = ModelSettings(
        extra_headers={"Authorization": "Bearer sk-HEADER-2222", "X-Api-Key": "sk-HEADER-3333"},
        extra_query={"key": "sk-QUERY-4444"},
        # A gateway's key in the body, nested: hidden like a top-level one.
        extra_body={"api_key": "sk-BODY-5555", "auth": {"token": "sk-BODY-6666"}},
        metadata={"who": "ada"},
    )
    agent: Agent[Any] = Agent(
        name="oai-keys",
        model=OpenAIResponsesModel("gpt-4o", openai_client=client),
        model_settings=settings,
    )
    flow = Workflow("oai-keys")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        done = await run_agent(ctx, agent, "go")
        return {"answer": done.final_output}, END

    script(fake, "responses", ("ok", []))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.COMPLETED
    [sent] = fake.asked
    assert sent.headers.get("Authorization") == "Bearer sk-HEADER-2222"  # it did reach the server
    assert sent.body.get("api_key") == "sk-BODY-5555"
    kept = _store_bytes(tmp_path)
    for secret in (
        "CLIENT-1111",
        "HEADER-2222",
        "HEADER-3333",
        "QUERY-4444",
        "BODY-5555",
        "BODY-6666",
    ):
        assert secret.encode() not in kept, secret
    assert b"ada" in kept  # what is not a credential is kept


def _approved_run(fake: FakeProvider, tmp_path: Path, name: str) -> tuple[Any, str, Path]:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build(name, fake.openai_url, ledger)
    script(
        fake,
        "responses",
        (None, [("balance", {"customer": "c1"})]),
        (None, [("block_card", {"customer": "c1"})]),
        ("Your card is blocked.", []),
    )
    assert run(flow, QUESTION, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    decided = approve("r1", store=url, workflow=flow, by="ada")
    assert decided.result is not None and decided.result.status is RunStatus.COMPLETED
    return flow, url, ledger


def test_an_approval_is_not_used_for_another_call_at_its_position_in_a_fork(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from savegame.client import fork, history, list_effects
    from savegame.model import EffectKind, EffectStatus

    flow, url, ledger = _approved_run(fake, tmp_path, "oai-rebind")
    # The fork asks another question: the model's answers change, and the gated call at
    # the approved call's position is another card's.
    script(
        fake,
        "responses",
        (None, [("balance", {"customer": "c1"})]),
        (None, [("block_card", {"customer": "c2"})]),
    )
    first = history("r1", store=url)[-1]
    forked = fork(
        first.checkpoint_id,
        update={"question": "Block c2's card."},
        store=url,
        workflow=flow,
    )
    assert forked.result is not None and forked.result.status is RunStatus.INTERRUPTED
    assert [line.get("blocked") for line in ledger_lines(ledger)] == ["c1"]
    [gate] = [
        e
        for e in list_effects(forked.result.run_id, store=url)
        if e.kind is EffectKind.APPROVAL and e.status is EffectStatus.PENDING
    ]
    assert "c2" in str(gate.arguments)


def test_the_same_call_after_a_changed_answer_is_asked_again_in_a_fork(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from savegame.client import fork, history

    flow, url, ledger = _approved_run(fake, tmp_path, "oai-again")
    script(
        fake,
        "responses",
        (None, [("balance", {"customer": "c1"})]),
        (None, [("block_card", {"customer": "c1"})]),
    )
    first = history("r1", store=url)[-1]
    forked = fork(
        first.checkpoint_id, update={"question": "Block it now."}, store=url, workflow=flow
    )
    # The person approved c1's block in another conversation: asked again, not reused.
    assert forked.result is not None
    assert [line.get("blocked") for line in ledger_lines(ledger)] == ["c1"]
    assert forked.result.status is RunStatus.INTERRUPTED


def test_a_second_approval_of_the_same_call_writes_nothing_more(
    fake: FakeProvider, tmp_path: Path
) -> None:
    import pytest

    from savegame.errors import SavegameError

    flow, url, ledger = _approved_run(fake, tmp_path, "oai-twice")
    with pytest.raises(SavegameError):
        approve("r1", store=url, workflow=flow, by="bob")
    assert [line.get("blocked") for line in ledger_lines(ledger)] == ["c1"]


def _raw_answer(fake: FakeProvider, name: str, arguments: str, call_id: str = "call_x") -> None:
    from tests.provider import RESPONSES, responses

    reply = responses(None, [(name, {})], call_ids=[call_id])
    reply.body["output"][0]["arguments"] = arguments
    fake.script(RESPONSES, reply)


def test_arguments_that_are_not_json_ask_no_person_and_write_nothing(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from savegame.client import get_run, list_effects
    from tests.provider import RESPONSES

    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("oai-badjson", fake.openai_url, ledger)
    _raw_answer(fake, "block_card", '{"customer": "c1"')  # cut off
    script(fake, "responses", ("Sorry.", []))
    result = run(flow, QUESTION, run_id="r1", store=url)
    # Before: a person was asked to approve {"raw": ...}, and once approved the write
    # was left in doubt (the SDK refused the arguments), stopping the run for nothing.
    assert result.status is RunStatus.COMPLETED
    assert get_run("r1", store=url).status is RunStatus.COMPLETED
    assert [e.name for e in list_effects("r1", store=url)] == ["llm:gpt-4o", "llm:gpt-4o"]
    assert ledger_lines(ledger) == []
    # The model is told, as by the SDK alone.
    told = json.dumps(fake.bodies(RESPONSES)[-1]["input"][-1])
    assert "function_call_output" in told and "error occurred" in told


def test_a_tool_the_agent_lacks_fails_the_run_and_runs_nothing(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from savegame.errors import StepError

    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("oai-unknown", fake.openai_url, ledger)
    script(fake, "responses", (None, [("wire_money", {"to": "x"})]), ("ok", []))
    import pytest

    with pytest.raises(StepError, match="wire_money"):
        run(flow, QUESTION, run_id="r1", store=url)
    assert ledger_lines(ledger) == []


def test_a_rate_limited_request_retried_by_the_sdk_is_one_model_call(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from agents import Agent, OpenAIResponsesModel
    from openai import AsyncOpenAI

    from savegame import END, StepContext, Workflow
    from savegame.client import list_effects
    from savegame.integrations.openai_agents import run_agent
    from tests.provider import RESPONSES, error

    client = AsyncOpenAI(base_url=fake.openai_url, api_key="k", max_retries=2)
    agent: Agent[Any] = Agent(
        name="oai-429", model=OpenAIResponsesModel("gpt-4o", openai_client=client)
    )
    flow = Workflow("oai-429")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        done = await run_agent(ctx, agent, "go")
        return {"answer": done.final_output, "usage": done.usage}, END

    fake.script(RESPONSES, error(429, retry_after_ms="1"), error(500, retry_after_ms="1"))
    script(fake, "responses", ("ok", []))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    result = run(flow, {}, run_id="r1", store=url)
    assert result.status is RunStatus.COMPLETED
    assert len(fake.bodies(RESPONSES)) == 3  # the SDK's client retried
    assert [e.name for e in list_effects("r1", store=url)] == ["llm:gpt-4o"]
    assert (result.usage.llm_calls, result.usage.input_tokens) == (1, 12)


def test_a_resumed_run_tells_the_model_what_it_first_told_it(
    fake: FakeProvider, tmp_path: Path
) -> None:
    """Parallel calls, results with unsorted keys, floats,
    unicode and a large text: the request after the approval (tools replayed) repeats
    the request before it (tools run) exactly."""
    from agents import Agent, function_tool

    from savegame import END, StepContext, Workflow
    from savegame.integrations.openai_agents import run_agent
    from tests.provider import RESPONSES, responses

    from .bank import model

    @function_tool
    def lookup(customer: str) -> dict[str, Any]:
        """Look a customer up."""
        return {"zeta": 0.1 + 0.2, "name": "Zoë 東京 \u2028", "alpha": {"y": 1e-7, "b": 1e300},
                "notes": "x" * 200_000, "customer": customer}  # fmt: skip

    @function_tool(needs_approval=True)
    def block_card(customer: str) -> str:
        """Block the card."""
        return "blocked"

    agent: Agent[Any] = Agent(
        name="oai-told", model=model(fake.openai_url), tools=[lookup, block_card]
    )
    flow = Workflow("oai-told")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        done = await run_agent(ctx, agent, "go")
        return {"answer": done.final_output, "items": done.items}, END

    fake.script(
        RESPONSES,
        responses(None, [("lookup", {"customer": "c1"}), ("lookup", {"customer": "c2"})],
                  call_ids=["l1", "l2"]),
        responses(None, [("block_card", {"customer": "c1"})], call_ids=["b"]),
        responses("done"),
    )  # fmt: skip
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    decided = approve("r1", store=url, workflow=flow)
    assert decided.result is not None and decided.result.status is RunStatus.COMPLETED
    told = [b["input"] for b in fake.bodies(RESPONSES)]
    assert len(told) == 3
    assert told[2][: len(told[1])] == told[1]
    assert replay("r1", against=flow, store=url).identical


def test_a_call_id_reused_in_one_answer_fails_the_step_before_any_tool(
    fake: FakeProvider, tmp_path: Path
) -> None:
    import pytest

    from savegame.client import list_effects
    from savegame.errors import StepError
    from tests.provider import RESPONSES, responses

    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("oai-dup", fake.openai_url, ledger)
    fake.script(
        RESPONSES,
        responses(None, [("transfer", {"customer": "c1", "amount": 5}),
                         ("transfer", {"customer": "c1", "amount": 7})], call_ids=["d", "d"]),
    )  # fmt: skip
    # The SDK refuses it itself (in one answer, or a completed call's id in a later one).
    with pytest.raises(StepError, match="reused a tool call ID"):
        run(flow, QUESTION, run_id="r1", store=url)
    assert ledger_lines(ledger) == []
    assert [e.name for e in list_effects("r1", store=url)] == ["llm:gpt-4o"]


#: The workflow ``savegame replay --against`` loads (module:attr), set by the test below.
replayed: Any = None


def test_the_replay_command_replays_an_agents_sdk_run_identically(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from savegame.cli import app

    global replayed
    flow, url, ledger = _approved_run(fake, tmp_path, "oai-cli-replay")
    replayed, asked = flow, len(fake.asked)
    out = CliRunner().invoke(
        app,
        ["replay", "r1", "--store", url, "--against", f"{__name__}:replayed"],
        catch_exceptions=False,
    )
    assert out.exit_code == 0, out.stdout + out.stderr
    assert "identical" in out.stdout
    assert len(fake.asked) == asked and len(ledger_lines(ledger)) == 1


def test_a_rejected_call_stays_rejected_when_the_predicate_changes_its_mind(
    fake: FakeProvider, tmp_path: Path
) -> None:
    """A ``needs_approval`` predicate that answers otherwise on the resume (it reads the
    clock, a flag, a feature switch) does not turn a rejected call into one that runs."""
    from agents import Agent, function_tool

    from savegame import END, StepContext, Workflow, reject
    from savegame.integrations.openai_agents import run_agent

    from .bank import model

    gate = {"ask": True}
    ran: list[str] = []

    async def asks(ctx: Any, args: dict[str, Any], call_id: str) -> bool:
        return gate["ask"]

    @function_tool(needs_approval=asks)
    def wire(to: str) -> str:
        """Wire money."""
        ran.append(to)
        return "sent"

    agent: Agent[Any] = Agent(name="oai-mind", model=model(fake.openai_url), tools=[wire])
    flow = Workflow("oai-mind")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        done = await run_agent(ctx, agent, "go")
        return {"answer": done.final_output}, END

    script(fake, "responses", (None, [("wire", {"to": "mallory"})]), ("ok", []))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    gate["ask"] = False
    decided = reject("r1", reason="no", store=url, workflow=flow)
    assert ran == []
    assert decided.result is not None and decided.result.status is RunStatus.COMPLETED
    assert "not approved" in json.dumps(fake.bodies(path_of("responses"))[-1]["input"][-1])


def test_an_enormous_answer_is_kept_and_replayed_whole(fake: FakeProvider, tmp_path: Path) -> None:
    from savegame.client import fork, history
    from tests.provider import RESPONSES, responses

    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("oai-huge", fake.openai_url, ledger)
    huge = "é" * 1_000_000 + "\u2028 end"
    fake.script(
        RESPONSES,
        responses(None, [("balance", {"customer": "c1"})], call_ids=["a"]),
        responses(None, [("block_card", {"customer": "c1"})], call_ids=["b"]),
        responses(huge),
    )
    assert run(flow, QUESTION, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    decided = approve("r1", store=url, workflow=flow)
    assert decided.result is not None and decided.result.status is RunStatus.COMPLETED
    assert decided.result.state["answer"] == huge
    asked = len(fake.asked)
    forked = fork(history("r1", store=url)[-1].checkpoint_id, store=url, workflow=flow)
    assert forked.result is not None and forked.result.state == decided.result.state
    assert len(fake.asked) == asked
    assert [line.get("blocked") for line in ledger_lines(ledger)] == ["c1"]


def test_a_write_beside_a_gated_call_in_one_answer_runs_once(
    fake: FakeProvider, tmp_path: Path
) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("oai-beside", fake.openai_url, ledger)
    script(
        fake,
        "responses",
        (None, [("block_card", {"customer": "c1"}), ("transfer", {"customer": "c1", "amount": 5})]),
        ("Done.", []),
    )
    question = {"question": "Block c1's card and send 5."}
    assert run(flow, question, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    decided = approve("r1", store=url, workflow=flow)
    assert decided.result is not None and decided.result.status is RunStatus.COMPLETED
    lines = ledger_lines(ledger)
    assert [line.get("blocked") for line in lines if "blocked" in line] == ["c1"]
    assert [line.get("amount") for line in lines if "amount" in line] == [5]
    assert len({line["request_id"] for line in lines}) == 2


def test_a_providers_key_for_a_model_by_name_never_reaches_the_store(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from agents import Agent, OpenAIProvider, RunConfig

    from savegame import END, StepContext, Workflow
    from savegame.integrations.openai_agents import run_agent

    agent: Agent[Any] = Agent(name="oai-named", model="gpt-4o")
    config = RunConfig(
        model_provider=OpenAIProvider(api_key="sk-PROVIDER-7777", base_url=fake.openai_url)
    )
    flow = Workflow("oai-named")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        done = await run_agent(ctx, agent, "go", run_config=config)
        return {"answer": done.final_output}, END

    script(fake, "responses", ("ok", []))
    assert run(flow, {}, run_id="r1", store=f"sqlite:///{tmp_path / 'runs.db'}").state == {
        "answer": "ok"
    }
    assert fake.asked[0].headers["Authorization"] == "Bearer sk-PROVIDER-7777"
    assert b"PROVIDER-7777" not in _store_bytes(tmp_path)


def test_savegame_replay_of_a_run_waiting_for_its_approval_asks_nothing(
    fake: FakeProvider, tmp_path: Path
) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("oai-replay-wait", fake.openai_url, ledger)
    script(
        fake,
        "responses",
        (None, [("balance", {"customer": "c1"})]),
        (None, [("block_card", {"customer": "c1"})]),
    )
    assert run(flow, QUESTION, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    asked = len(fake.asked)
    report = replay("r1", against=flow, store=url)
    assert report.identical, report.text()
    assert len(fake.asked) == asked and ledger_lines(ledger) == []


def test_a_done_call_is_not_asked_about_when_the_predicate_changes_its_mind(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from agents import Agent, function_tool

    from savegame import END, StepContext, Workflow
    from savegame.integrations.openai_agents import run_agent

    from .bank import model

    gate = {"ask": False}
    ran: list[str] = []

    async def asks(ctx: Any, args: dict[str, Any], call_id: str) -> bool:
        return gate["ask"]

    @function_tool(needs_approval=asks)
    def wire(to: str) -> str:
        """Wire money."""
        ran.append(to)
        return "sent"

    @function_tool(needs_approval=True)
    def block_card(customer: str) -> str:
        """Block the card."""
        ran.append(customer)
        return "blocked"

    agent: Agent[Any] = Agent(
        name="oai-mind2", model=model(fake.openai_url), tools=[wire, block_card]
    )
    flow = Workflow("oai-mind2")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        done = await run_agent(ctx, agent, "go")
        return {"answer": done.final_output}, END

    script(
        fake,
        "responses",
        (None, [("wire", {"to": "bob"})]),
        (None, [("block_card", {"customer": "c1"})]),
        ("ok", []),
    )
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    assert ran == ["bob"]
    gate["ask"] = True  # the done call would now be gated
    # Before: the resume put the done wire to a person (a rejection would have told the
    # model a wire that happened did not).
    decided = approve("r1", store=url, workflow=flow)
    assert ran == ["bob", "c1"]
    assert decided.result is not None and decided.result.status is RunStatus.COMPLETED


def test_a_handoff_cycle_with_an_agent_tool_replays_identically(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from agents import Agent, function_tool, handoff

    from savegame import END, StepContext, Workflow
    from savegame.integrations.openai_agents import run_agent
    from tests.provider import RESPONSES, responses

    from .bank import model

    refunds: list[str] = []

    @function_tool
    def lookup(order_id: str) -> dict[str, Any]:
        """Look an order up."""
        return {"total": 30.0, "id": order_id}

    @function_tool(needs_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order."""
        refunds.append(order_id)
        return "refunded"

    m = model(fake.openai_url)
    researcher = Agent(name="researcher", model=m, tools=[lookup])
    billing = Agent(
        name="billing", model=m, tools=[refund, researcher.as_tool("research", "Look.")]
    )
    triage: Agent[Any] = Agent(name="triage", model=m, handoffs=[handoff(billing)])
    billing.handoffs = [triage]
    flow = Workflow("oai-cycle")

    @flow.step(entry=True)
    async def answer(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        done = await run_agent(ctx, triage, "Refund A-1.")
        return {"answer": done.final_output, "agent": done.last_agent}, END

    def turn(n: int, text: str | None, calls: list[tuple[str, dict[str, Any]]]) -> Any:
        return responses(text, calls, call_ids=[f"c{n}_{i}" for i in range(len(calls))])

    fake.script(
        RESPONSES,
        turn(0, None, [("transfer_to_billing", {})]),
        turn(1, None, [("transfer_to_triage", {})]),  # and back: the cycle
        turn(2, None, [("transfer_to_billing", {})]),
        turn(3, None, [("research", {"input": "A-1"})]),
        turn(4, None, [("lookup", {"order_id": "A-1"})]),
        turn(5, "30.0", []),
        turn(6, None, [("refund", {"order_id": "A-1"})]),
        turn(7, "Refunded.", []),
    )
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    decided = approve("r1", store=url, workflow=flow)
    assert decided.result is not None
    assert decided.result.state == {"answer": "Refunded.", "agent": "billing"}
    asked = len(fake.asked)
    assert asked == 8
    report = replay("r1", against=flow, store=url)
    assert report.identical, report.text()
    assert len(fake.asked) == asked and refunds == ["A-1"]


WORDS = {"kiwi", "apple", "fig", "plum", "date", "lime", "pear", "yuzu"}


def test_a_set_a_tool_returns_is_told_in_one_order_whatever_the_process(
    fake: FakeProvider, tmp_path: Path
) -> None:
    """A set's iteration order follows string hashes, which differ per process: handed to
    the SDK as is, a run resumed by another process (``savegame approve`` in a shell)
    would tell the model other text, and the next recorded model call would not match."""
    from agents import Agent, function_tool

    from savegame import END, StepContext, Workflow
    from savegame.integrations.openai_agents import run_agent
    from tests.provider import RESPONSES

    from .bank import model

    @function_tool
    def tags() -> Any:
        """The tags."""
        return {"tags": set(WORDS)}

    agent: Agent[Any] = Agent(name="oai-set", model=model(fake.openai_url), tools=[tags])
    flow = Workflow("oai-set")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        done = await run_agent(ctx, agent, "go")
        return {"answer": done.final_output}, END

    script(fake, "responses", (None, [("tags", {})]), ("ok", []))
    assert run(flow, {}, run_id="r1", store=f"sqlite:///{tmp_path / 'r.db'}").state == {
        "answer": "ok"
    }
    told = fake.bodies(RESPONSES)[1]["input"][-1]["output"]
    assert told == str({"tags": sorted(WORDS)})


@pytest.mark.slow
def test_a_run_with_a_set_result_is_approved_by_another_process(
    fake: FakeProvider, tmp_path: Path
) -> None:
    """Started with one string hash seed, approved with another: before, the resume told
    the model the set in another order and stopped with NonDeterminismError."""
    import os
    import subprocess
    import sys

    script(
        fake,
        "responses",
        (None, [("tags", {})]),
        (None, [("block_card", {"customer": "c1"})]),
        ("ok", []),
    )
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    child = str(Path(__file__).with_name("set_child.py"))
    outs = []
    for mode, seed in (("start", "1"), ("approve", "2")):
        env = {**os.environ, "SAVEGAME_MODEL_URL": fake.openai_url, "PYTHONHASHSEED": seed}
        env["SAVEGAME_LEDGER"] = str(tmp_path / "ledger.jsonl")  # bank.py, imported for model()
        done = subprocess.run(
            [sys.executable, child, mode, url],
            capture_output=True, text=True, env=env, timeout=120, check=False,
        )  # fmt: skip
        outs.append(done.stdout.strip() or done.stderr[-2000:])
    assert outs == ["DONE interrupted", "DONE completed"]
    assert len(fake.bodies(path_of("responses"))) == 3
