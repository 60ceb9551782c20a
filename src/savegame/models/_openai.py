"""``savegame.models.OpenAI``: a ChatModel over the ``openai`` SDK (``savegame[openai]``).

Chat Completions by default, the Responses API with ``api="responses"``; any server
that speaks the same protocol (vLLM, llama.cpp's server, Ollama, a gateway) by
``base_url``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from savegame.effects import ToolSpec
from savegame.errors import ConfigurationError
from savegame.models import _chat, _responses
from savegame.models._base import Adapter, OnChunk, Parsed, fitted, options, require
from savegame.models._prices import Price

Api = Literal["chat", "responses"]

_USAGE = {"include_usage": True}
"""A streamed Chat Completion reports its usage only when asked to, in a last chunk."""


class OpenAI(Adapter):
    """An OpenAI model (or one behind any OpenAI-compatible server).

    Args:
        model: the model's name (``gpt-4o``); the journal names its calls ``llm:<model>``.
        api: ``"chat"`` (Chat Completions) or ``"responses"`` (the Responses API).
        base_url: another server that speaks the protocol (``http://localhost:8000/v1``).
        api_key: the key; by default the SDK reads ``OPENAI_API_KEY``. Never recorded.
        max_retries: the SDK's own retries within one attempt (0: a failed call raises
            at once, and the step's retry policy applies).
        timeout: seconds per request (the SDK's default when None).
        output: structured output: a JSON schema or a pydantic model class; the
            answer parsed is ``response.output``.
        price: per million tokens; by default LiteLLM's cost map's price for ``model``
            (none, and a cost of None, when it has none).
        client, async_client: SDK clients of your own (Azure, a custom transport) used
            instead of new ones; with ``client`` alone, async calls run it in a thread.
        **settings: passed to each request (``temperature``, ``max_tokens``, ``seed`` ...)
            and recorded with it; pure data.
    """

    provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        api: Api = "chat",
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 0,
        timeout: float | None = None,
        output: Any = None,
        price: Price | None = None,
        client: Any = None,
        async_client: Any = None,
        **settings: Any,
    ) -> None:
        if api not in ("chat", "responses"):
            raise ConfigurationError(f"OpenAI: api must be 'chat' or 'responses', not {api!r}")
        super().__init__(
            model,
            output=output,
            price=price,
            client=client,
            async_client=async_client,
            settings=settings,
        )
        self.api: Api = api
        self.base_url = base_url
        self._options = options(
            max_retries=max_retries, base_url=base_url, api_key=api_key, timeout=timeout
        )

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = {"api": self.api}
        if self.base_url is not None:
            described["base_url"] = self.base_url
        return described

    def new_client(self, asynchronous: bool) -> Any:
        sdk = require("openai", "openai", "OpenAI")
        return (sdk.AsyncOpenAI if asynchronous else sdk.OpenAI)(**self._options)

    def body(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]
    ) -> dict[str, Any]:
        if self.api == "responses":
            body: dict[str, Any] = {"model": self.name, "input": _responses.items(messages)}
            if tools:
                body["tools"] = _responses.tools(tools)
            if self.schema is not None:
                body["text"] = _responses.text_format(self.schema)
        else:
            body = {"model": self.name, "messages": _chat.messages(messages)}
            if tools:
                body["tools"] = _chat.tools(tools)
            if self.schema is not None:
                body["response_format"] = _chat.response_format(self.schema)
        return {**body, **self.settings}

    def send(self, client: Any, body: dict[str, Any]) -> Any:
        api = client.responses if self.api == "responses" else client.chat.completions
        return api.create(**fitted(api.create, body))

    async def asend(self, client: Any, body: dict[str, Any]) -> Any:
        api = client.responses if self.api == "responses" else client.chat.completions
        return await api.create(**fitted(api.create, body))

    def send_stream(self, client: Any, body: dict[str, Any], on_chunk: OnChunk) -> Any:
        if self.api == "responses":
            with client.responses.stream(**fitted(client.responses.stream, body)) as events:
                for event in events:
                    if event.type == "response.output_text.delta":
                        on_chunk(event.delta)
                return events.get_final_response()
        with client.chat.completions.stream(
            **fitted(client.chat.completions.stream, body), stream_options=_USAGE
        ) as events:
            for event in events:
                if event.type == "content.delta" and event.delta:
                    on_chunk(event.delta)
            return events.get_final_completion()

    async def asend_stream(self, client: Any, body: dict[str, Any], on_chunk: OnChunk) -> Any:
        if self.api == "responses":
            async with client.responses.stream(**fitted(client.responses.stream, body)) as events:
                async for event in events:
                    if event.type == "response.output_text.delta":
                        on_chunk(event.delta)
                return await events.get_final_response()
        async with client.chat.completions.stream(
            **fitted(client.chat.completions.stream, body), stream_options=_USAGE
        ) as events:
            async for event in events:
                if event.type == "content.delta" and event.delta:
                    on_chunk(event.delta)
            return await events.get_final_completion()

    def parse(self, data: dict[str, Any]) -> Parsed:
        if self.api == "responses":
            return _responses.parse(self.name, data)
        return _chat.parse(self.name, data)

    def sdk_errors(self) -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
        sdk = require("openai", "openai", "OpenAI")
        return (sdk.APIStatusError,), (sdk.APIConnectionError,)
