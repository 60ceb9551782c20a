"""An Agents SDK model request as a savegame model call (``ctx.llm``'s journal entry).

:class:`DurableModel` wraps the model the SDK resolved for an agent (an
``OpenAIResponsesModel``, an ``OpenAIChatCompletionsModel``, any ``Model``). Inside a
step each ``get_response`` is one ``llm`` entry of the step's journal, at the step's
next position: its request (the system instructions and input items, the tool and
handoff definitions, the settings) kept by parts, each message once per run
(:mod:`savegame.effects._prompts`, which also hides credentials in the settings), so
``savegame models`` shows what the model was asked and ``model_usage`` what it cost. The
response is committed before the SDK sees it; a resumed, retried or forked step gets it
back from the journal and asks nothing.

The recorded response is savegame's ``ModelResponse`` form (text, tool calls, tokens,
cost: what people and ``model_usage`` read) with the SDK's own response beside it
under :data:`PAYLOAD` (output items as the Responses API's JSON, usage as the SDK
serializes it), which is what a replay hands back. Both the Responses API and Chat
Completions models answer the SDK in Responses items, so one form serves both.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from agents import Handoff, Model, ModelProvider, ModelSettings, ModelTracing, Tool
from agents.agent_output import AgentOutputSchemaBase
from agents.items import (
    ModelResponse,
    TResponseInputItem,
    TResponseOutputItem,
    TResponseStreamEvent,
)
from agents.usage import deserialize_usage, serialize_usage
from openai.types.responses.response_prompt_param import ResponsePromptParam
from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

from savegame.effects import ModelCall, ToolSpec, below_zero
from savegame.errors import ConfigurationError, ModelTransientError
from savegame.integrations._model_calls import journaled_model_call
from savegame.integrations.openai_agents import _scope
from savegame.models import lookup_price

PAYLOAD = "openai_agents"
"""The key of a recorded response that holds the SDK's ModelResponse as JSON."""

_OUTPUT = TypeAdapter(list[TResponseOutputItem])


def plain(value: Any) -> Any:
    """``value`` as a JSON tree; what has none (a function, a client) by its type's name."""
    return to_jsonable_python(value, fallback=lambda v: f"<{type(v).__name__}>")


def label_of(model: Model, asked: str | None = None) -> str:
    """The name a model's calls are journaled under (``llm:<name>``): the name the agent
    asked for, else the model's own, the same on every execution."""
    if asked:
        return asked
    own = getattr(model, "model", None)
    return own if isinstance(own, str) and own else type(model).__name__


def _specs(tools: list[Tool], handoffs: list[Handoff]) -> list[ToolSpec]:
    specs = []
    for tool in tools:
        schema = getattr(tool, "params_json_schema", None)
        description = getattr(tool, "description", None)
        specs.append(
            ToolSpec(
                str(getattr(tool, "name", type(tool).__name__)),
                description if isinstance(description, str) else "",
                plain(schema) if isinstance(schema, Mapping) else {},
            )
        )
    for handoff in handoffs:
        specs.append(
            ToolSpec(handoff.tool_name, handoff.tool_description, plain(handoff.input_json_schema))
        )
    return specs


def model_call(
    name: str,
    system_instructions: str | None,
    items: str | list[TResponseInputItem],
    settings: ModelSettings,
    tools: list[Tool],
    output_schema: AgentOutputSchemaBase | None,
    handoffs: list[Handoff],
    extra: Mapping[str, Any],
) -> ModelCall:
    """The model call for one ``get_response``: the system instructions as the first
    message, then the SDK's input items as it sends them (Responses items, JSON)."""
    messages: list[dict[str, Any]] = []
    if system_instructions:
        messages.append({"role": "system", "content": system_instructions})
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
    else:
        messages.extend(m if isinstance(m, dict) else {"item": m} for m in plain(items))
    params: dict[str, Any] = {
        k: v for k, v in settings.to_json_dict().items() if v is not None and v != {}
    }
    if output_schema is not None and not output_schema.is_plain_text():
        params["output_schema"] = plain(output_schema.json_schema())
    params.update({k: plain(v) for k, v in extra.items() if v is not None})
    return ModelCall(f"llm:{name}", messages, _specs(tools, handoffs), params)


