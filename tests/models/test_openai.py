"""savegame.models.OpenAI through the real openai SDK against the local provider:
Chat Completions and the Responses API, tool calls (parallel too), tool results,
system prompts, structured output, errors and retries."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import stamina
from pydantic import BaseModel

from savegame import Agent, RunStatus, run
from savegame.client import get_run, model_calls
from savegame.effects import ToolSpec, tool_spec
from savegame.errors import ModelRequestError, ModelTransientError
from savegame.models import OpenAI, Price
from tests.provider import CHAT, RESPONSES, FakeProvider, chat, error, responses


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up by id."""
    return {"id": order_id, "total": 120}


LOOKUP = tool_spec(lookup_order)

CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "A-1 and A-2?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "name": "lookup_order", "arguments": {"order_id": "A-1"}},
            {"id": "c2", "name": "lookup_order", "arguments": {"order_id": "A-2"}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "name": "lookup_order", "content": {"total": 120}},
    {"role": "tool", "tool_call_id": "c2", "name": "lookup_order", "content": "gone"},
]


def model(fake: FakeProvider, **kwargs: Any) -> OpenAI:
    return OpenAI("gpt-4o", base_url=fake.openai_url, api_key="test-key", **kwargs)


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_parallel_tool_calls_come_back_as_tool_calls(fake: FakeProvider, api: str) -> None:
    reply = chat if api == "chat" else responses
    path = CHAT if api == "chat" else RESPONSES
    calls = [("lookup_order", {"order_id": "A-1"}), ("lookup_order", {"order_id": "A-2"})]
    fake.script(path, reply(None, calls, usage=(40, 9, 0)))
    out = model(fake, api=api).complete(CONVERSATION[:2], [LOOKUP])
    assert [(c.id, c.name, c.arguments) for c in out.tool_calls] == [
        ("call_0", "lookup_order", {"order_id": "A-1"}),
        ("call_1", "lookup_order", {"order_id": "A-2"}),
    ]
    assert (out.input_tokens, out.output_tokens, out.model) == (40, 9, "gpt-4o-2024-08-06")
    [body] = fake.bodies(path)
    assert body["model"] == "gpt-4o"
    if api == "chat":
        assert body["tools"] == [
            {
                "type": "function",
                "function": {
                    "name": "lookup_order",
                    "description": "Look an order up by id.",
                    "parameters": LOOKUP.parameters,
                },
            }
        ]
    else:
        assert body["tools"][0]["name"] == "lookup_order"
        assert body["tools"][0]["strict"] is False


def test_chat_sends_system_tool_calls_and_results_in_its_wire_format(fake: FakeProvider) -> None:
    fake.script(CHAT, chat("A-1 totals 120; A-2 is gone."))
    out = model(fake).complete(CONVERSATION, [LOOKUP])
    assert out.content == "A-1 totals 120; A-2 is gone." and out.stop_reason == "stop"
    [body] = fake.bodies(CHAT)
    system, _, assistant, first, second = body["messages"]
    assert system == {"role": "system", "content": "Be brief."}
    assert assistant["tool_calls"][1] == {
        "id": "c2",
        "type": "function",
        "function": {"name": "lookup_order", "arguments": '{"order_id": "A-2"}'},
    }
    assert first == {"role": "tool", "tool_call_id": "c1", "content": '{"total": 120}'}
    assert second == {"role": "tool", "tool_call_id": "c2", "content": "gone"}


def test_responses_sends_function_calls_and_their_outputs_as_items(fake: FakeProvider) -> None:
    fake.script(RESPONSES, responses("done", usage=(50, 4, 32)))
    out = model(fake, api="responses").complete(CONVERSATION, [LOOKUP])
    assert (out.content, out.cached_tokens, out.stop_reason) == ("done", 32, "completed")
    [body] = fake.bodies(RESPONSES)
    kinds = [item.get("type") or item["role"] for item in body["input"]]
    assert kinds == [
        "system",
        "user",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    assert body["input"][3] == {
        "type": "function_call",
        "call_id": "c2",
        "name": "lookup_order",
        "arguments": '{"order_id": "A-2"}',
    }
    assert body["input"][4] == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": '{"total": 120}',
    }


