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
from collections.abc import Callable, Iterator, Sequence
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
    events: list[tuple[str | None, Any]] | None = None
    """A streamed answer: server-sent events, (event name or None, data)."""
    gate: threading.Event | None = None
    """The server answers once this is set (the request is in ``asked`` at once): a call
    a test holds in flight."""


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
        self._responders: dict[str, Callable[[dict[str, Any]], Reply]] = {}
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

    def respond(self, path: str, responder: Callable[[dict[str, Any]], Reply]) -> None:
        """Answer a request on ``path`` whose queue is empty with ``responder(body)``: a
        model that answers by what it is asked (a random-kill test cannot know how many
        answers a kill will cost)."""
        with self._lock:
            self._responders[path] = responder

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self._responders.clear()
            self.asked.clear()

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [a.body for a in self.asked if a.path == path]

    def _handle(self, request: Request) -> Response:
        with self._lock:
            self.asked.append(
                Asked(request.path, json.loads(request.get_data() or b"{}"), dict(request.headers))
            )
            queue = self._script.get(request.path) or []
            responder = self._responders.get(request.path)
            if queue:
                reply = queue.pop(0)
            elif responder is not None:
                reply = responder(self.asked[-1].body)
            else:
                reply = Reply(599, {"error": {"message": "unscripted"}})
        if reply.gate is not None:
            reply.gate.wait(60)
        if reply.events is not None:
            return Response(_sse(reply.events), status=200, content_type="text/event-stream")
        return Response(
            json.dumps(reply.body),
            status=reply.status,
            headers=reply.headers,
            content_type="application/json",
        )


def _sse(events: list[tuple[str | None, Any]]) -> Iterator[bytes]:
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        yield ((f"event: {name}\n" if name else "") + f"data: {text}\n\n").encode()


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
    call_ids: Sequence[str] = (),
) -> Reply:
    """A Chat Completions answer: text, tool calls (several: parallel calls), usage
    (prompt, completion, cached). ``call_ids`` names the tool calls (default
    ``call_<n>``: the OpenAI Agents SDK refuses an id reused across turns)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {
                "id": call_ids[n] if call_ids else f"call_{n}",
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
    call_ids: Sequence[str] = (),
) -> Reply:
    """A Responses API answer: a message item and function_call items (``call_ids`` as
    :func:`chat`'s)."""
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
                "id": f"fc_{call_ids[n] if call_ids else n}",
                "call_id": call_ids[n] if call_ids else f"call_{n}",
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


def chat_stream(pieces: Sequence[str], calls: Sequence[Call] = (), **kwargs: Any) -> Reply:
    """A streamed Chat Completion: the text in ``pieces``, each tool call's arguments in
    two fragments, then the usage chunk ``include_usage`` asks for, then ``[DONE]``."""
    whole = chat("".join(pieces) if pieces else None, calls, **kwargs).body
    head = {k: whole[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events: list[tuple[str | None, Any]] = [(None, chunk({"role": "assistant", "content": ""}))]
    events += [(None, chunk({"content": piece})) for piece in pieces]
    for n, call in enumerate(whole["choices"][0]["message"].get("tool_calls") or ()):
        args = call["function"]["arguments"]
        start = {"index": n, "id": call["id"], "type": "function"}
        events.append(
            (
                None,
                chunk(
                    {
                        "tool_calls": [
                            {
                                **start,
                                "function": {
                                    "name": call["function"]["name"],
                                    "arguments": args[:3],
                                },
                            }
                        ]
                    }
                ),
            )
        )
        events.append(
            (None, chunk({"tool_calls": [{"index": n, "function": {"arguments": args[3:]}}]}))
        )
    events.append((None, chunk({}, whole["choices"][0]["finish_reason"])))
    events.append((None, {**head, "choices": [], "usage": whole["usage"]}))
    events.append((None, "[DONE]"))
    return Reply(200, {}, events=events)


def responses_stream(pieces: Sequence[str], **kwargs: Any) -> Reply:
    """A streamed Responses API answer: its text deltas, then ``response.completed``."""
    final = responses("".join(pieces), **kwargs).body
    message = final["output"][0]
    started = {**final, "status": "in_progress", "output": [], "usage": None}
    events: list[tuple[str | None, Any]] = []

    def add(kind: str, **data: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": len(events), **data}))

    add("response.created", response=started)
    add(
        "response.output_item.added",
        output_index=0,
        item={**message, "status": "in_progress", "content": []},
    )
    part = {"type": "output_text", "text": "", "annotations": []}
    add(
        "response.content_part.added",
        item_id=message["id"],
        output_index=0,
        content_index=0,
        part=part,
    )
    for piece in pieces:
        add(
            "response.output_text.delta",
            item_id=message["id"], output_index=0, content_index=0, delta=piece, logprobs=[],
        )  # fmt: skip
    text = "".join(pieces)
    add(
        "response.output_text.done",
        item_id=message["id"],
        output_index=0,
        content_index=0,
        text=text,
        logprobs=[],
    )
    add(
        "response.content_part.done",
        item_id=message["id"],
        output_index=0,
        content_index=0,
        part={**part, "text": text},
    )
    add("response.output_item.done", output_index=0, item=message)
    add("response.completed", response=final)
    return Reply(200, {}, events=events)


def messages_stream(pieces: Sequence[str], calls: Sequence[Call] = (), **kwargs: Any) -> Reply:
    """A streamed Messages answer: a text block in ``pieces``, tool_use blocks whose input
    arrives as JSON fragments, then the stop reason and output usage."""
    final = messages("".join(pieces), calls, **kwargs).body
    usage = final["usage"]
    start = {**final, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    for index, block in enumerate(final["content"]):
        if block["type"] == "text":
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            for piece in pieces:
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": piece},
                        },
                    )
                )
        else:
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {**block, "input": {}},
                    },
                )
            )
            raw = json.dumps(block["input"])
            for fragment in (raw[:3], raw[3:]):
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": fragment},
                        },
                    )
                )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": final["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return Reply(200, {}, events=events)


