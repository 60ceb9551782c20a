"""savegame.models.LiteLLM through the real litellm against the local provider: its
OpenAI route (Chat Completions) and its Anthropic route (the Messages API), errors
mapped, LiteLLM's own retries off."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from savegame.effects import tool_spec
from savegame.errors import ModelRequestError, ModelTransientError
from savegame.models import LiteLLM
from tests.models.test_openai import CONVERSATION, lookup_order
from tests.provider import CHAT, MESSAGES, FakeProvider, chat, error, messages

LOOKUP = tool_spec(lookup_order)

#: Warnings LiteLLM's own code raises while it loads its modules lazily (a pydantic
#: deprecation, a TypedDict qualifier pydantic cannot enforce): theirs, not ours, and
#: raised by whichever test first takes that path.
LITELLM_WARNINGS = [
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince211"),
    pytest.mark.filterwarnings("ignore:Item .* is using the `ReadOnly` qualifier:UserWarning"),
]
pytestmark = LITELLM_WARNINGS


def via_openai(fake: FakeProvider, **kwargs: Any) -> LiteLLM:
    return LiteLLM("openai/gpt-4o", base_url=fake.openai_url, api_key="test-key", **kwargs)


def test_tool_calls_and_results_over_the_openai_route(fake: FakeProvider) -> None:
    calls = [("lookup_order", {"order_id": "A-1"}), ("lookup_order", {"order_id": "A-2"})]
    fake.script(CHAT, chat(None, calls, usage=(30, 6, 0)), chat("Both."))
    first = via_openai(fake).complete(CONVERSATION[:2], [LOOKUP])
    assert [c.arguments["order_id"] for c in first.tool_calls] == ["A-1", "A-2"]
    # Priced from the cost map under the provider's prefix.
    assert first.cost_usd == pytest.approx((30 * 2.5 + 6 * 10) / 1e6)
    assert via_openai(fake).complete(CONVERSATION, [LOOKUP]).content == "Both."
    sent = fake.bodies(CHAT)[1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert sent[3]["content"] == '{"total": 120}'


def test_the_anthropic_route_speaks_the_messages_api(fake: FakeProvider) -> None:
    fake.script(MESSAGES, messages("Hi from Claude.", usage=(10, 3, 0, 0)))
    adapter = LiteLLM("anthropic/claude-sonnet-4-5", base_url=fake.root, api_key="test-key")
    out = adapter.complete(CONVERSATION[:2], [])
    assert out.content == "Hi from Claude."
    [body] = fake.bodies(MESSAGES)
    assert body["system"] == [{"type": "text", "text": "Be brief."}]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "A-1 and A-2?"}]}
    ]


@pytest.mark.parametrize(
    ("status", "kind"),
    [(429, ModelTransientError), (500, ModelTransientError), (400, ModelRequestError)],
)
def test_errors_map_and_litellm_does_not_retry(fake: FakeProvider, status: int, kind: type) -> None:
    fake.script(CHAT, error(status, "nope"))
    with pytest.raises(kind) as raised:
        via_openai(fake).complete(CONVERSATION[:2], [])
    assert raised.value.status == status
    assert len(fake.bodies(CHAT)) == 1


def test_acomplete(fake: FakeProvider) -> None:
    fake.script(CHAT, chat("async"))
    assert asyncio.run(via_openai(fake).acomplete(CONVERSATION[:2], [])).content == "async"