class Verdict(BaseModel):
    refund: bool
    reason: str


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_structured_output_is_asked_for_and_parsed(fake: FakeProvider, api: str) -> None:
    reply, path = (chat, CHAT) if api == "chat" else (responses, RESPONSES)
    fake.script(path, reply('{"refund": true, "reason": "late"}'))
    out = model(fake, api=api, output=Verdict, temperature=0).complete(CONVERSATION[:2], [])
    assert out.output == {"refund": True, "reason": "late"}
    assert Verdict.model_validate(out.output).refund
    [body] = fake.bodies(path)
    assert body["temperature"] == 0
    schema = Verdict.model_json_schema()
    if api == "chat":
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "Verdict", "schema": schema},
        }
    else:
        assert body["text"]["format"]["schema"] == schema


def test_an_answer_that_is_not_the_json_asked_for_is_transient(fake: FakeProvider) -> None:
    fake.script(CHAT, chat("sure! here it is"))
    with pytest.raises(ModelTransientError, match="not the JSON asked for"):
        model(fake, output={"type": "object"}).complete(CONVERSATION[:2], [])


def test_tool_arguments_that_are_not_json_are_transient(fake: FakeProvider) -> None:
    bad = chat(None, [("lookup_order", {})])
    bad.body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = "{order"
    fake.script(CHAT, bad)
    with pytest.raises(ModelTransientError, match="not JSON"):
        model(fake).complete(CONVERSATION[:2], [LOOKUP])


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (429, ModelTransientError),
        (500, ModelTransientError),
        (503, ModelTransientError),
        (400, ModelRequestError),
        (401, ModelRequestError),
        (404, ModelRequestError),
    ],
)
def test_errors_map_to_retryable_or_not(fake: FakeProvider, status: int, kind: type) -> None:
    fake.script(CHAT, error(status, "told so", x_request_id="req_77"))
    with pytest.raises(kind) as raised:
        model(fake).complete(CONVERSATION[:2], [])
    assert raised.value.status == status
    assert raised.value.provider_request_id == "req_77"
    assert raised.value.retryable is (kind is ModelTransientError)
    assert "told so" in str(raised.value)
    # The SDK's own retries are off: one request, whatever the status.
    assert len(fake.bodies(CHAT)) == 1


def test_the_providers_should_retry_header_wins(fake: FakeProvider) -> None:
    fake.script(CHAT, error(500, x_should_retry="false"), error(400, x_should_retry="true"))
    with pytest.raises(ModelRequestError):
        model(fake).complete(CONVERSATION[:2], [])
    with pytest.raises(ModelTransientError):
        model(fake).complete(CONVERSATION[:2], [])


def test_a_lost_connection_is_transient() -> None:
    dead = OpenAI("gpt-4o", base_url="http://127.0.0.1:9/v1", api_key="k", timeout=5)
    with pytest.raises(ModelTransientError, match="gpt-4o failed"):
        dead.complete([{"role": "user", "content": "hi"}], [])


def test_sdk_retries_when_asked_run_inside_one_call(fake: FakeProvider) -> None:
    fake.script(CHAT, error(500, retry_after="0"), error(500, retry_after="0"), chat("ok"))
    out = model(fake, max_retries=2).complete(CONVERSATION[:2], [])
    assert out.content == "ok"
    assert len(fake.bodies(CHAT)) == 3


def test_acomplete_uses_the_async_client(fake: FakeProvider) -> None:
    fake.script(CHAT, chat("one"), chat("two"))
    adapter = model(fake)

    async def twice() -> list[str | None]:
        return [(await adapter.acomplete(CONVERSATION[:2], [])).content for _ in range(2)]

    assert asyncio.run(twice()) == ["one", "two"]
    # A new event loop, a new client: the first one's connections belong to a closed loop.
    fake.script(CHAT, chat("three"))
    assert asyncio.run(adapter.acomplete(CONVERSATION[:2], [])).content == "three"


def test_cost_comes_from_the_price_table_or_is_unknown(fake: FakeProvider) -> None:
    fake.script(CHAT, chat("a", usage=(1000, 100, 400)), chat("b"), chat("c", usage=(10, 10, 0)))
    # gpt-4o in LiteLLM's map: $2.5 in, $1.25 cached in, $10 out per million tokens.
    priced = model(fake).complete(CONVERSATION[:2], [])
    assert priced.cost_usd == pytest.approx((600 * 2.5 + 400 * 1.25 + 100 * 10) / 1e6)
    local = OpenAI("my-local-llama", base_url=fake.openai_url, api_key="k")
    assert local.complete(CONVERSATION[:2], []).cost_usd is None
    mine = model(fake, price=Price(input=1.0, output=2.0)).complete(CONVERSATION[:2], [])
    assert mine.cost_usd == pytest.approx((10 * 1.0 + 10 * 2.0) / 1e6)


