"""Hostile or broken model answers, and settings that carry credentials, through the real
SDKs against the local provider.

A tool call whose arguments the tool does not take is told to the model (the run goes
on, and a resume has nothing to fail on again); usage below zero is refused before it is
journaled or counted; a gateway's ``Authorization`` header and a URL's userinfo reach the
server but never the journal.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from savegame import END, Agent, RunStatus, StepContext, Workflow, run
from savegame.agent import ModelResponse
from savegame.client import get_run, list_effects, model_calls
from savegame.errors import ModelTransientError
from savegame.models import Anthropic, LiteLLM, OpenAI
from tests.models.test_openai import CONVERSATION, lookup_order
from tests.provider import CHAT, MESSAGES, RESPONSES, FakeProvider, chat, messages, responses

SECRET = "sk-gateway-5e0c7a"
PASSWORD = "pw-9f1e33"


def test_arguments_the_tool_does_not_take_are_told_to_the_model(
    fake: FakeProvider, sqlite_url: str
) -> None:
    # Before: the tools step raised (bad arguments for tool lookup_order), the run failed,
    # and each resume replayed the journaled answer into the same failure.
    fake.script(
        CHAT,
        chat(None, [("lookup_order", {"id": "A-1", "verbose": True})]),
        chat(None, [("lookup_order", {"order_id": "A-1"})]),
        chat("A-1 totals 120."),
    )
    model = OpenAI("gpt-4o", base_url=fake.openai_url, api_key="test-key")
    agent = Agent("orders", model, [lookup_order], backoff=0)
    result = run(agent, {"input": "A-1?"}, store=sqlite_url)
    assert result.status is RunStatus.COMPLETED
    assert result.state["answer"] == "A-1 totals 120."
    told = fake.bodies(CHAT)[1]["messages"][-1]
    assert told["role"] == "tool" and told["tool_call_id"] == "call_0"
    error = json.loads(told["content"])["error"]
    assert "lookup_order" in error and "order_id" in error
    # Only the call that fit the tool was made.
    tools = [e for e in list_effects(result.run_id, store=sqlite_url) if e.name == "lookup_order"]
    assert len(tools) == 1


SERVERS = {
    "chat": (CHAT, lambda: chat("hi", usage=(-1_000_000, 5, 0))),
    "responses": (RESPONSES, lambda: responses("hi", usage=(12, -5, 0))),
    "messages": (MESSAGES, lambda: messages("hi", usage=(12, 5, -7, 0))),
}


def adapter(kind: str, fake: FakeProvider) -> Any:
    if kind == "messages":
        return Anthropic("claude-sonnet-4-5", base_url=fake.root, api_key="test-key")
    return OpenAI("gpt-4o", api=kind, base_url=fake.openai_url, api_key="test-key")


@pytest.mark.parametrize("kind", sorted(SERVERS))
def test_usage_below_zero_is_refused(fake: FakeProvider, kind: str) -> None:
    path, reply = SERVERS[kind]
    fake.script(path, reply())
    with pytest.raises(ModelTransientError, match="below zero"):
        adapter(kind, fake).complete(CONVERSATION[:2], [])


@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince211")
@pytest.mark.filterwarnings("ignore:Item .* is using the `ReadOnly` qualifier:UserWarning")
def test_usage_below_zero_is_refused_through_litellm(fake: FakeProvider) -> None:
    fake.script(CHAT, chat("hi", usage=(-3, 5, 0)))
    model = LiteLLM("openai/gpt-4o", base_url=fake.openai_url, api_key="test-key")
    with pytest.raises(ModelTransientError, match="below zero"):
        model.complete(CONVERSATION[:2], [])


class Negative:
    """A ChatModel of one's own that answers a cost below zero."""

    name = "mine"

    def complete(self, messages: Any, tools: Any) -> ModelResponse:
        return ModelResponse(content="free money", input_tokens=10, cost_usd=-5.0)


def test_ctx_llm_refuses_usage_below_zero_from_any_model(sqlite_url: str) -> None:
    wf = Workflow("negative")

    @wf.step(entry=True)
    def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"answer": ctx.llm(Negative(), [{"role": "user", "content": "hi"}]).content}, END

    with pytest.raises(ModelTransientError, match=r"below zero \(cost_usd=-5.0\)"):
        run(wf, {}, run_id="negative", store=sqlite_url)
    info = get_run("negative", store=sqlite_url)
    assert info.status is RunStatus.FAILED and "below zero" in (info.error or "")
    # Nothing was journaled as its answer.
    assert model_calls("negative", store=sqlite_url) == []


def credentialed(kind: str, fake: FakeProvider) -> Any:
    if kind == "messages":  # a gateway that takes a user and password in the URL
        host = fake.root.removeprefix("http://")
        return Anthropic(
            "claude-sonnet-4-5",
            base_url=f"http://gw:{PASSWORD}@{host}",
            api_key="test-key",
            extra_headers={"X-Gateway-Key": SECRET, "X-Team": "support"},
        )
    return OpenAI(  # a gateway that takes a bearer token and a key in the query
        "gpt-4o",
        base_url=fake.openai_url,
        api_key="test-key",
        extra_headers={"Authorization": f"Bearer {SECRET}", "X-Team": "support"},
        extra_query={"key": SECRET},
    )


@pytest.mark.parametrize("kind", ["chat", "messages"])
def test_credentials_in_settings_reach_the_server_but_never_the_journal(
    fake: FakeProvider, tmp_path: Path, kind: str
) -> None:
    path, _ = SERVERS[kind]
    fake.script(path, messages("hi") if kind == "messages" else chat("hi"))
    model = credentialed(kind, fake)
    wf = Workflow(f"credentials-{kind}")

    @wf.step(entry=True)
    def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"answer": ctx.llm(model, [{"role": "user", "content": "hi"}]).content}, END

    db = tmp_path / "runs.db"
    result = run(wf, {}, store=f"sqlite:///{db}")
    assert result.status is RunStatus.COMPLETED
    [asked] = fake.asked
    [call] = model_calls(result.run_id, store=f"sqlite:///{db}")
    assert call.request is not None
    params = call.request.params
    # What was sent stays visible, by name; no value of a header or of the query.
    if kind == "chat":
        assert asked.headers["Authorization"] == f"Bearer {SECRET}"
        assert params["extra_headers"] == {
            "Authorization": "(not recorded)",
            "X-Team": "(not recorded)",
        }
        assert params["extra_query"] == {"key": "(not recorded)"}
    else:
        basic = base64.b64encode(f"gw:{PASSWORD}".encode()).decode()
        assert asked.headers["Authorization"] == f"Basic {basic}"
        assert asked.headers["X-Gateway-Key"] == SECRET
        assert params["base_url"] == fake.root
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("runs.db*"))
    assert SECRET.encode() not in stored and PASSWORD.encode() not in stored
