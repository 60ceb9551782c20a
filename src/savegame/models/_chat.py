"""The Chat Completions wire format (OpenAI's, and every server that copies it, LiteLLM's
too): savegame's messages as that API takes them, and its answer read back.

savegame's messages are OpenAI's with flat tool calls (``{"id", "name", "arguments"}``,
arguments a dict) and tool results whose content may be any pure data; both are
rewritten here (arguments and results as JSON text). A message already in the API's
own shape (a tool call with ``function``) passes as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from savegame.effects import ToolCall, ToolSpec
from savegame.errors import ConfigurationError
from savegame.models._base import Parsed, Schema, arguments_of, number, text_of


def role_of(message: Mapping[str, Any], index: int) -> str:
    role = message.get("role")
    if not isinstance(role, str):
        raise ConfigurationError(f"messages[{index}] has no role: {dict(message)!r:.200}")
    return role


def messages(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for index, message in enumerate(items):
        role = role_of(message, index)
        if role == "tool":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": message.get("tool_call_id"),
                    "content": text_of(message.get("content")),
                }
            )
        elif role == "assistant":
            said: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
            if message.get("tool_calls"):
                said["tool_calls"] = [_call(c) for c in message["tool_calls"]]
            out.append(said)
        else:
            content = message.get("content")
            plain = (
                content if isinstance(content, (str, list)) or content is None else text_of(content)
            )
            out.append({**message, "content": plain})
    return out


def _call(call: Mapping[str, Any]) -> dict[str, Any]:
    if "function" in call:
        return dict(call)
    return {
        "id": call.get("id"),
        "type": "function",
        "function": {"name": call["name"], "arguments": text_of(call.get("arguments") or {})},
    }


def tools(specs: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": s.name, "description": s.description, "parameters": s.parameters},
        }
        for s in specs
    ]


def response_format(schema: Schema) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": schema.name, "schema": schema.schema}}


def parse(model: str, data: Mapping[str, Any]) -> Parsed:
    choice = data["choices"][0]
    message = choice.get("message") or {}
    calls = tuple(
        ToolCall(
            id=str(call.get("id") or f"call_{n}"),
            name=str(call["function"]["name"]),
            arguments=arguments_of(model, call["function"].get("arguments")),
        )
        for n, call in enumerate(message.get("tool_calls") or ())
    )
    usage = data.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    return Parsed(
        content=message.get("content"),
        tool_calls=calls,
        input_tokens=number(usage, "prompt_tokens"),
        output_tokens=number(usage, "completion_tokens"),
        cached_tokens=number(details, "cached_tokens"),
        model=data.get("model"),
        stop_reason=choice.get("finish_reason"),
    )