def recorded(response: ModelResponse, name: str) -> dict[str, Any]:
    """What the journal keeps of the SDK's response."""
    output = plain(response.output)
    usage = serialize_usage(response.usage)
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in output:
        kind = item.get("type")
        if kind == "message":
            texts.extend(
                str(part.get("text") or "")
                for part in item.get("content") or ()
                if part.get("type") == "output_text"
            )
        elif kind == "function_call":
            try:
                arguments = json.loads(item.get("arguments") or "{}")
            except ValueError:
                arguments = {"raw": item.get("arguments")}
            calls.append(
                {
                    "id": item.get("call_id"),
                    "name": item.get("name"),
                    "arguments": arguments if isinstance(arguments, dict) else {"value": arguments},
                }
            )
    tokens_in, tokens_out = (
        int(usage.get("input_tokens") or 0),
        int(usage.get("output_tokens") or 0),
    )
    details = usage.get("input_tokens_details")
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, Mapping) else 0
    negative = below_zero(
        {"input_tokens": tokens_in, "output_tokens": tokens_out, "cached_tokens": cached}
    )
    if negative:
        raise ModelTransientError(name, negative)
    price = lookup_price(name, "openai")
    return {
        "content": "".join(texts) if texts else None,
        "tool_calls": calls,
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "cached_tokens": cached,
        # Unpriced is unknown, never zero.
        "cost_usd": None if price is None else price.cost(tokens_in, tokens_out, cached),
        "model": name,
        "stop_reason": "tool_calls" if calls else "stop",
        PAYLOAD: {
            "output": output,
            "usage": usage,
            "response_id": response.response_id,
            "request_id": response.request_id,
        },
    }


def restored(payload: Mapping[str, Any]) -> ModelResponse:
    """The SDK's ModelResponse from what :func:`recorded` kept."""
    return ModelResponse(
        output=_OUTPUT.validate_python(payload.get("output") or []),
        usage=deserialize_usage(payload.get("usage") or {}),
        response_id=payload.get("response_id"),
        request_id=payload.get("request_id"),
    )


class DurableModel(Model):
    """A model whose requests are journaled calls of the running savegame step (outside
    one, the wrapped model as it is)."""

    def __init__(self, inner: Model, name: str | None = None) -> None:
        self.inner = inner
        self.name = label_of(inner, name)

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        async def ask() -> ModelResponse:
            return await self.inner.get_response(
                system_instructions, input, model_settings, tools, output_schema, handoffs,
                tracing, previous_response_id=previous_response_id,
                conversation_id=conversation_id, prompt=prompt,
            )  # fmt: skip

        ctx = _scope.current()
        if ctx is None:
            return await ask()
        calls = _scope.calls_of(ctx)
        extra = {
            "previous_response_id": previous_response_id,
            "conversation_id": conversation_id,
            "prompt": prompt,
        }
        call = model_call(
            self.name, system_instructions, input, model_settings, tools, output_schema,
            handoffs, extra,
        )  # fmt: skip

        async def recorded_answer(request_id: str) -> dict[str, Any]:
            return recorded(await ask(), self.name)

        kept = await journaled_model_call(
            ctx, calls, call, recorded_answer, system="openai-agents", payload=PAYLOAD,
            recorded_by="an Agents SDK run", payload_type=Mapping,
        )  # fmt: skip
        return restored(kept[PAYLOAD])

    def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        if _scope.current() is not None:
            # A stream's events reach the caller before the answer is whole: nothing a
            # replay could hand back the same way. The durable runner runs non-streamed.
            raise ConfigurationError(
                f"llm:{self.name}: a streamed Agents SDK run (Runner.run_streamed, an agent "
                "tool's on_stream=) is not journaled; run it with savegame's runner"
            )
        return self.inner.stream_response(
            system_instructions, input, model_settings, tools, output_schema, handoffs,
            tracing, previous_response_id=previous_response_id,
            conversation_id=conversation_id, prompt=prompt,
        )  # fmt: skip

    def get_retry_advice(self, request: Any) -> Any:
        return self.inner.get_retry_advice(request)

    async def close(self) -> None:
        await self.inner.close()


class DurableProvider(ModelProvider):
    """The run's model provider, its models wrapped in :class:`DurableModel`."""

    def __init__(self, inner: ModelProvider) -> None:
        self.inner = inner

    def get_model(self, model_name: str | None) -> Model:
        return DurableModel(self.inner.get_model(model_name), model_name)

    async def aclose(self) -> None:
        await self.inner.aclose()
