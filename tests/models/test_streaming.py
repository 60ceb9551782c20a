"""Streaming: chunks delivered as they arrive through each real SDK (Chat Completions,
Responses, Messages, LiteLLM), the final message journaled once, each stream's
attempt marked in the journal, a replay delivering its recorded text."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from savegame import END, Agent, ScriptedModel, StepContext, Workflow, run
from savegame.client import list_effects, model_calls
from savegame.effects import ABANDONED
from savegame.model import EffectStatus
from savegame.models import Anthropic, LiteLLM, OpenAI
from tests.models.test_litellm import LITELLM_WARNINGS
from tests.models.test_openai import lookup_order
from tests.provider import (
    CHAT,
    MESSAGES,
    RESPONSES,
    FakeProvider,
    chat_stream,
    messages_stream,
    responses_stream,
)

KINDS = ["chat", "responses", "anthropic", pytest.param("litellm", marks=LITELLM_WARNINGS)]


def adapter(fake: FakeProvider, kind: str) -> Any:
    if kind == "anthropic":
        return Anthropic("claude-sonnet-4-5", base_url=fake.root, api_key="k")
    if kind == "litellm":
        return LiteLLM("openai/gpt-4o", base_url=fake.openai_url, api_key="k")
    return OpenAI("gpt-4o", api=kind, base_url=fake.openai_url, api_key="k")  # type: ignore[arg-type]


def script(fake: FakeProvider, kind: str, pieces: list[str]) -> str:
    if kind == "anthropic":
        fake.script(MESSAGES, messages_stream(pieces))
        return MESSAGES
    if kind == "responses":
        fake.script(RESPONSES, responses_stream(pieces))
        return RESPONSES
    fake.script(CHAT, chat_stream(pieces))
    return CHAT


def markers(store: str, run_id: str) -> list[tuple[EffectStatus, str | None]]:
    return [
        (e.status, e.error) for e in list_effects(run_id, store=store) if ":stream:" in e.request_id
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_chunks_arrive_and_the_final_message_is_journaled_once(
    fake: FakeProvider, kind: str, sqlite_url: str
) -> None:
    path = script(fake, kind, ["The ", "answer ", "is 42."])
    model, got = adapter(fake, kind), []
    wf = Workflow(f"stream-{kind}")

    @wf.step(entry=True)
    def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        reply = ctx.llm(model, [{"role": "user", "content": "6 x 7?"}], stream=got.append)
        return {"answer": reply.content}, END

    result = run(wf, {}, store=sqlite_url)
    assert got == ["The ", "answer ", "is 42."]
    assert result.state["answer"] == "The answer is 42."
    assert fake.bodies(path)[0]["stream"] is True
    [call] = model_calls(result.run_id, store=sqlite_url)
    assert call.response is not None and call.response.content == "The answer is 42."
    assert call.abandoned_streams == 0
    assert markers(sqlite_url, result.run_id) == [(EffectStatus.DONE, None)]


@pytest.mark.parametrize("kind", ["chat", "anthropic"])
def test_an_agent_streams_every_turn_tool_calls_included(
    fake: FakeProvider, kind: str, sqlite_url: str
) -> None:
    calls = [("lookup_order", {"order_id": "A-1"}), ("lookup_order", {"order_id": "A-2"})]
    if kind == "chat":
        fake.script(CHAT, chat_stream(["Looking"], calls), chat_stream(["Both ", "120."]))
    else:
        fake.script(
            MESSAGES, messages_stream(["Looking"], calls), messages_stream(["Both ", "120."])
        )
    got: list[str] = []
    agent = Agent("streamer", adapter(fake, kind), [lookup_order], stream=got.append, backoff=0)
    result = run(agent, {"input": "A-1 and A-2?"}, store=sqlite_url)
    assert got == ["Looking", "Both ", "120."]
    assert result.state["answer"] == "Both 120."
    tools = [m for m in result.state["messages"] if m["role"] == "tool"]
    assert [m["content"]["id"] for m in tools] == ["A-1", "A-2"]


def test_a_replayed_call_delivers_its_recorded_text_once(
    fake: FakeProvider, sqlite_url: str
) -> None:
    fake.script(CHAT, chat_stream(["4", "2"]))
    model, got, attempts = adapter(fake, "chat"), [], []
    wf = Workflow("stream-replay")

    @wf.step(entry=True, retries=1, backoff=0)
    def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        reply = ctx.llm(model, [{"role": "user", "content": "6 x 7?"}], stream=got.append)
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("after the call, before the checkpoint")
        return {"answer": reply.content}, END

    result = run(wf, {}, store=sqlite_url)
    assert result.state["answer"] == "42"
    assert got == ["4", "2", "42"]  # streamed, then the recorded message replayed
    assert len(fake.bodies(CHAT)) == 1


def test_a_stream_that_raises_is_marked_and_nothing_is_recorded(
    fake: FakeProvider, sqlite_url: str
) -> None:
    fake.script(CHAT, chat_stream(["one ", "two"]))
    model = adapter(fake, "chat")
    wf = Workflow("stream-raises")

    def refuse(piece: str) -> None:
        raise RuntimeError("the screen went away")

    @wf.step(entry=True)
    def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.llm(model, [{"role": "user", "content": "hi"}], stream=refuse)
        return {}, END

    with pytest.raises(Exception, match="the screen went away"):
        run(wf, {}, run_id="cut", store=sqlite_url)
    [(status, error)] = markers(sqlite_url, "cut")
    assert status is EffectStatus.NOT_DONE and error is not None and "screen" in error
    assert error != ABANDONED
    assert model_calls("cut", store=sqlite_url) == []


def test_a_model_that_cannot_stream_answers_in_one_piece(sqlite_url: str) -> None:
    got: list[str] = []
    agent = Agent("plain", ScriptedModel(["all at once"]), stream=got.append)
    assert run(agent, {"input": "hi"}, store=sqlite_url).state["answer"] == "all at once"
    assert got == ["all at once"]


@pytest.mark.parametrize("kind", KINDS)
def test_astream_through_the_async_clients(fake: FakeProvider, kind: str) -> None:
    script(fake, kind, ["a", "b"])
    got: list[str] = []
    out = asyncio.run(
        adapter(fake, kind).astream([{"role": "user", "content": "x"}], [], got.append)
    )
    assert (out.content, got) == ("ab", ["a", "b"])
