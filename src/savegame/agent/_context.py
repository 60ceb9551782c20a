"""Context policies: what of the conversation the model is sent on each turn.

The state keeps the whole conversation (``messages``, saved as deltas of what each
step added); the prompt is built from it on every model turn by a policy, so the
state and the prompt stay apart: the history can hold thousands of messages while
the model is sent a bounded window of them.

The window is cut only between *turns*: a turn starts at a user message or at an
assistant message that calls tools, and holds what follows up to the next start (the
tool results, a final answer). So a tool result is never sent without the assistant
message that asked for it; providers refuse such a prompt (OpenAI answers 400). A
window that starts at a tool call is led by the last user message before it, so the
model sees what the calls are for, and a provider that wants a user message first
(Anthropic) gets one.

A summary of what fell out of the window is itself a model call made through
``ctx.allm``: journaled, so a re-executed step, a resumed run and a replayed fork
get it back without paying again. It is kept in the state under the agent's
``context`` key with what it covers, and brought up to date only when a batch of
turns (``every``) has left the window, not on every turn.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from savegame.effects import ChatModel, Message
from savegame.errors import ConfigurationError
from savegame.runtime import StepContext

CONTEXT_KEY = "context"
"""The agent's state key for what a policy keeps between turns (a summary and what it covers)."""

SUMMARY_INSTRUCTIONS = (
    "You keep the memory of a conversation between a user, an assistant and its tools. "
    "Write a short summary that keeps every fact, decision, identifier, number and open "
    "question the assistant may need later. Merge the summary so far (if any) with the "
    "new part of the conversation. Answer with the summary only."
)

LINE_LIMIT = 2000
"""Characters of one message a summary request holds: a huge tool result is cut, so the
request stays bounded too."""

