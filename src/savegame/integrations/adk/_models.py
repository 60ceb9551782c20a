"""An ADK model request as a savegame model call (``ctx.llm``'s journal entry).

The entry is an ``llm`` entry like every model call of a run: its request (the system
instruction and the contents, the tool declarations, the generation settings) is kept
by parts, each message once per run (:mod:`savegame.effects._prompts`), so
``model_calls`` shows what the model was asked and ``model_usage`` what it cost; a
replay compares the digest of the messages and the tool names. What ADK makes anew on
each execution of the same request is left out: the ``adk-`` ids it gives function
calls a model left without one, and the request's HTTP options (headers carry keys).

The recorded response is savegame's ``ModelResponse`` form (text, tool calls, tokens,
cost: what people and ``model_usage`` read) with ADK's own ``LlmResponse`` beside it
under :data:`PAYLOAD` (its JSON dump), which is what a replay hands back to ADK. A
function call the model gave no id gets one here, before the response is recorded:
derived from the call's request id, so the session events a resumed step rebuilds pair
each call with its response exactly as the first execution did.
"""

from __future__ import annotations

from typing import Any

from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse

from savegame.effects import ModelCall, ToolSpec, below_zero
from savegame.errors import ModelTransientError
from savegame.models import lookup_price

PAYLOAD = "adk"
"""The key of a recorded response that holds ADK's LlmResponse (its JSON dump)."""

_UNRECORDED_CONFIG = frozenset({"system_instruction", "tools", "http_options", "labels"})
"""Settings kept elsewhere in the entry (the instruction, the tools) or never (HTTP
headers may carry credentials; labels are ADK's billing tags)."""


def _plain(model: Any) -> Any:
    return model.model_dump(mode="json", exclude_none=True)


def _without_client_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _without_client_ids(v)
            for k, v in value.items()
            if not (k == "id" and isinstance(v, str) and v.startswith("adk-"))
        }
    if isinstance(value, list):
        return [_without_client_ids(v) for v in value]
    return value


def model_call(model: str, request: LlmRequest) -> ModelCall:
    """The model call for one ADK request to ``model``."""
    config = request.config
    messages: list[dict[str, Any]] = []
    if config is not None and config.system_instruction is not None:
        instruction = config.system_instruction
        text = instruction if isinstance(instruction, str) else _plain_instruction(instruction)
        messages.append({"role": "system", "content": text})
    messages += [_without_client_ids(_plain(content)) for content in request.contents]
    specs: list[ToolSpec] = []
    for tool in (config.tools if config is not None else None) or ():
        for declaration in getattr(tool, "function_declarations", None) or ():
            schema = declaration.parameters_json_schema
            if schema is None and declaration.parameters is not None:
                schema = _plain(declaration.parameters)
            specs.append(
                ToolSpec(declaration.name or "", declaration.description or "", schema or {})
            )
    params: dict[str, Any] = {}
    if config is not None:
        params = {k: v for k, v in _plain(config).items() if k not in _UNRECORDED_CONFIG}
    return ModelCall(f"llm:{model}", messages, specs, params)


def _plain_instruction(instruction: Any) -> Any:
    dumped = _plain(instruction) if hasattr(instruction, "model_dump") else instruction
    if isinstance(dumped, dict) and isinstance(dumped.get("parts"), list):
        texts = [p.get("text") for p in dumped["parts"] if isinstance(p, dict)]
        if all(isinstance(t, str) for t in texts):
            return "".join(texts)  # type: ignore[arg-type]
    return dumped


def with_call_ids(response: LlmResponse, request_id: str) -> None:
    """Give each function call without an id one derived from ``request_id``."""
    parts = response.content.parts if response.content is not None else None
    for n, part in enumerate(parts or ()):
        call = part.function_call
        if call is not None and not call.id:
            # ADK's prefix: ADK strips these before the model sees them, as its own.
            call.id = f"adk-{request_id}-{n}"


def call_ids(response: LlmResponse) -> list[str]:
    """The ids of the response's function calls, in the model's order."""
    parts = response.content.parts if response.content is not None else None
    return [p.function_call.id for p in parts or () if p.function_call and p.function_call.id]


def recorded(response: LlmResponse, model: str) -> dict[str, Any]:
    """What the journal keeps of ADK's response."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    parts = response.content.parts if response.content is not None else None
    for part in parts or ():
        if part.function_call is not None:
            calls.append(
                {
                    "id": part.function_call.id,
                    "name": part.function_call.name,
                    "arguments": dict(part.function_call.args or {}),
                }
            )
        elif part.text and not part.thought:
            texts.append(part.text)
    usage = response.usage_metadata
    tokens_in = int(usage.prompt_token_count or 0) if usage else 0
    tokens_out = int(usage.candidates_token_count or 0) if usage else 0
    tokens_out += int(usage.thoughts_token_count or 0) if usage else 0
    cached = int(usage.cached_content_token_count or 0) if usage else 0
    name = response.model_version or model
    negative = below_zero(
        {"input_tokens": tokens_in, "output_tokens": tokens_out, "cached_tokens": cached}
    )
    if negative:
        raise ModelTransientError(name, negative)
    price = lookup_price(name, "gemini") or lookup_price(model, "gemini")
    finish = response.finish_reason
    return {
        "content": "".join(texts) if texts else None,
        "tool_calls": calls,
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "cached_tokens": cached,
        # Unpriced is unknown, never zero.
        "cost_usd": None if price is None else price.cost(tokens_in, tokens_out, cached),
        "model": name,
        "stop_reason": finish.value if finish is not None else None,
        PAYLOAD: _plain(response),
    }


def response_of(kept: dict[str, Any]) -> LlmResponse:
    """ADK's response, as recorded."""
    return LlmResponse.model_validate(kept[PAYLOAD])
