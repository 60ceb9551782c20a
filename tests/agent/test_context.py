"""Context policies: the prompt stays bounded while the state keeps every message; the
cut never orphans a tool result (checked by the real openai SDK against a provider that
refuses one, as OpenAI does); a summary is made once per batch and is stale after an
edit of what it covers. The crash test of the journaled summary is test_context_crash."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from werkzeug import Request, Response

from savegame import Agent, open_store, run
from savegame.agent import (
    ContextPolicy,
    Everything,
    KeepLast,
    ModelResponse,
    Prompt,
    ToolCall,
    ToolSpec,
)
from savegame.agent._context import SUMMARY_INSTRUCTIONS, dropped, split, starts_turn
from savegame.client import fork, history, model_calls
from savegame.errors import ConfigurationError, ModelRequestError
from savegame.models import Anthropic, OpenAI
from savegame.runtime import StepContext
from tests import provider
from tests.provider import CHAT, MESSAGES, FakeProvider, chat, messages

Message = dict[str, Any]


def orphans(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indexes of tool messages that answer no tool call of the assistant message before
    them, and of assistant tool calls left without their result: what OpenAI refuses."""
    bad: list[int] = []
    open_calls: set[str] = set()
    for i, m in enumerate(messages):
        if m.get("role") == "tool":
            if m.get("tool_call_id") not in open_calls:
                bad.append(i)
            open_calls.discard(str(m.get("tool_call_id")))
            continue
        if open_calls:
            bad.append(i)
        open_calls = {c["id"] for c in m.get("tool_calls") or ()}
    if open_calls:
        bad.append(len(messages))
    return bad


class StrictProvider(FakeProvider):
    """tests/provider.py's server, answering 400 as the real APIs do to a Chat
    Completions request whose tool messages are not paired with the assistant message
    that called them, and to a Messages request that does not open with a user."""

    def _handle(self, request: Request) -> Response:
        body = json.loads(request.get_data() or b"{}")
        said = body.get("messages") or []
        message = None
        if request.path == CHAT and orphans(said):
            message = (
                "Invalid parameter: messages with role 'tool' must be a response to a "
                "preceeding message with 'tool_calls'."
            )
        if request.path == MESSAGES and (not said or said[0].get("role") != "user"):
            message = 'messages: first message must use the "user" role'
        if message is None:
            return super()._handle(request)
        self.asked.append(provider.Asked(request.path, body, dict(request.headers)))
        return Response(
            json.dumps(provider.error(400, message).body),
            status=400,
            content_type="application/json",
        )


@pytest.fixture
def strict() -> Iterator[StrictProvider]:
    server = StrictProvider()
    server.server.start()
    try:
        yield server
    finally:
        server.server.clear()
        server.server.stop()


def lookup(n: int) -> dict[str, int]:
    """Look item n up."""
    return {"n": n, "double": 2 * n}


# -- a long conversation -------------------------------------------------------------


class Talker:
    """Answers from the prompt alone (resume-safe): a user message saying "look" gets a
    tool call, anything else an answer; remembers the prompts it was sent."""

    name = "talker"

    def __init__(self) -> None:
        self.prompts: list[list[Message]] = []

    def complete(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]) -> Any:
        self.prompts.append([dict(m) for m in messages])
        last = messages[-1]
        if last["role"] == "user" and "look" in last["content"]:
            n = int(last["content"].split()[-1])
            return ModelResponse(None, (ToolCall(f"c{n}", "lookup", {"n": n}),))
        return ModelResponse(f"ok {len(messages)}")


class Summariser:
    name = "summariser"

    def __init__(self) -> None:
        self.requests: list[list[Message]] = []

    def complete(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]) -> Any:
        self.requests.append([dict(m) for m in messages])
        return ModelResponse(f"summary {len(self.requests)}")