Facts = Sequence[str] | Callable[[Mapping[str, Any]], Sequence[str]]
"""Pinned facts: fixed lines, or a function of the state giving them."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """What a context policy built for one model turn."""

    messages: tuple[Message, ...]
    """The messages the model is sent."""
    memory: Mapping[str, Any] | None = None
    """What the policy keeps for the next turns (saved under the state's ``context``
    key), or None to leave it as it is."""


@runtime_checkable
class ContextPolicy(Protocol):
    """Builds each model turn's prompt from the agent's state.

    ``build`` may call models through ``ctx.allm`` (journaled like any model call);
    it must not change the state: what it keeps goes in ``Prompt.memory``.
    """

    async def build(self, state: Mapping[str, Any], ctx: StepContext) -> Prompt: ...


class Everything:
    """The default policy: the model is sent the whole conversation."""

    async def build(self, state: Mapping[str, Any], ctx: StepContext) -> Prompt:
        return Prompt(tuple(state.get("messages") or ()))

    def __repr__(self) -> str:
        return "Everything()"


def starts_turn(message: Mapping[str, Any]) -> bool:
    """A user message or an assistant message calling tools: where a window may start."""
    role = message.get("role")
    return role == "user" or (role == "assistant" and bool(message.get("tool_calls")))


def split(messages: Sequence[Message]) -> tuple[list[Message], list[list[Message]]]:
    """(the leading system messages, the rest as turns).

    Anything before the first turn start (a conversation that begins oddly) is a turn
    of its own, so nothing is lost and nothing is reordered.
    """
    head: list[Message] = []
    index = 0
    while index < len(messages) and messages[index].get("role") in ("system", "developer"):
        head.append(messages[index])
        index += 1
    turns: list[list[Message]] = []
    for message in messages[index:]:
        if starts_turn(message) or not turns:
            turns.append([message])
        else:
            turns[-1].append(message)
    return head, turns


def dropped(turns: int, keep: int, every: int) -> int:
    """How many of ``turns`` fall out of the window: whole batches of ``every`` beyond
    the last ``keep``, so the window holds between ``keep`` and ``keep + every - 1``
    turns and moves (and a summary is refreshed) once per batch."""
    if turns <= keep:
        return 0
    return ((turns - keep) // every) * every


def digest(messages: Sequence[Message]) -> str:
    """A short content digest of messages: says whether a summary still covers them (a
    fork's edited history does not match it)."""
    text = json.dumps(list(messages), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class KeepLast:
    """Send the system prompt, pinned facts, a summary of older turns and the last turns.

    The last turns are led by the user message that asked for them when they start at
    a tool call. ``ScriptedModel`` picks its answer by the assistant messages it is
    sent, so it does not fit a policy that drops some: script such tests by request
    (``tests/provider.py``) or with a model that reads the prompt.

    Args:
        keep: the turns sent as they are (a turn: a user message, or an assistant
            message calling tools with its results); at least 1.
        summarise: a ChatModel that summarises turns leaving the window (journaled
            through ``ctx.allm``); None drops them.
        pinned: key facts sent on every turn after the system prompt: lines, or a
            function of the state giving them (``lambda s: [f"customer {s['customer']}"]``).
        every: turns that leave the window at once; defaults to ``keep`` with a
            summariser (one summary call per ``keep`` turns) and 1 without.
        instructions: the summariser's system prompt.
    """

    def __init__(
        self,
        keep: int,
        *,
        summarise: ChatModel | None = None,
        pinned: Facts = (),
        every: int | None = None,
        instructions: str = SUMMARY_INSTRUCTIONS,
    ) -> None:
        if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
            raise ConfigurationError(f"KeepLast(keep={keep!r}): keep must be an int >= 1")
        if every is not None and (not isinstance(every, int) or every < 1):
            raise ConfigurationError(f"KeepLast(every={every!r}): every must be an int >= 1")
        if isinstance(pinned, str):
            raise ConfigurationError("KeepLast(pinned=) takes a list of facts, not one string")
        self.keep = keep
        self.summarise = summarise
        self.pinned = pinned
        self.every = every or (keep if summarise is not None else 1)
        self.instructions = instructions

    def __repr__(self) -> str:
        return f"KeepLast({self.keep}, summarise={self.summarise!r}, every={self.every})"

    async def build(self, state: Mapping[str, Any], ctx: StepContext) -> Prompt:
        messages: list[Message] = list(state.get("messages") or ())
        head, turns = split(messages)
        gone = dropped(len(turns), self.keep, self.every)
        cut = len(head) + sum(len(turn) for turn in turns[:gone])
        out = list(head)
        facts = self._facts(state)
        if facts:
            out.append({"role": "system", "content": "Key facts:\n" + "\n".join(facts)})
        memory: dict[str, Any] | None = None
        if self.summarise is not None and gone:
            summary, memory = await self._summary(messages, len(head), cut, state, ctx)
            if summary:
                out.append(
                    {
                        "role": "system",
                        "content": f"Summary of the earlier conversation:\n{summary}",
                    }
                )
        window = messages[cut:]
        if window and window[0].get("role") != "user":
            # A window that starts at a tool call is led by the user message that asked
            # for it: the request the calls serve, and some providers (Anthropic) refuse a
            # conversation whose first message is not a user's.
            asked = next(
                (m for m in reversed(messages[len(head) : cut]) if m.get("role") == "user"), None
            )
            if asked is not None:
                out.append(asked)
        out.extend(window)
        return Prompt(tuple(out), memory)

    def _facts(self, state: Mapping[str, Any]) -> list[str]:
        facts = self.pinned(state) if callable(self.pinned) else self.pinned
        if isinstance(facts, str):
            raise ConfigurationError("KeepLast(pinned=...) gave one string, not a list of facts")
        return [f"- {fact}" for fact in facts]

    async def _summary(
        self,
        messages: list[Message],
        start: int,
        cut: int,
        state: Mapping[str, Any],
        ctx: StepContext,
    ) -> tuple[str, dict[str, Any] | None]:
        """The summary of ``messages[start:cut]`` and the memory to keep (None: unchanged)."""
        assert self.summarise is not None
        kept = state.get(CONTEXT_KEY)
        prior: str | None = None
        since = start
        if isinstance(kept, Mapping) and isinstance(kept.get("covers"), int):
            covers = kept["covers"]
            if start <= covers <= cut and kept.get("digest") == digest(messages[:covers]):
                if covers == cut:
                    return str(kept.get("summary") or ""), None
                prior, since = str(kept.get("summary") or ""), covers
        request: list[Message] = [
            {"role": "system", "content": self.instructions},
            {"role": "user", "content": transcript(prior, messages[since:cut])},
        ]
        response = await ctx.allm(self.summarise, request)
        text = (response.content or "").strip()
        return text, {"summary": text, "covers": cut, "digest": digest(messages[:cut])}


def transcript(prior: str | None, messages: Sequence[Message]) -> str:
    """What a summariser reads: the summary so far and the new turns as plain lines (tool
    calls and results as text, so the request holds no tool messages to pair)."""
    lines = [f"Summary so far:\n{prior}\n"] if prior else []
    lines.append("Conversation to add:")
    for message in messages:
        role = str(message.get("role"))
        text = _text(message.get("content"))
        if role == "tool":
            lines.append(f"tool {message.get('name') or ''} returned: {text}")
            continue
        if text:
            lines.append(f"{role}: {text}")
        for call in message.get("tool_calls") or ():
            arguments = _text(call.get("arguments"))
            lines.append(f"{role} called {call.get('name')}({arguments})")
    return "\n".join(lines)


def _text(content: Any) -> str:
    if content is None:
        return ""
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    return text if len(text) <= LINE_LIMIT else text[:LINE_LIMIT] + " [...]"
