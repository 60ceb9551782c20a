"""ScriptedModel, a deterministic model for demos and tests.

The ChatModel protocol and its records (ModelResponse, ToolCall, ToolSpec) live
with the other effects, in ``savegame.effects``, because any step may call a
model through ``ctx.llm``; the agent package exports them as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from savegame.effects import ModelResponse, ToolSpec, as_response
from savegame.errors import ConfigurationError

ScriptItem = ModelResponse | str | Mapping[str, Any]


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
        self._responses = [as_response(item, i) for i, item in enumerate(responses)]
        self._cost_per_token = cost_per_token

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if turn >= len(self._responses):
            raise ConfigurationError(
                f"ScriptedModel has {len(self._responses)} responses but was asked for turn "
                f"{turn + 1}: the conversation holds {turn} assistant messages (a run on an "
                "existing thread continues its conversation, earlier turns included)"
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
