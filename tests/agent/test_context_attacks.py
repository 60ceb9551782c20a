"""Attacks on KeepLast: a kept summary that lies about what it covers, a tool result of a
megabyte, facts that are one string, a summariser that answers nothing. Each must end in
a bounded, well-formed prompt or a clear error, never a silent wrong summary."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, cast

import pytest

from savegame import open_store, run
from savegame.agent import Agent, KeepLast, ModelResponse, ToolSpec
from savegame.agent._context import LINE_LIMIT, digest
from savegame.effects import Message
from savegame.errors import ConfigurationError, StepError
from savegame.runtime import StepContext


class Summariser:
    name = "summariser"

    def __init__(self, answer: str | None = "short") -> None:
        self.answer = answer
        self.requests: list[list[Message]] = []

    def complete(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]) -> Any:
        self.requests.append([dict(m) for m in messages])
        return ModelResponse(self.answer)


class Journal:
    """A StepContext stand-in that only answers allm, for policies built outside a run."""

    async def allm(self, model: Any, messages: Sequence[Mapping[str, Any]], **_: Any) -> Any:
        return model.complete(messages, [])


def conversation(turns: int) -> list[Message]:
    out: list[Message] = [{"role": "system", "content": "s"}]
    for n in range(turns):
        out += [{"role": "user", "content": f"u{n}"}, {"role": "assistant", "content": f"a{n}"}]
    return out


def build(policy: KeepLast, state: dict[str, Any]) -> Any:
    return asyncio.run(policy.build(state, cast(StepContext, Journal())))


@pytest.mark.parametrize(
    "kept",
    [
        {"summary": "lies", "covers": 10**9, "digest": "x"},
        {"summary": "lies", "covers": -1, "digest": "x"},
        {"summary": "lies", "covers": "3", "digest": "x"},
        {"summary": "lies", "covers": 3, "digest": "not the digest"},
        "not a mapping",
    ],
)
def test_a_kept_summary_that_does_not_match_the_history_is_made_again(kept: Any) -> None:
    summariser = Summariser()
    messages = conversation(6)
    prompt = build(KeepLast(2, summarise=summariser), {"messages": messages, "context": kept})
    assert len(summariser.requests) == 1
    assert "lies" not in summariser.requests[0][1]["content"]
    assert "u0" in summariser.requests[0][1]["content"]  # from the start
    assert prompt.memory["digest"] == digest(messages[: prompt.memory["covers"]])


def test_a_matching_summary_is_extended_not_remade() -> None:
    summariser = Summariser()
    messages = conversation(6)
    kept = {"summary": "the first two", "covers": 5, "digest": digest(messages[:5])}
    prompt = build(KeepLast(2, summarise=summariser), {"messages": messages, "context": kept})
    [request] = summariser.requests
    assert request[1]["content"].startswith("Summary so far:\nthe first two")
    assert "u0" not in request[1]["content"] and "u2" in request[1]["content"]
    assert prompt.memory["covers"] == 9


def test_a_megabyte_tool_result_does_not_make_the_summary_request_unbounded() -> None:
    summariser = Summariser()
    huge = "x" * 1_000_000
    messages: list[Message] = [{"role": "user", "content": "read it"}]
    for n in range(4):
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"c{n}", "name": "read", "arguments": {}}],
            },
            {"role": "tool", "tool_call_id": f"c{n}", "name": "read", "content": huge},
        ]
    build(KeepLast(1, summarise=summariser, every=2), {"messages": messages})
    [request] = summariser.requests
    assert len(request[1]["content"]) < 4 * (LINE_LIMIT + 100)
    assert "[...]" in request[1]["content"]


def test_facts_that_are_one_string_are_refused_when_they_are_built() -> None:
    policy = KeepLast(2, pinned=lambda state: state["customer"])
    with pytest.raises(ConfigurationError, match="gave one string"):
        build(policy, {"messages": conversation(1), "customer": "C-9"})


def test_a_summariser_that_answers_nothing_adds_no_empty_message() -> None:
    summariser = Summariser(answer=None)
    prompt = build(KeepLast(2, summarise=summariser), {"messages": conversation(6)})
    assert all(m["content"] for m in prompt.messages)
    assert prompt.memory["summary"] == ""


def test_a_policy_that_raises_fails_the_run_with_its_error() -> None:
    class Broken:
        async def build(self, state: Mapping[str, Any], ctx: StepContext) -> Any:
            raise ValueError("policy broke")

    agent = Agent("broken", Summariser(), context=Broken())
    with pytest.raises(StepError, match="step 'llm' raised ValueError: policy broke"):
        run(agent, {"input": "hi"}, store=open_store("memory://"))
