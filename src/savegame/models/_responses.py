"""OpenAI's Responses API wire format: savegame's messages as input items, the output
items read back.

The API is used statelessly: each call sends the whole conversation (as the journal
records it) rather than a ``previous_response_id`` kept on the provider's side, so a
resumed or forked run asks exactly what its state holds. A tool call is a
``function_call`` item, its result a ``function_call_output``. Function tools are sent
with ``strict: false``: savegame's tool schemas are plain JSON schemas, not the
subset strict mode takes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from savegame.effects import ToolCall, ToolSpec
from savegame.models._base import Parsed, Schema, arguments_of, number, text_of
from savegame.models._chat import role_of


def items(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role = role_of(message, index)
        content = message.get("content")
        if role == "tool":
            out.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id"),
                    "output": text_of(content),
                }
            )
        elif role == "assistant":
            if content:
                out.append({"role": "assistant", "content": text_of(content)})
            for call in message.get("tool_calls") or ():
                function = call.get("function") or call
                out.append(
                    {
                        "type": "function_call",
                        "call_id": call.get("id"),
                        "name": function["name"],
                        "arguments": text_of(function.get("arguments") or {}),
                    }
                )
        else:
            plain = content if isinstance(content, (str, list)) else text_of(content)
            out.append({"role": role, "content": plain})
    return out


def tools(specs: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "name": s.name,
            "description": s.description,
            "parameters": s.parameters,
            "strict": False,
        }
        for s in specs
    ]


def text_format(schema: Schema) -> dict[str, Any]:
    return {
        "format": {
            "type": "json_schema",
            "name": schema.name,
            "schema": schema.schema,
            "strict": False,
        }
    }


def parse(model: str, data: Mapping[str, Any]) -> Parsed:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for item in data.get("output") or ():
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if part.get("type") == "output_text":
                    texts.append(part.get("text") or "")
        elif kind == "function_call":
            calls.append(
                ToolCall(
                    id=str(item.get("call_id") or item.get("id") or f"call_{len(calls)}"),
                    name=str(item["name"]),
                    arguments=arguments_of(model, item.get("arguments")),
                )
            )
    usage = data.get("usage") or {}
    details = usage.get("input_tokens_details") or {}
    incomplete = data.get("incomplete_details") or {}
    return Parsed(
        content="".join(texts) if texts else None,
        tool_calls=tuple(calls),
        input_tokens=number(usage, "input_tokens"),
        output_tokens=number(usage, "output_tokens"),
        cached_tokens=number(details, "cached_tokens"),
        model=data.get("model"),
        stop_reason=incomplete.get("reason") or data.get("status"),
    )
