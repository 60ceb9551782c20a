"""Attacks on the durable Agents SDK run (issue 32): ``savegame replay`` of a recorded
run against unchanged code; credentials handed to the SDK in every place a request
carries them; hostile model output; the SDK's own retries of a failed request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
    for secret in ("CLIENT-1111", "HEADER-2222", "HEADER-3333", "QUERY-4444", "BODY-5555", "BODY-6666"):
        assert secret.encode() not in kept, secret
    assert b"ada" in kept  # what is not a credential is kept
