"""A local model provider for the tests: a real HTTP server that speaks OpenAI's Chat
Completions and Responses protocols and Anthropic's Messages protocol, answering from a
script, and keeping every request it got.

The adapters' tests point the real SDKs (``openai``, ``anthropic``, ``litellm``) at it,
so their HTTP clients, their parsing of the answers and their error classes all run.
Each path has its own queue of replies: a reply is an answer (built by :func:`chat`,
:func:`responses`, :func:`messages`) or an error (:func:`error`); a request that finds
its queue empty gets a 599 (no provider ever sends one), so a call nobody scripted
fails loudly rather than passing by chance. The server runs in the test's process on
a thread (pytest-httpserver over werkzeug): a crash test's child process asks it over
the network, and the test counts what was asked.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

CHAT, RESPONSES, MESSAGES = "/v1/chat/completions", "/v1/responses", "/v1/messages"

Call = tuple[str, dict[str, Any]]
"""A scripted tool call: (name, arguments)."""


@dataclass
class Reply:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Asked:
    """One request the server got."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]


class FakeProvider:
    """The server, its script and what it was asked."""

    def __init__(self) -> None:
        self.server = HTTPServer(host="127.0.0.1", threaded=True)
        self.server.expect_request(re.compile(".*")).respond_with_handler(self._handle)
        self._lock = threading.Lock()
        self._script: dict[str, list[Reply]] = {}
        self.asked: list[Asked] = []

    @property
    def root(self) -> str:
        """``http://127.0.0.1:<port>``: Anthropic's base URL."""
        return self.server.url_for("").rstrip("/")

    @property
    def openai_url(self) -> str:
        """``.../v1``: OpenAI's base URL."""
        return self.root + "/v1"

    def script(self, path: str, *replies: Reply) -> None:
        with self._lock:
            self._script.setdefault(path, []).extend(replies)

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.asked.clear()

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [a.body for a in self.asked if a.path == path]

    def _handle(self, request: Request) -> Response:
        with self._lock:
            self.asked.append(
                Asked(request.path, json.loads(request.get_data() or b"{}"), dict(request.headers))
            )
            queue = self._script.get(request.path) or []
            reply = queue.pop(0) if queue else Reply(599, {"error": {"message": "unscripted"}})
        return Response(
            json.dumps(reply.body),
            status=reply.status,
            headers=reply.headers,
            content_type="application/json",
        )


def serve() -> Iterator[FakeProvider]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    provider = FakeProvider()
    provider.server.start()
    try:
        yield provider
    finally:
        provider.server.clear()
        provider.server.stop()


def chat(
    content: str | None = None,
    calls: Sequence[Call] = (),
    *,
    usage: tuple[int, int, int] = (12, 5, 0),
    model: str = "gpt-4o-2024-08-06",
) -> Reply:
    """A Chat Completions answer: text, tool calls (several: parallel calls), usage
    (prompt, completion, cached)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for n, (name, args) in enumerate(calls)
        ]
    prompt, completion, cached = usage
    return Reply(
        200,
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1700000000,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        },
    )


def responses(
    content: str | None = None,
    calls: Sequence[Call] = (),
    *,
    usage: tuple[int, int, int] = (12, 5, 0),
    model: str = "gpt-4o-2024-08-06",
) -> Reply:
    """A Responses API answer: a message item and function_call items."""
    output: list[dict[str, Any]] = []
    if content is not None:
        output.append(
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": content, "annotations": []}],
            }
        )
    for n, (name, args) in enumerate(calls):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{n}",
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
        )
    prompt, completion, cached = usage
    return Reply(
        200,
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1700000000,
            "model": model,
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": prompt,
                "output_tokens": completion,
                "total_tokens": prompt + completion,
                "input_tokens_details": {"cached_tokens": cached},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        },
    )


def messages(
    content: str | None = None,
    calls: Sequence[Call] = (),
    *,
    usage: tuple[int, int, int, int] = (12, 5, 0, 0),
    model: str = "claude-sonnet-4-5-20250929",
) -> Reply:
    """An Anthropic Messages answer: text and tool_use blocks; usage is (input, output,
    cache read, cache write) as Anthropic counts them (input without the cache)."""
    blocks: list[dict[str, Any]] = []
    if content is not None:
        blocks.append({"type": "text", "text": content})
    for n, (name, args) in enumerate(calls):
        blocks.append({"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": args})
    prompt, completion, read, write = usage
    return Reply(
        200,
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": prompt,
                "output_tokens": completion,
                "cache_read_input_tokens": read,
                "cache_creation_input_tokens": write,
            },
        },
    )


def error(status: int, message: str = "scripted failure", **headers: str) -> Reply:
    """An error as both providers send one (OpenAI reads ``error.message``, Anthropic
    ``type: error`` with ``error.type``)."""
    kinds = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error"}
    body = {
        "type": "error",
        "error": {"type": kinds.get(status, "api_error"), "message": message, "code": None},
    }
    return Reply(status, body, {k.replace("_", "-"): v for k, v in headers.items()})
