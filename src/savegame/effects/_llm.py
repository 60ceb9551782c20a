"""Model calls as effects: the ChatModel protocol, its records, and what a call is journaled as.

The records (``ModelResponse``, ``ToolCall``, ``ToolSpec``) are registered with
the codec under stable names, so they may sit in a run's state or a tool's
result as pure data. Messages are plain dicts in the OpenAI shape (``role``,
``content``, ``tool_calls``, ``tool_call_id``). The rules of a model call (one
journal entry, committed complete before the step sees the response, replayed
on re-execution) are in ``_calls.py``; ``ctx.llm`` puts them together.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from savegame.codec import decode_value, register
from savegame.effects._tools import Tool
from savegame.errors import ConfigurationError, ModelTransientError
from savegame.model import EffectKind, EffectRecord

Message = dict[str, Any]

_JSON_TYPES = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}


@register(name="savegame.ToolCall")
@dataclass(frozen=True, slots=True)
class ToolCall:
    """A model's request to call one tool."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": dict(self.arguments)}


@register(name="savegame.ToolSpec")
@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What a model is told about a tool."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments."""


@register(name="savegame.ModelResponse")
@dataclass(frozen=True, slots=True)
class ModelResponse:
    """One model turn: text, tool calls, or both, with its token usage and cost."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int = 0
    """Prompt tokens, those read from a prompt cache included."""
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    """What the call cost; None when its price is unknown (never a guess)."""
    cached_tokens: int = 0
    """Of ``input_tokens``, those read from the provider's prompt cache."""
    model: str | None = None
    """The model that answered, as the provider names it (``gpt-4o-2024-08-06``)."""
    stop_reason: str | None = None
    """Why the model stopped (``stop``, ``tool_calls``, ``end_turn``, ``max_tokens`` ...)."""
    output: Any = None
    """Structured output: the answer parsed as JSON, when the model was asked for a schema."""

    def to_dict(self) -> dict[str, Any]:
        """Pure data, for the journal."""
        data: dict[str, Any] = {
            "content": self.content,
            "tool_calls": [call.to_dict() for call in self.tool_calls],
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
        }
        # Only what is set, so the entries of models that set none are the bytes they were.
        if self.cached_tokens:
            data["cached_tokens"] = self.cached_tokens
        for key in ("model", "stop_reason", "output"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelResponse:
        return as_response(data, 0)

    def to_message(self) -> Message:
        message: Message = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        return message


class ChatModel(Protocol):
    """Anything that turns messages (and tool specs) into a response.

    ``complete`` may be a plain or an async method. Optional attributes the runtime
    reads when they are there:

    - ``name`` (``"gpt-4o"``): the journal names its calls ``llm:<name>`` (else
      ``llm:<class name>``), and a re-executed step that asks another model at a
      journaled position is refused;
    - ``params``: what else the model is asked with (temperature, an output schema, the
      server's URL), pure data, recorded with each call's request;
    - ``acomplete``: an async twin of ``complete``, which ``ctx.allm`` prefers;
    - ``stream(messages, tools, on_chunk)`` (and ``astream``): ``complete`` calling
      ``on_chunk`` with each piece of text as it arrives, for ``ctx.llm(stream=...)``.

    The adapters of ``savegame.models`` (OpenAI, Anthropic, LiteLLM) implement it over
    the vendors' SDKs, each an optional extra; the runtime itself depends on none.
    """

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]
    ) -> ModelResponse | Awaitable[ModelResponse]: ...


ScriptItem = ModelResponse | str | Mapping[str, Any]


def as_response(item: ScriptItem, index: int) -> ModelResponse:
    """A ModelResponse from itself, a final answer's text, or its ``to_dict`` form."""
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
    cost = item.get("cost_usd", 0.0)
    return ModelResponse(
        content=item.get("content"),
        tool_calls=calls,
        input_tokens=int(item.get("input_tokens", 0)),
        output_tokens=int(item.get("output_tokens", 0)),
        cost_usd=None if cost is None else float(cost),
        cached_tokens=int(item.get("cached_tokens", 0)),
        model=item.get("model"),
        stop_reason=item.get("stop_reason"),
        output=item.get("output"),
    )


