"""The ChatModel protocol and ScriptedModel, a deterministic model for demos and tests.

Messages are plain dicts in the OpenAI shape (``role``, ``content``,
``tool_calls``, ``tool_call_id``) so they live in the state as pure data.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from savegame.errors import ConfigurationError

Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A model's request to call one tool."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": dict(self.arguments)}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What a model is told about a tool."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments."""


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """One model turn: text, tool calls, or both, with its token usage and cost."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Pure data, for the journal."""
        return {
            "content": self.content,
            "tool_calls": [call.to_dict() for call in self.tool_calls],
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelResponse:
        return _as_response(data, 0)

    def to_message(self) -> Message:
        message: Message = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        return message


class ChatModel(Protocol):
    """Anything that turns messages (and tool specs) into a response.

    ``complete`` may be a plain or an async method. Adapters for vendors live
    outside the runtime; the runtime depends on none of them.
    """

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]
    ) -> ModelResponse | Awaitable[ModelResponse]: ...


ScriptItem = ModelResponse | str | Mapping[str, Any]


def _as_response(item: ScriptItem, index: int) -> ModelResponse:
    if isinstance(item, ModelResponse):
        return item
    if isinstance(item, str):
        return ModelResponse(content=item)
    calls = tuple(
        ToolCall(
            id=str(call.get("id") or f"call_{index}_{n}"),
            name=str(call["name"]),
            arguments=dict(call.get("arguments") or {}),
        )
        for n, call in enumerate(item.get("tool_calls") or ())
    )
    return ModelResponse(
        content=item.get("content"),
        tool_calls=calls,
        input_tokens=int(item.get("input_tokens", 0)),
        output_tokens=int(item.get("output_tokens", 0)),
        cost_usd=float(item.get("cost_usd", 0.0)),
    )


class ScriptedModel:
    """Plays back a fixed list of responses, one per model turn.

    The response for a call is chosen by the number of assistant messages
    already in the conversation, not by a counter in memory, so a run resumed
    in a fresh process gets exactly the response it would have got. Items are
    ModelResponse objects, plain strings (a final answer) or dicts like
    ``{"tool_calls": [{"name": "lookup", "arguments": {...}}]}``.

    Token usage, when not given, is estimated at four characters per token so
    that usage counters move in demos.
    """

    def __init__(self, responses: Sequence[ScriptItem], *, cost_per_token: float = 0.0) -> None:
        self._responses = [_as_response(item, i) for i, item in enumerate(responses)]
        self._cost_per_token = cost_per_token

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if turn >= len(self._responses):
            raise ConfigurationError(
                f"ScriptedModel has {len(self._responses)} responses but was asked for turn {turn + 1}"
            )
        response = self._responses[turn]
        if response.input_tokens or response.output_tokens:
            return response
        prompt = sum(len(str(m.get("content") or "")) for m in messages)
        answer = len(response.content or "") + sum(
            len(str(c.arguments)) for c in response.tool_calls
        )
        inp, out = max(prompt // 4, 1), max(answer // 4, 1)
        return ModelResponse(
            response.content,
            response.tool_calls,
            inp,
            out,
            round((inp + out) * self._cost_per_token, 10),
        )