def test_params_record_the_setup_but_never_the_key(fake: FakeProvider) -> None:
    adapter = model(fake, api="responses", output=Verdict, temperature=0.2)
    assert adapter.params == {
        "temperature": 0.2,
        "api": "responses",
        "base_url": fake.openai_url,
        "output": {"name": "Verdict", "schema": Verdict.model_json_schema()},
    }
    assert "test-key" not in repr(adapter.params)


def agent(fake: FakeProvider, **kwargs: Any) -> Agent:
    return Agent("orders", model(fake), [lookup_order], system="Be brief.", backoff=0, **kwargs)


def test_an_agent_retries_a_rate_limited_turn_with_its_step_policy(
    fake: FakeProvider, sqlite_url: str
) -> None:
    fake.script(
        CHAT,
        chat(None, [("lookup_order", {"order_id": "A-1"}), ("lookup_order", {"order_id": "A-2"})]),
        error(429),
        error(503),
        chat("Both total 120."),
    )
    result = run(agent(fake), {"input": "A-1 and A-2?"}, store=sqlite_url)
    assert result.status is RunStatus.COMPLETED
    assert result.state["answer"] == "Both total 120."
    assert len(fake.bodies(CHAT)) == 4
    # Two turns were paid for; the failed attempts were not recorded as calls.
    assert result.usage.llm_calls == 2
    tools = [m for m in result.state["messages"] if m["role"] == "tool"]
    assert [m["content"]["id"] for m in tools] == ["A-1", "A-2"]
    # The last turn was asked with both tool results, in the wire format.
    last = fake.bodies(CHAT)[-1]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "tool"]
    [_, second] = model_calls(result.run_id, store=sqlite_url)
    assert second.request is not None and second.request.messages[-1]["tool_call_id"] == "call_1"


@pytest.fixture
def waits() -> Iterator[list[float]]:
    """The waits stamina schedules between attempts, as its instrumentation sees them."""
    seen: list[float] = []
    before = stamina.instrumentation.get_on_retry_hooks()

    def hook(details: stamina.instrumentation.RetryDetails) -> None:
        seen.append(details.wait_for)

    stamina.instrumentation.set_on_retry_hooks([*before, hook])
    yield seen
    stamina.instrumentation.set_on_retry_hooks(before)


def test_a_step_retry_waits_as_long_as_the_provider_asked(
    fake: FakeProvider, sqlite_url: str, waits: list[float]
) -> None:
    # The agent's own backoff is 0: the waits stamina is told are the provider's.
    fake.script(
        CHAT,
        error(429, retry_after_ms="30"),
        error(503, retry_after="0.02"),
        error(500),
        chat("Both total 120."),
    )
    result = run(agent(fake, retries=3), {"input": "A-1?"}, store=sqlite_url)
    assert result.state["answer"] == "Both total 120."
    assert waits[:2] == pytest.approx([0.03, 0.02])
    # No header: the step's own schedule (backoff 0, so no wait at all).
    assert waits[2] == 0.0


def test_the_mapped_error_carries_the_wait(fake: FakeProvider) -> None:
    fake.script(CHAT, error(429, retry_after="4"))
    with pytest.raises(ModelTransientError) as raised:
        model(fake).complete(CONVERSATION[:2], [])
    assert raised.value.retry_after == 4.0


def test_a_refused_request_fails_the_run_without_a_retry(
    fake: FakeProvider, sqlite_url: str
) -> None:
    fake.script(CHAT, error(400, "bad schema"))
    with pytest.raises(ModelRequestError, match="bad schema"):
        run(agent(fake), {"input": "A-1?"}, run_id="refused", store=sqlite_url)
    assert get_run("refused", store=sqlite_url).status is RunStatus.FAILED
    assert len(fake.bodies(CHAT)) == 1


def test_retries_run_out_on_a_provider_that_stays_down(fake: FakeProvider, sqlite_url: str) -> None:
    fake.script(CHAT, error(500), error(500))
    with pytest.raises(ModelTransientError):
        run(agent(fake, retries=1), {"input": "A-1?"}, run_id="down", store=sqlite_url)
    assert get_run("down", store=sqlite_url).status is RunStatus.FAILED
    assert len(fake.bodies(CHAT)) == 2


def test_tool_specs_of_plain_functions_reach_the_wire(fake: FakeProvider) -> None:
    spec = ToolSpec("ping", "Ping.", {"type": "object", "properties": {}})
    fake.script(CHAT, chat("pong"))
    model(fake).complete([{"role": "user", "content": "ping"}], [spec])
    assert fake.bodies(CHAT)[0]["tools"][0]["function"]["name"] == "ping"
