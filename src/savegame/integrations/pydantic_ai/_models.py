"""A pydantic-ai model request as a savegame model call (``ctx.llm``'s journal entry).

The entry is an ``llm`` entry like every model call of a run: its request (the
messages, the tool definitions, the settings) is kept by parts, each message once per
run (:mod:`savegame.effects._prompts`), so ``model_calls`` shows what the model was
asked and ``model_usage`` what it cost; a replay compares the digest of the messages
and the tool names. The messages are pydantic-ai's, as its JSON codec writes them,
without what it makes anew on each execution of the same request (timestamps, the
run's ids): a resumed step's request must digest the same, a changed prompt must not.

The recorded response is savegame's ``ModelResponse`` form (text, tool calls, tokens,
cost: what people and ``model_usage`` read) with pydantic-ai's own response beside it
under :data:`PAYLOAD`, which is what a replay hands back to pydantic-ai.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.models import ModelRequestParameters

from savegame.effects import ModelCall, ToolSpec, below_zero
from savegame.errors import ModelTransientError
from savegame.integrations.pydantic_ai._entries import plain, stable
from savegame.models import lookup_price

PAYLOAD = "pydantic_ai"
"""The key of a recorded response that holds pydantic-ai's ModelResponse (JSON codec)."""


def model_call(model: str, cache_key: tuple[object, ...]) -> ModelCall:
    """The model call for a request; ``cache_key`` is pydantic-ai's projection of it
    (model id, messages, settings, request parameters, run context)."""
    _, messages, settings, parameters = cache_key[:4]
    dumped = ModelMessagesTypeAdapter.dump_python(cast(list[ModelMessage], messages), mode="json")
    specs: list[ToolSpec] = []
    if isinstance(parameters, ModelRequestParameters):
        for tool in [*parameters.function_tools, *parameters.output_tools]:
            specs.append(
                ToolSpec(tool.name, tool.description or "", plain(tool.parameters_json_schema))
            )
    params = stable(plain(settings)) if isinstance(settings, Mapping) else {}
    return ModelCall(f"llm:{model}", [stable(m) for m in dumped], specs, dict(params))


def recorded(payload: Any) -> dict[str, Any]:
    """What the journal keeps of pydantic-ai's response (its JSON codec's dump)."""
    response = payload if isinstance(payload, Mapping) else {}
    texts, calls = [], []
    for part in response.get("parts") or ():
        kind = part.get("part_kind")
        if kind == "text":
            texts.append(str(part.get("content") or ""))
        elif kind == "tool-call":
            arguments = part.get("args")
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments or "{}")
                except ValueError:
                    arguments = {"raw": arguments}
            calls.append(
                {
                    "id": part.get("tool_call_id"),
                    "name": part.get("tool_name"),
                    "arguments": arguments if isinstance(arguments, dict) else {},
                }
            )
    found = response.get("usage")
    usage: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    tokens_in = int(usage.get("input_tokens") or 0)
    tokens_out = int(usage.get("output_tokens") or 0)
    cached = int(usage.get("cache_read_tokens") or 0)
    name = response.get("model_name")
    negative = below_zero(
        {"input_tokens": tokens_in, "output_tokens": tokens_out, "cached_tokens": cached}
    )
    if negative:
        raise ModelTransientError(str(name or "pydantic-ai model"), negative)
    price = lookup_price(name, response.get("provider_name")) if isinstance(name, str) else None
    return {
        "content": "".join(texts) if texts else None,
        "tool_calls": calls,
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "cached_tokens": cached,
        # Unpriced is unknown, never zero.
        "cost_usd": None if price is None else price.cost(tokens_in, tokens_out, cached),
        "model": name,
        "stop_reason": response.get("finish_reason"),
        PAYLOAD: dict(response),
    }
