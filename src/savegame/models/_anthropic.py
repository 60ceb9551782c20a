"""``savegame.models.Anthropic``: a ChatModel over the ``anthropic`` SDK (``savegame[anthropic]``).

The Messages API differs from savegame's (OpenAI-shaped) messages in three ways, all
rewritten here: system messages go in ``system``; a tool call is a ``tool_use`` block
of the assistant's message and its result a ``tool_result`` block of a user message;
consecutive messages of one role are one message (parallel tool calls' results are
sent together, as the API asks). Usage: Anthropic counts cache reads and cache writes
apart from ``input_tokens``; savegame's ``input_tokens`` is their sum, as OpenAI's is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from savegame.effects import ToolCall, ToolSpec
from savegame.models._base import (
    Adapter,
    OnChunk,
    Parsed,
    fitted,
    number,
    options,
    require,
    text_of,
)
from savegame.models._chat import role_of
from savegame.models._prices import Price

DEFAULT_MAX_TOKENS = 4096
"""The Messages API requires ``max_tokens``; this unless ``max_tokens=`` is given."""


def _blocks(content: Any) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if isinstance(content, list):
        return [dict(block) for block in content]
    return [{"type": "text", "text": text_of(content)}]


def _input(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, str):
        parsed = json.loads(arguments) if arguments else {}
        return parsed if isinstance(parsed, dict) else {}
    return dict(arguments or {})


def conversation(items: Sequence[Mapping[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """(the system prompt, the messages) as the Messages API takes them."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for index, message in enumerate(items):
        role = role_of(message, index)
        content = message.get("content")
        if role in ("system", "developer"):
            system.append(text_of(content))
            continue
        if role == "tool":
            role, blocks = (
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": message.get("tool_call_id"),
                        "content": text_of(content),
                    }
                ],
            )
        elif role == "assistant":
            blocks = _blocks(content)
            for call in message.get("tool_calls") or ():
                function = call.get("function") or call
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.get("id"),
                        "name": function["name"],
                        "input": _input(function.get("arguments")),
                    }
                )
        else:
            blocks = _blocks(content)
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return ("\n\n".join(system) if system else None), out


class Anthropic(Adapter):
    """A Claude model over the Messages API.

    Args:
        model: the model's name (``claude-sonnet-4-5``).
        base_url: another server that speaks the protocol.
        api_key: the key; by default the SDK reads ``ANTHROPIC_API_KEY``. Never recorded.
        max_tokens: the answer's limit (the API requires one).
        max_retries, timeout, output, price, client, async_client, **settings: as for
            :class:`~savegame.models.OpenAI`.
    """

    provider = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_retries: int = 0,
        timeout: float | None = None,
        output: Any = None,
        price: Price | None = None,
        client: Any = None,
        async_client: Any = None,
        **settings: Any,
    ) -> None:
        super().__init__(
            model,
            output=output,
            price=price,
            client=client,
            async_client=async_client,
            settings={"max_tokens": max_tokens, **settings},
        )
        self.base_url = base_url
        self._options = options(
            max_retries=max_retries, base_url=base_url, api_key=api_key, timeout=timeout
        )

    def describe(self) -> dict[str, Any]:
        return {} if self.base_url is None else {"base_url": self.base_url}

    def new_client(self, asynchronous: bool) -> Any:
        sdk = require("anthropic", "anthropic", "Anthropic")
        return (sdk.AsyncAnthropic if asynchronous else sdk.Anthropic)(**self._options)

    def body(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]
    ) -> dict[str, Any]:
        system, said = conversation(messages)
        body: dict[str, Any] = {"model": self.name, "messages": said}
        if system is not None:
            body["system"] = system
        if tools:
            body["tools"] = [
                {"name": s.name, "description": s.description, "input_schema": s.parameters}
                for s in tools
            ]
        if self.schema is not None:
            body["output_config"] = {
                "format": {"type": "json_schema", "schema": self.schema.schema}
            }
        return {**body, **self.settings}

    def send(self, client: Any, body: dict[str, Any]) -> Any:
        return client.messages.create(**fitted(client.messages.create, body))

    async def asend(self, client: Any, body: dict[str, Any]) -> Any:
        return await client.messages.create(**fitted(client.messages.create, body))

    def send_stream(self, client: Any, body: dict[str, Any], on_chunk: OnChunk) -> Any:
        with client.messages.stream(**fitted(client.messages.stream, body)) as events:
            for text in events.text_stream:
                on_chunk(text)
            return events.get_final_message()

    async def asend_stream(self, client: Any, body: dict[str, Any], on_chunk: OnChunk) -> Any:
        async with client.messages.stream(**fitted(client.messages.stream, body)) as events:
            async for text in events.text_stream:
                on_chunk(text)
            return await events.get_final_message()

    def parse(self, data: dict[str, Any]) -> Parsed:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in data.get("content") or ():
            if block.get("type") == "text":
                texts.append(block.get("text") or "")
            elif block.get("type") == "tool_use":
                calls.append(
                    ToolCall(str(block["id"]), str(block["name"]), dict(block.get("input") or {}))
                )
        usage = data.get("usage") or {}
        read = number(usage, "cache_read_input_tokens")
        write = number(usage, "cache_creation_input_tokens")
        return Parsed(
            content="".join(texts) if texts else None,
            tool_calls=tuple(calls),
            input_tokens=number(usage, "input_tokens") + read + write,
            output_tokens=number(usage, "output_tokens"),
            cached_tokens=read,
            cache_write_tokens=write,
            model=data.get("model"),
            stop_reason=data.get("stop_reason"),
        )

    def sdk_errors(self) -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
        sdk = require("anthropic", "anthropic", "Anthropic")
        return (sdk.APIStatusError,), (sdk.APIConnectionError,)