def tool_spec(fn: Callable[..., Any], name: str | None = None) -> ToolSpec:
    """Describe a plain function as a tool: its name, first doc line and a JSON schema."""
    props: dict[str, Any] = {}
    required: list[str] = []
    try:
        # ``from __future__ import annotations`` makes every annotation a string.
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or param.name == "request_id":
            continue
        annotation = hints.get(param.name, param.annotation)
        kind = _JSON_TYPES.get(annotation) if not isinstance(annotation, str) else None
        props[param.name] = {"type": kind} if kind else {}
        if param.default is param.empty:
            required.append(param.name)
    doc = (inspect.getdoc(fn) or "").strip().splitlines()
    return ToolSpec(
        name=name or fn.__name__,
        description=doc[0] if doc else "",
        parameters={"type": "object", "properties": props, "required": required},
    )


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model call as the journal sees it: which model, asked what."""

    name: str
    """``llm:<model name>``: the journal entry's name."""
    messages: list[Message]
    specs: list[ToolSpec]
    params: dict[str, Any] = field(default_factory=dict)
    """The model's ``params`` (temperature, output schema ...), recorded with the request."""

    @classmethod
    def of(
        cls,
        model: Any,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[ToolSpec | Tool | Callable[..., Any]],
    ) -> ModelCall:
        if not callable(getattr(model, "complete", None)):
            raise ConfigurationError(f"{model!r} is not a ChatModel: it has no complete() method")
        label = getattr(model, "name", None)
        if not isinstance(label, str) or not label:
            label = type(model).__name__
        params = getattr(model, "params", None)
        if params is not None and not isinstance(params, Mapping):
            raise ConfigurationError(f"model {label}: params must be a mapping, not {params!r}")
        return cls(
            f"llm:{label}",
            [dict(m) for m in messages],
            [_as_spec(t) for t in tools],
            dict(params or {}),
        )

    @property
    def request(self) -> dict[str, Any]:
        """What the journal's digest covers (the shape the agent loop always used)."""
        return {"messages": self.messages, "tools": [spec.name for spec in self.specs]}

    @property
    def summary(self) -> dict[str, Any]:
        """Kept beside the digest so a mismatch reads as more than two hashes."""
        return {"messages": len(self.messages), "tools": [spec.name for spec in self.specs]}

    def matches(self, entry: EffectRecord, digest: str) -> bool:
        """Whether ``entry`` records this call: the same model asked for the same digest."""
        if entry.kind is not EffectKind.LLM or entry.name != self.name:
            return False
        # Entries written before format 2 of the journal kept the digest in metadata.
        legacy = entry.metadata.get("called_with")
        if legacy is not None:
            return bool(legacy == digest)
        recorded = decode_value(entry.arguments)
        return isinstance(recorded, dict) and recorded.get("digest") == digest

    def checked(self, out: Any) -> ModelResponse:
        """The model's answer, or a ConfigurationError naming what it returned instead."""
        if inspect.isawaitable(out):
            if inspect.iscoroutine(out):
                out.close()  # never awaited: say so once, not as a RuntimeWarning later
            raise ConfigurationError(
                f"model {self.name} is async: call it with `await ctx.allm(...)` from an async step"
            )
        if not isinstance(out, ModelResponse):
            raise ConfigurationError(
                f"model {self.name} returned {type(out).__name__}, not a ModelResponse"
            )
        negative = below_zero(out.to_dict())
        if negative:
            raise ModelTransientError(self.name.removeprefix("llm:"), negative)
        return out


USAGE_KEYS = ("input_tokens", "output_tokens", "cached_tokens", "cost_usd")


def below_zero(usage: Mapping[str, Any]) -> str | None:
    """Why a model's answer is refused for its usage (a count or a cost below zero), or
    None. Usage is added to the run's and checked against its budgets: a server that
    answers ``prompt_tokens: -1000000`` must not buy a run more room."""
    wrong = [
        f"{key}={usage[key]}"
        for key in USAGE_KEYS
        if isinstance(usage.get(key), (int, float)) and usage[key] < 0
    ]
    return f"answered usage below zero ({', '.join(wrong)})" if wrong else None


def _as_spec(item: ToolSpec | Tool | Callable[..., Any]) -> ToolSpec:
    if isinstance(item, ToolSpec):
        return item
    if isinstance(item, Tool):
        return tool_spec(item.fn, item.name)
    if callable(item):
        return tool_spec(item)
    raise ConfigurationError(f"{item!r} is not a ToolSpec, a tool or a function")
