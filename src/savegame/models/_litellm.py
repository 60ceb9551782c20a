"""``savegame.models.LiteLLM``: a ChatModel over ``litellm`` (``savegame[litellm]``), one
interface to a hundred providers (``openai/gpt-4o``, ``anthropic/claude-sonnet-4-5``,
``ollama/llama3`` ...).

LiteLLM speaks Chat Completions whatever the provider, so its messages and answers are
those of :mod:`savegame.models._chat`; its errors are the ``openai`` SDK's classes, which
its own subclass. Importing ``litellm`` fetches its model cost map from the network
unless ``LITELLM_LOCAL_MODEL_COST_MAP=True`` is set; it is imported at the first call,
not when the adapter is made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from savegame.effects import ToolSpec
from savegame.models import _chat
from savegame.models._base import Adapter, OnChunk, Parsed, options, require
from savegame.models._prices import Price


class LiteLLM(Adapter):
    """Any model LiteLLM reaches, named as LiteLLM names it (``provider/model``).

    Args:
        model: LiteLLM's model name (``openai/gpt-4o``, ``anthropic/claude-sonnet-4-5``).
        base_url: the provider's server (LiteLLM's ``api_base``).
        api_key: the key; by default LiteLLM reads the provider's variable. Never recorded.
        max_retries: LiteLLM's own retries within one attempt (0: the step's policy applies).
        timeout, output, price, **settings: as for :class:`~savegame.models.OpenAI`.
    """

    provider = ""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 0,
        timeout: float | None = None,
        output: Any = None,
        price: Price | None = None,
        **settings: Any,
    ) -> None:
        super().__init__(model, output=output, price=price, settings=settings)
        self.base_url = base_url
        # Both: LiteLLM's retry loop (num_retries) and the openai client's it may use.
        self._options = options(
            api_base=base_url,
            api_key=api_key,
            timeout=timeout,
            num_retries=max_retries,
            max_retries=max_retries,
        )

    def describe(self) -> dict[str, Any]:
        return {} if self.base_url is None else {"base_url": self.base_url}

    def new_client(self, asynchronous: bool) -> Any:
        return require("litellm", "litellm", "LiteLLM")

    def body(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.name, "messages": _chat.messages(messages)}
        if tools:
            body["tools"] = _chat.tools(tools)
        if self.schema is not None:
            body["response_format"] = _chat.response_format(self.schema)
        return {**body, **self._options, **self.settings}

    def send(self, client: Any, body: dict[str, Any]) -> Any:
        return client.completion(**body)

    async def asend(self, client: Any, body: dict[str, Any]) -> Any:
        return await client.acompletion(**body)

    def send_stream(self, client: Any, body: dict[str, Any], on_chunk: OnChunk) -> Any:
        chunks = []
        for chunk in client.completion(**body, stream=True, stream_options=_USAGE):
            chunks.append(chunk)
            _deliver(chunk, on_chunk)
        return client.stream_chunk_builder(chunks, messages=body["messages"])

    async def asend_stream(self, client: Any, body: dict[str, Any], on_chunk: OnChunk) -> Any:
        chunks = []
        async for chunk in await client.acompletion(**body, stream=True, stream_options=_USAGE):
            chunks.append(chunk)
            _deliver(chunk, on_chunk)
        return client.stream_chunk_builder(chunks, messages=body["messages"])

    def parse(self, data: dict[str, Any]) -> Parsed:
        return _chat.parse(self.name, data)

    def sdk_errors(self) -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
        sdk = require("openai", "litellm", "LiteLLM")
        return (sdk.APIStatusError,), (sdk.APIConnectionError,)


_USAGE = {"include_usage": True}


def _deliver(chunk: Any, on_chunk: OnChunk) -> None:
    choices = getattr(chunk, "choices", None) or ()
    text = getattr(getattr(choices[0], "delta", None), "content", None) if choices else None
    if text:
        on_chunk(text)