# -- Gemini (Google's Generative Language API, as google-genai speaks it) ---------------
GEMINI_MODEL = "gemini-2.5-flash"
GEMINI = f"/v1beta/models/{GEMINI_MODEL}:generateContent"
"""The path ``google.genai`` posts a ``generate_content`` call to (base URL: ``root``)."""
GEMINI_STREAM = f"/v1beta/models/{GEMINI_MODEL}:streamGenerateContent"
"""Its streamed twin (``?alt=sse``: the query is not part of the path)."""


def gemini(
    content: str | None = None,
    calls: Sequence[Call] = (),
    *,
    usage: tuple[int, int, int] = (12, 5, 0),
    model: str = GEMINI_MODEL,
) -> Reply:
    """A ``generateContent`` answer: a text part and functionCall parts (several:
    parallel calls; Gemini gives them no ids), usage (prompt, candidates, cached)."""
    parts: list[dict[str, Any]] = []
    if content is not None:
        parts.append({"text": content})
    parts += [{"functionCall": {"name": name, "args": args}} for name, args in calls]
    prompt, completion, cached = usage
    meta: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": completion,
        "totalTokenCount": prompt + completion,
    }
    if cached:
        meta["cachedContentTokenCount"] = cached
    return Reply(
        200,
        {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": meta,
            "modelVersion": model,
            "responseId": "resp-1",
        },
    )


def gemini_stream(pieces: Sequence[str], calls: Sequence[Call] = (), **kwargs: Any) -> Reply:
    """A streamed ``generateContent`` answer: one chunk per text piece, the function calls
    and the usage in the last chunk."""
    whole = gemini(None, calls, **kwargs).body
    events: list[tuple[str | None, Any]] = []
    for piece in pieces:
        chunk = {"candidates": [{"content": {"role": "model", "parts": [{"text": piece}]}}]}
        events.append((None, {**chunk, "modelVersion": whole["modelVersion"]}))
    events.append((None, whole))
    return Reply(200, {}, events=events)
