"""Attacks on the durable ADK run (issue 32): a resumed run tells the model byte for byte
what it first told it (a tool's result in its own key order); ``savegame replay`` of a
run asks nothing; an approval is not reused for another call at its position in a fork;
a server error is no call of the run; session state with a set, bytes, a datetime."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.tools import FunctionTool

from savegame import END, RunStatus, StepContext, Workflow, approve, run
from savegame.codec import encode_value
from savegame.integrations.adk import run_agent
from tests.provider import GEMINI, FakeProvider, gemini

from . import bank


def _gated_after_lookup(name: str, fake: FakeProvider) -> Workflow:
    def lookup(customer: str) -> dict[str, Any]:
        """Look a customer up."""
        # Keys not sorted, a float, unicode: the tool's own form, not the codec's.
        return {"zeta": 1.5, "name": "Zoë 東京", "alpha": {"y": 1, "b": [3, 2]}}

    def block_card(customer: str) -> str:
        """Block the customer's card."""
        return "blocked"

    agent = LlmAgent(
        name=name.replace("-", "_"),
        model=bank.gemini(fake.root),
        tools=[lookup, FunctionTool(block_card, require_confirmation=True)],
    )
    flow = Workflow(name)

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        turn = await run_agent(ctx, agent, "go")
        return {"answer": turn.text, "session": turn.session}, END

    return flow


def _script(fake: FakeProvider) -> None:
    fake.script(
        GEMINI,
        gemini(None, [("lookup", {"customer": "c1"})]),
        gemini(None, [("block_card", {"customer": "c1"})]),
        gemini("done"),
    )