def test_a_200_turn_conversation_is_sent_a_bounded_prompt() -> None:
    model, summariser = Talker(), Summariser()
    agent = Agent(
        "long-talk",
        model,
        [lookup],
        system="Be brief.",
        context=KeepLast(4, summarise=summariser, pinned=lambda s: [f"customer {s['customer']}"]),
    )
    store = open_store("memory://")
    runs = []
    for n in range(200):
        text = f"look {n}" if n % 3 == 0 else f"hello {n}"
        runs.append(run(agent, {"input": text, "customer": "C-9"}, thread_id="t", store=store))
    result = runs[-1]
    messages = result.state["messages"]
    # The state holds all 200 user turns, each answer and each tool round.
    assert sum(m["role"] == "user" for m in messages) == 200
    assert sum(m["role"] == "tool" for m in messages) == 67
    assert len(messages) == 1 + 200 + 200 + 67 * 2
    # Each prompt: system, facts, summary, maybe the user message a tool call answers,
    # and 4 to 7 turns (a turn at most 3 messages).
    sizes = [len(p) for p in model.prompts]
    assert len(sizes) == 267
    assert max(sizes) <= 4 + 7 * 3
    assert min(sizes[-50:]) >= 3 + 4
    last = model.prompts[-1]
    assert last[0] == {"role": "system", "content": "Be brief."}
    assert last[1] == {"role": "system", "content": "Key facts:\n- customer C-9"}
    assert last[2]["content"].endswith(f"summary {len(summariser.requests)}")
    assert last[-1] == {"role": "user", "content": "hello 199"}
    # One summary per 4 turns that left the window, not one per model call; each
    # request holds the summary so far and the 4 turns that left, never the whole past.
    turns = 200 + 67
    assert len(summariser.requests) == (turns - 4) // 4
    journaled = [c.model for r in runs for c in model_calls(r.run_id, store=store)]
    assert journaled.count("summariser") == len(summariser.requests)
    for request in summariser.requests[1:]:
        assert request[0]["content"] == SUMMARY_INSTRUCTIONS
        assert "Summary so far:\nsummary" in request[1]["content"]
        assert request[1]["content"].count("\n") <= 4 + 4 * 3
    assert result.state["context"]["summary"] == f"summary {len(summariser.requests)}"


# -- the cut and tool results ----------------------------------------------------------


def tool_round(ids: Sequence[str]) -> list[Message]:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": i, "name": "lookup", "arguments": {"n": 1}} for i in ids],
    }
    results = [
        {"role": "tool", "tool_call_id": i, "name": "lookup", "content": {"n": 1}} for i in ids
    ]
    return [call, *results]


def test_the_cut_never_orphans_a_tool_result_at_a_real_provider(strict: StrictProvider) -> None:
    model = OpenAI("gpt-4o", base_url=strict.openai_url, api_key="test-key")
    earlier: list[Message] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "look everything up"},
        *tool_round(["a1", "a2"]),
        *tool_round(["b1", "b2", "b3"]),
    ]
    # The provider does refuse a naive cut (the last five messages start at a tool result).
    strict.script(CHAT, chat("never sent"))
    with pytest.raises(ModelRequestError) as refused:
        model.complete([earlier[0], *earlier[-5:]], [])
    assert refused.value.status == 400

    # An agent keeping one turn, through three rounds of parallel calls: every prompt is
    # cut at a turn, the provider accepts each.
    strict.reset()
    strict.script(
        CHAT,
        chat(None, [("lookup", {"n": 1}), ("lookup", {"n": 2})]),
        chat(None, [("lookup", {"n": 3}), ("lookup", {"n": 4}), ("lookup", {"n": 5})]),
        chat(None, [("lookup", {"n": 6})]),
        chat("All looked up."),
    )
    agent = Agent("strict", model, [lookup], context=KeepLast(1))
    result = run(agent, {"messages": earlier, "input": "and the rest"}, store="memory://")
    assert result.state["answer"] == "All looked up."
    sent = [b["messages"] for b in strict.bodies(CHAT)]
    assert len(sent) == 4 and all(not orphans(m) for m in sent)
    assert [m["role"] for m in sent[0]] == ["system", "user"]
    # A window that starts at a tool call is led by the user message that asked.
    assert [m["role"] for m in sent[1]] == ["system", "user", "assistant", "tool", "tool"]
    assert [m["role"] for m in sent[2]] == ["system", "user", "assistant", "tool", "tool", "tool"]
    assert sent[2][1] == {"role": "user", "content": "and the rest"}
    assert len(result.state["messages"]) == len(earlier) + 1 + 3 + 4 + 2 + 1


def test_a_window_at_a_tool_call_opens_with_the_user_at_anthropic(strict: StrictProvider) -> None:
    model = Anthropic("claude-sonnet-4-5", base_url=strict.root, api_key="test-key")
    # The provider does refuse a conversation that opens with the assistant.
    with pytest.raises(ModelRequestError) as refused:
        model.complete(tool_round(["a1"]), [])
    assert refused.value.status == 400
    strict.reset()
    strict.script(
        MESSAGES,
        messages(None, [("lookup", {"n": 1})]),
        messages(None, [("lookup", {"n": 2})]),
        messages(None, [("lookup", {"n": 3})]),
        messages("Done."),
    )
    agent = Agent("strict-anthropic", model, [lookup], system="Be brief.", context=KeepLast(1))
    result = run(agent, {"input": "look 1, 2 and 3 up"}, store="memory://")
    assert result.state["answer"] == "Done."
    sent = [b["messages"] for b in strict.bodies(MESSAGES)]
    assert len(sent) == 4
    # Each later turn: the user's request, then only the last tool round.
    for said in sent[1:]:
        assert [m["role"] for m in said] == ["user", "assistant", "user"]
        assert said[0]["content"][0]["text"] == "look 1, 2 and 3 up"


