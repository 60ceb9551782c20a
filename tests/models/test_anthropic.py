"""savegame.models.Anthropic through the real anthropic SDK against the local provider:
system prompts, tool_use and tool_result blocks (parallel calls' results in one user
message), cache usage, structured output, errors, and an agent run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from savegame import Agent, RunStatus, run
from savegame.effects import tool_spec
from savegame.errors import ModelRequestError, ModelTransientError
from savegame.models import Anthropic, Price
from tests.models.test_openai import CONVERSATION, lookup_order
from tests.provider import MESSAGES, FakeProvider, error, messages, messages_stream

LOOKUP = tool_spec(lookup_order)


def model(fake: FakeProvider, **kwargs: Any) -> Anthropic:
    return Anthropic("claude-sonnet-4-5", base_url=fake.root, api_key="test-key", **kwargs)


def test_the_conversation_goes_out_in_the_messages_format(fake: FakeProvider) -> None:
    fake.script(MESSAGES, messages("A-1 totals 120."))
    out = model(fake).complete(CONVERSATION, [LOOKUP])
    assert out.content == "A-1 totals 120." and out.stop_reason == "end_turn"
    [body] = fake.bodies(MESSAGES)
    assert body["system"] == "Be brief."
    assert body["max_tokens"] == 4096
    assert body["tools"] == [
        {
            "name": "lookup_order",
            "description": "Look an order up by id.",
            "input_schema": LOOKUP.parameters,
        }
    ]
    user, assistant, results = body["messages"]
    assert user == {"role": "user", "content": [{"type": "text", "text": "A-1 and A-2?"}]}
    assert assistant["content"] == [
        {"type": "tool_use", "id": "c1", "name": "lookup_order", "input": {"order_id": "A-1"}},
        {"type": "tool_use", "id": "c2", "name": "lookup_order", "input": {"order_id": "A-2"}},
    ]
    # Both results of the parallel calls in one user message, as the API asks.
    assert results == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": '{"total": 120}'},
            {"type": "tool_result", "tool_use_id": "c2", "content": "gone"},
        ],
    }


def test_parallel_tool_use_blocks_become_tool_calls(fake: FakeProvider) -> None:
    calls = [("lookup_order", {"order_id": "A-1"}), ("lookup_order", {"order_id": "A-2"})]
    fake.script(MESSAGES, messages("Looking.", calls))
    out = model(fake).complete(CONVERSATION[:2], [LOOKUP])
    assert out.content == "Looking."
    assert [(c.id, c.arguments) for c in out.tool_calls] == [
        ("toolu_0", {"order_id": "A-1"}),
        ("toolu_1", {"order_id": "A-2"}),
    ]
    assert out.stop_reason == "tool_use"


def test_cache_reads_and_writes_count_as_input_and_are_priced_apart(fake: FakeProvider) -> None:
    fake.script(MESSAGES, messages("ok", usage=(100, 20, 1000, 200)))
    price = Price(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)
    out = model(fake, price=price).complete(CONVERSATION[:2], [])
    assert (out.input_tokens, out.cached_tokens, out.output_tokens) == (1300, 1000, 20)
    assert out.cost_usd == pytest.approx((100 * 3 + 1000 * 0.3 + 200 * 3.75 + 20 * 15) / 1e6)


def test_structured_output_goes_in_output_config(fake: FakeProvider) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "title": "Check"}
    fake.script(MESSAGES, messages('{"ok": true}'))
    out = model(fake, output=schema).complete(CONVERSATION[:2], [])
    assert out.output == {"ok": True}
    assert fake.bodies(MESSAGES)[0]["output_config"] == {
        "format": {"type": "json_schema", "schema": schema}
    }


@pytest.mark.parametrize(
    ("status", "kind"),
    [(429, ModelTransientError), (529, ModelTransientError), (400, ModelRequestError)],
)
def test_errors_map_to_retryable_or_not(fake: FakeProvider, status: int, kind: type) -> None:
    fake.script(MESSAGES, error(status, "said no", request_id="req_9"))
    with pytest.raises(kind) as raised:
        model(fake).complete(CONVERSATION[:2], [])
    assert (raised.value.status, raised.value.provider_request_id) == (status, "req_9")
    assert "said no" in str(raised.value)
    assert len(fake.bodies(MESSAGES)) == 1


def test_acomplete_uses_the_async_client(fake: FakeProvider) -> None:
    fake.script(MESSAGES, messages("async"))
    assert asyncio.run(model(fake).acomplete(CONVERSATION[:2], [])).content == "async"


def test_an_agent_runs_tool_rounds_over_the_messages_api(
    fake: FakeProvider, sqlite_url: str
) -> None:
    fake.script(
        MESSAGES,
        messages(
            None, [("lookup_order", {"order_id": "A-1"}), ("lookup_order", {"order_id": "B"})]
        ),
        error(529, "overloaded"),
        messages("Done."),
    )
    agent = Agent("claude", model(fake), [lookup_order], system="Be brief.", backoff=0)
    result = run(agent, {"input": "A-1 and B?"}, store=sqlite_url)
    assert result.status is RunStatus.COMPLETED and result.state["answer"] == "Done."
    last = fake.bodies(MESSAGES)[-1]
    assert [m["role"] for m in last["messages"]] == ["user", "assistant", "user"]
    assert [b["tool_use_id"] for b in last["messages"][2]["content"]] == ["toolu_0", "toolu_1"]


@pytest.mark.parametrize("how", ["complete", "acomplete", "stream", "astream"])
def test_settings_the_sdk_has_no_argument_for_go_in_the_body(fake: FakeProvider, how: str) -> None:
    # anthropic 2.x's messages.create has no temperature, top_p or top_k: passed as
    # keywords they raised TypeError before any request went out.
    reply = messages_stream(["ok"]) if "stream" in how else messages("ok")
    fake.script(MESSAGES, reply)
    asked = model(fake, temperature=0, top_k=5, extra_body={"metadata": {"user_id": "u-1"}})
    call = getattr(asked, how)
    args = (CONVERSATION[:2], [], print) if "stream" in how else (CONVERSATION[:2], [])
    out = call(*args)
    if how.startswith("a"):
        out = asyncio.run(out)
    assert out.content == "ok"
    [body] = fake.bodies(MESSAGES)
    assert (body["temperature"], body["top_k"], body["max_tokens"]) == (0, 5, 4096)
    assert body["metadata"] == {"user_id": "u-1"}