def test_a_tool_result_in_its_own_key_order_resumes_to_the_same_end(
    fake: FakeProvider, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    flow = _gated_after_lookup("adk-order", fake)
    _script(fake)
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    decided = approve("r1", store=url, workflow=flow)
    assert decided.result is not None and decided.result.status is RunStatus.COMPLETED
    assert len(fake.bodies(GEMINI)) == 3
    # The approval's resume replayed lookup. Byte for byte (key order included), the
    # model must be told what it was told after lookup the first time. Before: the first
    # execution sent the tool's own key order, the replay the codec's.
    told = [json.dumps(b["contents"], ensure_ascii=False) for b in fake.bodies(GEMINI)]
    assert told[2].startswith(told[1][:-1])


def test_savegame_replay_of_a_run_is_identical_and_asks_nothing(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from savegame.client import replay

    from .test_durable import QUESTION, script_block

    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = bank.build("adk-replay", fake.root, ledger)
    script_block(fake)
    assert run(flow, QUESTION, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    decided = approve("r1", store=url, workflow=flow)
    assert decided.result is not None and decided.result.status is RunStatus.COMPLETED
    asked = len(fake.bodies(GEMINI))

    report = replay("r1", against=flow, store=url)
    assert report.identical, report.text()
    assert len(fake.bodies(GEMINI)) == asked
    assert len(bank.ledger_lines(ledger)) == 1


def test_an_approval_is_not_used_for_another_call_at_its_position_in_a_fork(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from savegame.client import fork, history

    from .test_durable import QUESTION, script_block

    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = bank.build("adk-rebind", fake.root, ledger)
    script_block(fake)
    assert run(flow, QUESTION, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    decided = approve("r1", store=url, workflow=flow)
    assert decided.result is not None and decided.result.status is RunStatus.COMPLETED
    for customer in ("c2", "c1"):  # another card, then the same card after another answer
        fake.script(
            GEMINI,
            gemini(None, [("balance", {"customer": "c1"})]),
            gemini(None, [("block_card", {"customer": customer})]),
        )
        first = history("r1", store=url)[-1]
        forked = fork(
            first.checkpoint_id,
            update={"question": f"Block {customer}'s card."},
            store=url,
            workflow=flow,
        )
        assert forked.result is not None and forked.result.status is RunStatus.INTERRUPTED
        assert [line.get("blocked") for line in bank.ledger_lines(ledger)] == ["c1"]


def test_a_server_error_fails_the_step_and_the_resume_asks_once_more(
    fake: FakeProvider, tmp_path: Path
) -> None:
    import pytest

    from savegame import resume
    from savegame.client import list_effects, model_usage
    from savegame.errors import StepError
    from tests.provider import error

    agent = LlmAgent(name="flaky", model=bank.gemini(fake.root))
    flow = Workflow("adk-flaky")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        turn = await run_agent(ctx, agent, "go")
        return {"answer": turn.text}, END

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    fake.script(GEMINI, error(500), error(500), error(500), error(500), error(500))
    with pytest.raises(StepError):
        run(flow, {}, run_id="r1", store=url)
    failed = len(fake.bodies(GEMINI))
    fake.reset()
    fake.script(GEMINI, gemini("ok"))
    done = resume("r1", store=url, workflow=flow)
    assert done.status is RunStatus.COMPLETED and done.state["answer"] == "ok"
    assert len(fake.bodies(GEMINI)) == 1
    assert failed >= 1
    # The failed request is no call of the run: one model call, counted once.
    assert [e.status.value for e in list_effects("r1", store=url)] == ["done"]
    assert model_usage("r1", store=url).models["gemini-2.5-flash"].calls == 1
    assert done.usage.llm_calls == 1


def test_session_state_a_tool_sets_to_a_set_bytes_and_datetime(
    fake: FakeProvider, tmp_path: Path
) -> None:
    import datetime as dt

    from google.adk.tools.tool_context import ToolContext

    from savegame.errors import SerializationError

    def remember(tool_context: ToolContext) -> str:
        """Remember things."""
        tool_context.state["tags"] = {"b", "a"}
        tool_context.state["blob"] = b"\x00\xff"
        tool_context.state["at"] = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
        return "ok"

    agent = LlmAgent(name="keeper", model=bank.gemini(fake.root), tools=[remember])
    fake.script(GEMINI, gemini(None, [("remember", {})]), gemini("done"))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    flow = Workflow("adk-keeper")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        turn = await run_agent(ctx, agent, "go")
        return {"answer": turn.text, "session": turn.session}, END

    try:
        done = run(flow, {}, run_id="r1", store=url)
    except SerializationError as refused:  # refused by path is an answer too
        assert "state" in str(refused)
        return
    assert done.status is RunStatus.COMPLETED
    kept = done.state["session"]["state"]
    assert (kept["tags"], kept["blob"]) == ({"a", "b"}, b"\x00\xff"), kept
    assert kept["at"] == dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC), kept
    # Kept, and a fork that replays the tool puts the same values back.
    from savegame.client import fork, history

    first = history("r1", store=url)[-1]
    forked = fork(first.checkpoint_id, store=url, workflow=flow)
    assert forked.result is not None and forked.result.status is RunStatus.COMPLETED
    assert encode_value(forked.result.state["session"]["state"], "s") == encode_value(
        done.state["session"]["state"], "s"
    )


#: The workflow ``savegame replay --against`` loads (module:attr), set by the test below.
replayed: Any = None


def test_the_replay_command_replays_an_adk_run_identically(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from savegame.cli import app

    from .test_durable import QUESTION, script_block

    global replayed
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    replayed, _ = bank.build("adk-cli-replay", fake.root, ledger)
    script_block(fake)
    assert run(replayed, QUESTION, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    decided = approve("r1", store=url, workflow=replayed)
    assert decided.result is not None and decided.result.status is RunStatus.COMPLETED
    asked = len(fake.asked)
    out = CliRunner().invoke(
        app,
        ["replay", "r1", "--store", url, "--against", f"{__name__}:replayed"],
        catch_exceptions=False,
    )
    assert out.exit_code == 0, out.stdout + out.stderr
    assert "identical" in out.stdout
    assert len(fake.asked) == asked and len(bank.ledger_lines(ledger)) == 1


def test_a_write_beside_a_gated_call_in_one_answer_runs_once(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from savegame.client import list_effects

    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = bank.build("adk-beside", fake.root, ledger)
    fake.script(
        GEMINI,
        gemini(None, [("block_card", {"customer": "c1"}), ("transfer", {"customer": "c1", "amount": 5})]),
        gemini("Done."),
    )  # fmt: skip
    question = {"question": "Block c1's card and send 5."}
    assert run(flow, question, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    before = bank.ledger_lines(ledger)
    decided = approve("r1", store=url, workflow=flow)
    assert decided.result is not None and decided.result.status is RunStatus.COMPLETED, decided
    lines = bank.ledger_lines(ledger)
    effects = [(e.name, e.kind.value, e.status.value) for e in list_effects("r1", store=url)]
    assert [line.get("blocked") for line in lines if "blocked" in line] == ["c1"], (before, lines)
    assert [line.get("amount") for line in lines if "amount" in line] == [5], (before, effects)
    assert len({line["request_id"] for line in lines}) == 2


def test_a_second_approval_of_the_same_call_writes_nothing_more(
    fake: FakeProvider, tmp_path: Path
) -> None:
    import pytest

    from savegame.errors import SavegameError

    from .test_durable import QUESTION, script_block

    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = bank.build("adk-twice", fake.root, ledger)
    script_block(fake)
    assert run(flow, QUESTION, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    decided = approve("r1", store=url, workflow=flow)
    assert decided.result is not None and decided.result.status is RunStatus.COMPLETED
    with pytest.raises(SavegameError):
        approve("r1", store=url, workflow=flow, edit={"customer": "c2"})
    assert [line.get("blocked") for line in bank.ledger_lines(ledger)] == ["c1"]


def test_savegame_replay_of_a_run_waiting_for_its_approval_asks_nothing(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from savegame.client import replay

    from .test_durable import QUESTION, script_block

    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = bank.build("adk-replay-wait", fake.root, ledger)
    script_block(fake)
    assert run(flow, QUESTION, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    asked = len(fake.asked)
    report = replay("r1", against=flow, store=url)
    assert report.identical, report.text()
    assert len(fake.asked) == asked and bank.ledger_lines(ledger) == []


def test_a_rejected_call_stays_rejected_when_the_confirmation_predicate_changes(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from savegame import reject

    gate = {"ask": True}
    ran: list[str] = []

    def asks(to: str) -> bool:
        return gate["ask"]

    def wire(to: str) -> str:
        """Wire money."""
        ran.append(to)
        return "sent"

    agent = LlmAgent(
        name="mind",
        model=bank.gemini(fake.root),
        tools=[FunctionTool(wire, require_confirmation=asks)],
    )
    flow = Workflow("adk-mind")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        turn = await run_agent(ctx, agent, "go")
        return {"answer": turn.text}, END

    fake.script(GEMINI, gemini(None, [("wire", {"to": "mallory"})]), gemini("ok"))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    gate["ask"] = False
    reject("r1", reason="no", store=url, workflow=flow)
    assert ran == []


def test_a_done_call_is_not_asked_about_when_the_predicate_changes_its_mind(
    fake: FakeProvider, tmp_path: Path
) -> None:
    gate = {"ask": False}
    ran: list[str] = []

    def asks(to: str) -> bool:
        return gate["ask"]

    def wire(to: str) -> str:
        """Wire money."""
        ran.append(to)
        return "sent"

    def block_card(customer: str) -> str:
        """Block the card."""
        ran.append(customer)
        return "blocked"

    agent = LlmAgent(
        name="mind2",
        model=bank.gemini(fake.root),
        tools=[
            FunctionTool(wire, require_confirmation=asks),
            FunctionTool(block_card, require_confirmation=True),
        ],
    )
    flow = Workflow("adk-mind2")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        turn = await run_agent(ctx, agent, "go")
        return {"answer": turn.text}, END

    fake.script(
        GEMINI,
        gemini(None, [("wire", {"to": "bob"})]),
        gemini(None, [("block_card", {"customer": "c1"})]),
        gemini("ok"),
    )
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert run(flow, {}, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    gate["ask"] = True  # the done wire would now be gated: handed back, not asked about
    decided = approve("r1", store=url, workflow=flow)
    assert decided.result is not None and decided.result.status is RunStatus.COMPLETED
    assert ran == ["bob", "c1"]


def test_a_run_with_an_edited_approval_forks_and_replays_asking_nothing(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from savegame.client import fork, history, replay

    from .test_durable import QUESTION, script_block

    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = bank.build("adk-edited", fake.root, ledger)
    script_block(fake)
    assert run(flow, QUESTION, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    decided = approve("r1", store=url, workflow=flow, edit={"customer": "c2"})
    assert decided.result is not None and decided.result.status is RunStatus.COMPLETED
    asked = len(fake.asked)
    forked = fork(history("r1", store=url)[-1].checkpoint_id, store=url, workflow=flow)
    assert forked.result is not None and forked.result.status is RunStatus.COMPLETED
    assert forked.result.state["answer"] == decided.result.state["answer"]
    report = replay("r1", against=flow, store=url)
    assert report.identical, report.text()
    assert len(fake.asked) == asked
    assert [line.get("blocked") for line in bank.ledger_lines(ledger)] == ["c2"]


def test_a_request_retried_by_the_gemini_client_is_one_model_call(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from google.adk.models import Gemini
    from google.genai import types

    from savegame.client import list_effects
    from tests.provider import error

    model = Gemini(
        model=bank.MODEL,
        base_url=fake.root,
        client_kwargs={"api_key": "test-key"},
        retry_options=types.HttpRetryOptions(attempts=3, initial_delay=0.01, jitter=0),
    )
    agent = LlmAgent(name="retried", model=model)
    flow = Workflow("adk-retried")

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        turn = await run_agent(ctx, agent, "go")
        return {"answer": turn.text}, END

    fake.script(GEMINI, error(429), error(503), gemini("ok"))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    done = run(flow, {}, run_id="r1", store=url)
    assert done.status is RunStatus.COMPLETED and done.state["answer"] == "ok"
    assert len(fake.bodies(GEMINI)) == 3  # the client retried
    assert [e.name for e in list_effects("r1", store=url)] == ["llm:gemini-2.5-flash"]
    assert (done.usage.llm_calls, done.usage.input_tokens) == (1, 12)


WORDS = {"kiwi", "apple", "fig", "plum", "date", "lime", "pear", "yuzu"}


def test_a_set_a_tool_returns_is_told_in_one_order_whatever_the_process(
    fake: FakeProvider, tmp_path: Path
) -> None:
    """A set's iteration order follows string hashes, which differ per process: a run
    resumed by another process would send the model other JSON."""

    def tags() -> Any:
        """The tags."""
        return {"tags": set(WORDS)}

    agent = LlmAgent(name="tagger", model=bank.gemini(fake.root), tools=[tags])
    fake.script(GEMINI, gemini(None, [("tags", {})]), gemini("ok"))
    done = run(one_flow("adk-set", agent), {}, run_id="r1", store=f"sqlite:///{tmp_path / 'r.db'}")
    assert done.status is RunStatus.COMPLETED
    [part] = fake.bodies(GEMINI)[1]["contents"][-1]["parts"]
    assert part["functionResponse"]["response"] == {"tags": sorted(WORDS)}


def one_flow(name: str, agent: LlmAgent) -> Workflow:
    flow = Workflow(name)

    @flow.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        turn = await run_agent(ctx, agent, "go")
        return {"answer": turn.text}, END

    return flow
