"""What the adapters share: the SDK imported lazily, a client per event loop, one call with
its errors mapped, and the answer turned into a ModelResponse with its price.

An adapter is a ChatModel (``savegame.effects``): ``complete`` for ``ctx.llm``,
``acomplete`` for ``ctx.allm`` and the agent loop, ``name`` (the model) and ``params``
(what else it is asked with, recorded with each call). The SDK's own retries are off
by default (``max_retries=0``): a failed call raises a ModelTransientError or a
ModelRequestError, and the step's retry policy decides (each attempt checkpointed, its
wait resumed after a crash), not a loop inside the SDK that nobody records.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import enum
import importlib
import inspect
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from types import ModuleType
from typing import Any, ClassVar

from savegame.codec import encode_value
from savegame.effects import ModelResponse, ToolCall, ToolSpec
from savegame.errors import (
    ConfigurationError,
    ModelError,
    ModelRequestError,
    ModelTransientError,
    describe,
)
from savegame.models._prices import Price, lookup_price

OnChunk = Callable[[str], Any]

#: Statuses another attempt may get past, as the SDKs themselves retry them.
_TRANSIENT = {408, 409, 429}


#: The longest wait a provider's Retry-After is taken for: a header saying "an hour"
#: (or a hostile one saying "a year") must not park a step's thread that long.
MAX_RETRY_AFTER = 120.0


def retry_after(headers: Mapping[str, Any]) -> float | None:
    """The seconds a 429/503 answer asks to wait: ``retry-after-ms`` (OpenAI's and
    Anthropic's), else ``Retry-After`` in seconds or as an HTTP date; None when absent
    or unreadable, at most :data:`MAX_RETRY_AFTER`."""
    seconds: float | None = None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        seconds = _number(millis, 1000.0)
    if seconds is None:
        given = headers.get("retry-after")
        if given is not None:
            seconds = _number(given, 1.0)
            if seconds is None:
                seconds = _until(str(given))
    if seconds is None:
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def _number(text: Any, per_second: float) -> float | None:
    try:
        value = float(str(text).strip())
    except ValueError:
        return None
    return value / per_second if math.isfinite(value) else None


def _until(date: str) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(date)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return (when - datetime.now(timezone.utc)).total_seconds()


def require(module: str, extra: str, adapter: str) -> ModuleType:
    """Import an SDK, or say which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigurationError(
            f"savegame.models.{adapter} needs the {module} package: "
            f"pip install 'savegame[{extra}]' ({exc})"
        ) from exc


def options(**given: Any) -> dict[str, Any]:
    """The SDK client's options that were given (None: the SDK's default)."""
    return {key: value for key, value in given.items() if value is not None}


def fitted(method: Callable[..., Any], body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as an SDK's ``method`` (``messages.create``) takes it: a setting the method
    has no argument for goes in ``extra_body``, which the SDK sends in the request as it is.

    The SDKs add and drop arguments from one release to the next (anthropic 2.x's
    ``messages.create`` has no ``temperature``); a setting passed as a keyword the method
    does not take raises TypeError before any request, while the API still reads it.
    """
    try:
        accepted = inspect.signature(method).parameters
    except (TypeError, ValueError):  # a callable without a signature: pass it all
        return body
    if "extra_body" not in accepted or any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
        return body
    unknown = {key: value for key, value in body.items() if key not in accepted}
    if not unknown:
        return body
    given = body.get("extra_body")
    kept = {key: value for key, value in body.items() if key in accepted}
    kept["extra_body"] = {**unknown, **(given if isinstance(given, Mapping) else {})}
    return kept


def text_of(value: Any) -> str:
    """Content a provider takes as text: a string as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, default=_plain, ensure_ascii=False)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if callable(getattr(value, "model_dump", None)):
        return value.model_dump(mode="json")
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return str(value)


def as_data(raw: Any) -> dict[str, Any]:
    """An SDK's response object (a pydantic model) as plain dicts and lists."""
    if isinstance(raw, Mapping):
        return dict(raw)
    dump = getattr(raw, "model_dump", None)
    if callable(dump):
        data = dump()
        if isinstance(data, dict):
            return data
    raise TypeError(f"cannot read a {type(raw).__name__} as a response")


def arguments_of(model: str, text: Any) -> dict[str, Any]:
    """A tool call's arguments from the JSON text the model wrote."""
    if isinstance(text, Mapping):
        return dict(text)
    if text in (None, ""):
        return {}
    try:
        parsed = json.loads(text)
    except (TypeError, ValueError) as exc:
        # Asked again, a model usually writes valid JSON: transient, not the request's fault.
        raise ModelTransientError(
            model, f"answered with tool call arguments that are not JSON ({exc}): {text!r:.200}"
        ) from None
    if not isinstance(parsed, dict):
        raise ModelTransientError(model, f"answered with tool call arguments {parsed!r:.200}")
    return parsed


@dataclass(frozen=True, slots=True)
class Schema:
    """Structured output: a JSON schema the answer must follow."""

    name: str
    schema: dict[str, Any]

    @classmethod
    def of(cls, output: Any) -> Schema | None:
        if output is None:
            return None
        if isinstance(output, Mapping):
            title = output.get("title")
            return cls(title if isinstance(title, str) and title else "output", dict(output))
        dump = getattr(output, "model_json_schema", None)
        if isinstance(output, type) and callable(dump):
            return cls(output.__name__, dump())
        raise ConfigurationError(
            f"output must be a JSON schema (a dict) or a pydantic model class, not {output!r}"
        )


@dataclass(frozen=True, slots=True)
class Parsed:
    """A provider's answer, read: what becomes a ModelResponse."""

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int = 0
    """All prompt tokens, cached and cache-written included."""
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    model: str | None = None
    stop_reason: str | None = None


@dataclass
class _Clients:
    sync: Any = None
    loop: Any = None
    aio: Any = None


class Adapter(ABC):
    """A ChatModel over a vendor's SDK; subclasses say how to ask and how to read the answer."""

    provider: ClassVar[str]
    """The provider's name in LiteLLM's cost map (``openai``, ``anthropic``)."""

    def __init__(
        self,
        model: str,
        *,
        output: Any = None,
        price: Price | None = None,
        client: Any = None,
        async_client: Any = None,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigurationError(f"{type(self).__name__}: model must be a name, not {model!r}")
        if price is not None and not isinstance(price, Price):
            raise ConfigurationError(f"{type(self).__name__}: price must be a Price, not {price!r}")
        self.name = model
        self.schema = Schema.of(output)
        self.price = price if price is not None else lookup_price(model, self.provider)
        """Per million tokens; None when neither given nor in LiteLLM's cost map."""
        self.settings = dict(settings or {})
        """Passed to each request as they are (temperature, max_tokens ...)."""
        # Recorded with every call: refused now, by name, rather than at the first call.
        encode_value(self.settings, f"{type(self).__name__}({model!r}) settings")
        self._given = (client, async_client)
        self._clients = _Clients(sync=client)

    @property
    def params(self) -> dict[str, Any]:
        """What the journal records of this model's setup with each call's request."""
        params = {**self.settings, **self.describe()}
        if self.schema is not None:
            params["output"] = {"name": self.schema.name, "schema": self.schema.schema}
        return params

    def describe(self) -> dict[str, Any]:
        """More of the setup worth recording (the API used, the server's URL)."""
        return {}

    # -- what a subclass provides ------------------------------------------------------
    @abstractmethod
    def new_client(self, asynchronous: bool) -> Any:
        """The SDK's client (sync or async), with its own retries off unless asked."""

    @abstractmethod
    def body(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]
    ) -> dict[str, Any]:
        """The request's keyword arguments for the SDK."""

    @abstractmethod
    def send(self, client: Any, body: dict[str, Any]) -> Any: ...

    @abstractmethod
    async def asend(self, client: Any, body: dict[str, Any]) -> Any: ...

    @abstractmethod
    def send_stream(self, client: Any, body: dict[str, Any], on_chunk: OnChunk) -> Any:
        """Stream the answer, text pieces to ``on_chunk``; return the final message."""

    @abstractmethod
    async def asend_stream(self, client: Any, body: dict[str, Any], on_chunk: OnChunk) -> Any: ...

    @abstractmethod
    def parse(self, data: dict[str, Any]) -> Parsed:
        """The answer (as plain data) read."""

    @abstractmethod
    def sdk_errors(self) -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
        """(the SDK's HTTP status errors, its connection errors)."""

    # -- the call ----------------------------------------------------------------------
    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec] = ()
    ) -> ModelResponse:
        return self._ask(messages, tools, on=None)

    def stream(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec], on_chunk: OnChunk
    ) -> ModelResponse:
        """Like :meth:`complete`, calling ``on_chunk`` with each piece of text as it arrives."""
        return self._ask(messages, tools, on=on_chunk)

    async def acomplete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec] = ()
    ) -> ModelResponse:
        return await self._aask(messages, tools, on=None)

    async def astream(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec], on_chunk: OnChunk
    ) -> ModelResponse:
        return await self._aask(messages, tools, on=on_chunk)

    def _ask(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[ToolSpec],
        *,
        on: OnChunk | None,
    ) -> ModelResponse:
        body = self.body(messages, tools)
        if self._clients.sync is None:
            self._clients.sync = self.new_client(False)
        try:
            client = self._clients.sync
            raw = self.send(client, body) if on is None else self.send_stream(client, body, on)
        except Exception as exc:
            raise self._mapped(exc) from exc
        return self._response(raw)

    async def _aask(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[ToolSpec],
        *,
        on: OnChunk | None,
    ) -> ModelResponse:
        given_sync, given_async = self._given
        if given_sync is not None and given_async is None:
            # A client the user made is sync: call it from a thread, off the event loop.
            return await asyncio.to_thread(self._ask, messages, tools, on=on)
        body = self.body(messages, tools)
        try:
            client = self._async_client()
            if on is None:
                raw = await self.asend(client, body)
            else:
                raw = await self.asend_stream(client, body, on)
        except Exception as exc:
            raise self._mapped(exc) from exc
        return self._response(raw)

    def _async_client(self) -> Any:
        # An async client's connections belong to the event loop they were opened on; a
        # run in a new loop (each asyncio.run) gets its own client.
        given = self._given[1]
        if given is not None:
            return given
        loop = asyncio.get_running_loop()
        if self._clients.aio is None or self._clients.loop is not loop:
            self._clients.loop, self._clients.aio = loop, self.new_client(True)
        return self._clients.aio

    def _mapped(self, exc: Exception) -> Exception:
        """The SDK's failure as a ModelError savegame's retry policy understands."""
        if isinstance(exc, ModelError):
            return exc
        status_errors, connection_errors = self.sdk_errors()
        if isinstance(exc, connection_errors):
            return ModelTransientError(self.name, describe(exc))
        status = getattr(exc, "status_code", None)
        if not isinstance(exc, status_errors) or not isinstance(status, int):
            return exc
        headers = getattr(getattr(exc, "response", None), "headers", None) or {}
        ident = headers.get("x-request-id") or headers.get("request-id")
        # The provider may say itself whether retrying helps (OpenAI and Anthropic do).
        hint = str(headers.get("x-should-retry", "")).lower()
        transient = status in _TRANSIENT or status >= 500
        if hint in ("true", "false"):
            transient = hint == "true"
        if not transient:
            return ModelRequestError(
                self.name, _reason(exc), status=status, provider_request_id=ident
            )
        return ModelTransientError(
            self.name,
            _reason(exc),
            status=status,
            provider_request_id=ident,
            retry_after=retry_after(headers),
        )

    def _response(self, raw: Any) -> ModelResponse:
        try:
            parsed = self.parse(as_data(raw))
        except ModelError:
            raise
        except (TypeError, KeyError, IndexError, ValueError, AttributeError) as exc:
            raise ModelTransientError(
                self.name, f"answered something unreadable: {describe(exc)}"
            ) from exc
        output = None
        if self.schema is not None and not parsed.tool_calls:
            try:
                output = json.loads(parsed.content or "")
            except ValueError:
                raise ModelTransientError(
                    self.name,
                    f"answered text that is not the JSON asked for: {parsed.content!r:.200}",
                ) from None
        cost = None
        if self.price is not None:
            cost = self.price.cost(
                parsed.input_tokens,
                parsed.output_tokens,
                parsed.cached_tokens,
                parsed.cache_write_tokens,
            )
        return ModelResponse(
            content=parsed.content,
            tool_calls=parsed.tool_calls,
            input_tokens=parsed.input_tokens,
            output_tokens=parsed.output_tokens,
            cost_usd=cost,
            cached_tokens=parsed.cached_tokens,
            model=parsed.model,
            stop_reason=parsed.stop_reason,
            output=output,
        )


def _reason(exc: BaseException) -> str:
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) and message else describe(exc, with_type=False)


def number(usage: Mapping[str, Any], key: str) -> int:
    """A token count from a usage block (absent or None is 0).

    Raises:
        ValueError: a count below zero (read as an unreadable answer): it would take
            tokens and money off the run's usage, and budgets are checked against it.
    """
    value = usage.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        return 0
    if value < 0:
        raise ValueError(f"usage {key}={value} is below zero")
    return value
