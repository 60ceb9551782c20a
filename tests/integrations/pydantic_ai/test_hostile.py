"""A pydantic-ai model's hostile answers and credentialed settings: usage below zero is
refused before it is journaled; ``ModelSettings(extra_headers=...)`` reaches the server
but its values never the journal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

from savegame import END, StepContext, Workflow, run
from savegame.client import model_calls
from savegame.integrations.pydantic_ai import SavegameDurability, run_agent
from tests.provider import CHAT, FakeProvider, chat

SECRET = "sk-gateway-77d1"


def flow(fake: FakeProvider, name: str, settings: ModelSettings | None = None) -> Workflow:
    model = OpenAIChatModel(
        "gpt-4o", provider=OpenAIProvider(base_url=fake.openai_url, api_key="k")
    )
    agent = Agent(model, name=name, capabilities=[SavegameDurability()], model_settings=settings)
    wf = Workflow(name)

    @wf.step(entry=True)
    async def answer(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        result = await run_agent(ctx, agent, "hi")
        return {"answer": result.output}, END

    return wf


# pydantic-ai warns that genai-prices cannot read the usage and drops it; the
# integration refuses any count below zero that would still come through.
@pytest.mark.filterwarnings("ignore::pydantic_ai._warnings.UsageExtractionFailedWarning")
def test_usage_below_zero_never_reaches_the_runs_usage(fake: FakeProvider, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    fake.script(CHAT, chat("hi", usage=(-1_000_000, 5, 0)))
    result = run(flow(fake, "pai-negative"), {}, run_id="r1", store=url)
    assert (result.usage.input_tokens, result.usage.llm_calls) == (0, 1)
    [call] = model_calls("r1", store=url)
    assert call.response is not None and call.response.input_tokens == 0


def test_extra_headers_reach_the_server_but_never_the_journal(
    fake: FakeProvider, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    fake.script(CHAT, chat("hi"))
    settings = ModelSettings(extra_headers={"Authorization": f"Bearer {SECRET}"}, temperature=0)
    result = run(flow(fake, "pai-headers", settings), {}, store=url)
    assert result.state["answer"] == "hi"
    [asked] = fake.asked
    assert asked.headers["Authorization"] == f"Bearer {SECRET}"
    [call] = model_calls(result.run_id, store=url)
    assert call.request is not None
    assert call.request.params["extra_headers"] == {"Authorization": "(not recorded)"}
    assert call.request.params["temperature"] == 0
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("runs.db*"))
    assert SECRET.encode() not in stored
