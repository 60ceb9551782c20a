"""Attacks on the durable ADK run (issue 32): what a resumed run must end with, byte for
byte, when a tool's result is not in the codec's canonical form; credentials in every
place a request carries them; hostile model output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.tools import FunctionTool

from savegame import END, RunStatus, StepContext, Workflow, approve, run
from savegame.client import get_run
from savegame.codec import encode_value
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
    # Approved at once (no pause): the reference, an uninterrupted run.
    url_a = f"sqlite:///{tmp_path / 'a.db'}"
    flow = _gated_after_lookup("adk-order", fake)
    _script(fake)
    assert run(flow, {}, run_id="r1", store=url_a).status is RunStatus.INTERRUPTED
    decided = approve("r1", store=url_a, workflow=flow)
    assert decided.result is not None and decided.result.status is RunStatus.COMPLETED
    # The approval's resume replayed lookup: its result must be what the model was
    # first told, or the recorded second request no longer matches.
    assert len(fake.bodies(GEMINI)) == 3
    told = [b["contents"] for b in fake.bodies(GEMINI)]
    assert told[1][:3] == told[2][:3]
    final = get_run("r1", store=url_a)
    assert final.status is RunStatus.COMPLETED
    assert encode_value(decided.result.state, "state")


from savegame.integrations.adk import run_agent  # noqa: E402


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