# -- the window, as a property ---------------------------------------------------------


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """A system prompt, then user turns, each with 0-3 tool rounds of 1-3 parallel
    calls and an answer (the last turn may stop mid-round, as a resumed run does)."""
    out: list[Message] = [{"role": "system", "content": "s"}]
    ids = iter(range(10_000))
    for _ in range(draw(st.integers(0, 12))):
        out.append({"role": "user", "content": "u"})
        for _ in range(draw(st.integers(0, 3))):
            out += tool_round([f"c{next(ids)}" for _ in range(draw(st.integers(1, 3)))])
        if draw(st.booleans()):
            out.append({"role": "assistant", "content": "a"})
    return out


@settings(max_examples=300, deadline=None)
@given(conversations(), st.integers(1, 6), st.integers(1, 4))
def test_the_kept_window_starts_at_a_user_turn_or_a_complete_pair(
    messages: list[Message], keep: int, every: int
) -> None:
    import asyncio

    policy = KeepLast(keep, every=every)
    prompt = asyncio.run(policy.build({"messages": messages}, cast(StepContext, None)))
    sent = list(prompt.messages)
    assert sent[0] == messages[0] and prompt.memory is None
    window = sent[1:]
    if window == messages[len(messages) - len(window) :]:
        suffix = window
    else:
        # Led by the last user message before the cut, the window a suffix after it.
        lead, suffix = window[0], window[1:]
        start = len(messages) - len(suffix)
        assert suffix == messages[start:]
        assert lead["role"] == "user" and suffix[0]["role"] == "assistant"
        assert lead == [m for m in messages[:start] if m["role"] == "user"][-1]
    if suffix:
        assert starts_turn(suffix[0])
    # The first message after the system prompt is a user's whenever one was cut off.
    if window and any(m["role"] == "user" for m in messages[: len(messages) - len(suffix)]):
        assert window[0]["role"] == "user"
    assert not orphans(window)
    _, turns = split(messages)
    _, kept = split(suffix) if suffix else ([], [])
    n = len(turns) - dropped(len(turns), keep, every)
    assert n <= len(kept) <= n + 1  # + 1: a lead that was the message right before the cut
    assert min(keep, len(turns)) <= n <= keep + every - 1 or n == len(turns)


# -- summaries ---------------------------------------------------------------------------


def test_a_summary_is_kept_until_a_batch_leaves_and_stale_once_its_past_is_edited() -> None:
    model, summariser = Talker(), Summariser()
    agent = Agent("edited", model, context=KeepLast(1, summarise=summariser, every=2))
    store = open_store("memory://")
    results = [run(agent, {"input": f"hello {n}"}, thread_id="t", store=store) for n in range(4)]
    # Turn 3 pushed two turns out (one summary); turn 4 pushed none more: still one.
    assert len(summariser.requests) == 1
    state = results[-1].state
    assert state["context"]["covers"] == 4  # hello 0, its answer, hello 1, its answer
    assert model.prompts[-1][0]["content"].endswith("summary 1")

    start = next(cp for cp in history(results[-1].run_id, store=store) if cp.node is None)
    # The same past: the kept summary serves, nothing new is asked.
    same = fork(start.checkpoint_id, store=store, workflow=agent.workflow)
    assert same.result is not None and same.result.state["context"] == state["context"]
    assert len(summariser.requests) == 1
    # What the summary covers edited: its digest no longer matches, so it is made again
    # from the start rather than extended.
    messages = state["messages"]
    edited = [{"role": "user", "content": "changed"}, *messages[1:6]]
    forked = fork(
        start.checkpoint_id,
        store=store,
        workflow=agent.workflow,
        update={"messages": edited, "input": "hello 3"},
    )
    assert forked.result is not None
    assert len(summariser.requests) == 2
    assert "user: changed" in summariser.requests[-1][1]["content"]
    assert "Summary so far" not in summariser.requests[-1][1]["content"]
    assert forked.result.state["context"]["summary"] == "summary 2"


def test_the_default_sends_everything_and_a_bad_policy_is_refused() -> None:
    import asyncio

    state = {"messages": [{"role": "user", "content": "u"}]}
    assert asyncio.run(Everything().build(state, cast(StepContext, None))) == Prompt(
        ({"role": "user", "content": "u"},)
    )
    assert isinstance(KeepLast(2), ContextPolicy)
    with pytest.raises(ConfigurationError, match="keep must be an int >= 1"):
        KeepLast(0)
    with pytest.raises(ConfigurationError, match="every must be"):
        KeepLast(2, every=0)
    with pytest.raises(ConfigurationError, match="not one string"):
        KeepLast(2, pinned="the customer is C-9")
    with pytest.raises(ConfigurationError, match="is not a ContextPolicy"):
        Agent("bad", Talker(), context=cast(Any, 8))
