"""The agent loop: scripted model turns, tool rounds, usage, and thread continuation."""

from __future__ import annotations

from typing import Any

import pytest

from savegame import Agent, ScriptedModel, Store, run
from savegame.agent import ModelResponse, ToolCall
from savegame.client import history
from savegame.errors import ConfigurationError


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up by id."""
    return {"id": order_id, "total": 120, "status": "delivered"}


def refund_policy(days: int = 30) -> str:
    """Return the refund policy."""
    return f"refunds within {days} days"


SCRIPT: list[Any] = [
    {"tool_calls": [{"id": "c1", "name": "lookup_order", "arguments": {"order_id": "A-1"}}]},
    {
        "tool_calls": [
            {"id": "c2", "name": "refund_policy", "arguments": {}},
            {"id": "c3", "name": "no_such_tool", "arguments": {}},
        ]
    },
    ModelResponse("Order A-1 can be refunded.", input_tokens=100, output_tokens=7, cost_usd=0.001),
    "You're welcome!",
]


def make_agent(**kwargs: Any) -> Agent:
    return Agent(
        "support",
        ScriptedModel(SCRIPT),
        [lookup_order, refund_policy],
        system="Be brief.",
        **kwargs,
    )


def test_agent_loop_runs_tools_and_answers(store: Store) -> None:
    result = run(make_agent(), {"input": "refund A-1?"}, store=store)
    state = result.state
    assert state["answer"] == "Order A-1 can be refunded."
    roles = [m["role"] for m in state["messages"]]
    assert roles == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert state["messages"][3]["content"] == lookup_order("A-1")
    assert state["messages"][5]["content"] == "refunds within 30 days"
    assert state["messages"][6]["content"] == {"error": "unknown tool 'no_such_tool'"}
    # receive, llm, tools, llm, tools, llm: each a checkpoint after the input one.
    nodes = [h.node for h in reversed(history(result.run_id, store=store))]
    assert nodes == [None, "receive", "llm", "tools", "llm", "tools", "llm"]
    assert (
        result.usage.llm_calls == 3 and result.usage.tool_calls == 2
    )  # the unknown tool never ran
    assert result.usage.input_tokens >= 100 and result.usage.cost_usd == pytest.approx(0.001)


def test_conversation_continues_on_the_thread(store: Store) -> None:
    agent = make_agent()
    run(agent, {"input": "refund A-1?"}, thread_id="conv", store=store)
    second = run(agent, {"input": "thanks"}, thread_id="conv", store=store)
    assert second.state["answer"] == "You're welcome!"
    assert [m["content"] for m in second.state["messages"] if m["role"] == "user"] == [
        "refund A-1?",
        "thanks",
    ]
    assert second.usage.llm_calls == 1  # usage counts per run


def test_max_turns_stops_the_loop(store: Store) -> None:
    looping = ScriptedModel([{"tool_calls": [{"name": "refund_policy"}]}] * 5)
    agent = Agent("loop", looping, [refund_policy], max_turns=2)
    result = run(agent, {"input": "go"}, store=store)
    assert result.state["stopped"] == "max_turns" and result.state["turns"] == 2


def test_script_exhaustion_and_duplicate_tools_are_clear(store: Store) -> None:
    with pytest.raises(ConfigurationError, match="two tools share a name"):
        Agent("dup", ScriptedModel([]), [lookup_order, lookup_order])
    with pytest.raises(
        ConfigurationError, match="ScriptedModel has 0 responses but was asked for turn 1"
    ):
        run(Agent("empty", ScriptedModel([])), {"input": "hi"}, store=store)


def test_scripted_model_is_stateless_across_instances() -> None:
    messages = [{"role": "user", "content": "x"}, {"role": "assistant", "content": None}]
    first = ScriptedModel(SCRIPT).complete(messages, [])
    again = ScriptedModel(SCRIPT).complete(messages, [])
    assert first == again and first.tool_calls[0] == ToolCall("c2", "refund_policy", {})
