"""What a model was asked is in its journal entry: model parameters, messages and tool
specs, each part once per run, sealed like any argument, readable from a fork's own
journal, and the digest a replay compares is what it always was."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from savegame import Agent, ScriptedModel, StorageConfig, Store, run
from savegame.agent import ModelResponse, ToolSpec
from savegame.client import fork, get_run, history, list_effects, model_calls
from savegame.codec import canonical, encode_value
from savegame.codec.crypto import Keyring
from savegame.effects import asked
from savegame.effects._replay import digest
from savegame.model import EffectKind, EffectRecord, EffectStatus


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up by id."""
    return {"id": order_id, "total": 120}


def script(turns: int) -> list[Any]:
    calls = [
        {
            "tool_calls": [
                {"id": f"c{n}", "name": "lookup_order", "arguments": {"order_id": f"A-{n}"}}
            ]
        }
        for n in range(turns - 1)
    ]
    return [*calls, "All looked up."]


class Tuned(ScriptedModel):
    """A scripted model with a name and parameters, as the adapters have."""

    name = "tuned-1"
    params: ClassVar[dict[str, Any]] = {"temperature": 0.2, "base_url": "http://localhost:8000/v1"}


def agent(turns: int, model: Any = None) -> Agent:
    return Agent("orders", model or Tuned(script(turns)), [lookup_order], system="Be brief.")


def requests(store: Store | str, run_id: str) -> list[dict[str, Any]]:
    return [
        e.arguments["request"]
        for e in list_effects(run_id, store=store)
        if e.kind is EffectKind.LLM
    ]


def test_each_call_records_its_messages_tools_and_params(store: Store) -> None:
    result = run(agent(2), {"input": "A-0?"}, store=store)
    first, second = model_calls(result.run_id, store=store)
    assert (first.model, first.node, first.reused) == ("tuned-1", "llm", False)
    assert first.request is not None and second.request is not None
    assert first.request.messages == result.state["messages"][:2]
    # The second turn was asked the conversation up to it: the tool call and its result.
    assert second.request.messages == result.state["messages"][:4]
    assert second.request.tools == [
        {
            "name": "lookup_order",
            "description": "Look an order up by id.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        }
    ]
    assert second.request.params == Tuned.params
    assert second.request.missing == []
    assert second.response is not None and second.response.content == "All looked up."


def test_each_message_is_stored_once_per_run(store: Store) -> None:
    result = run(agent(6), {"input": "all of them"}, store=store)
    recorded = requests(store, result.run_id)
    assert len(recorded) == 6
    stored = [key for r in recorded for key in r["new"]]
    assert len(stored) == len(set(stored))
    # Every message of the conversation but the last answer, one tool spec, the params.
    assert len(stored) == len(result.state["messages"]) - 1 + 1 + 1
    # What the journal grows by per turn is that turn's new messages, not the conversation.
    assert [len(r["new"]) for r in recorded[1:]] == [2] * 5
    assert [len(r["messages"]) for r in recorded] == [2, 4, 6, 8, 10, 12]


def test_the_digest_a_replay_compares_is_unchanged(store: Store) -> None:
    result = run(agent(1), {"input": "hi"}, store=store)
    [entry] = [e for e in list_effects(result.run_id, store=store) if e.kind is EffectKind.LLM]
    asked_with = {"messages": result.state["messages"][:2], "tools": ["lookup_order"]}
    assert entry.arguments["digest"] == digest(canonical(asked_with))
    assert (entry.arguments["messages"], entry.arguments["tools"]) == (2, ["lookup_order"])


def test_the_prompt_is_sealed_under_a_keyring(tmp_path: Path) -> None:
    storage = StorageConfig(keyring=Keyring({"k": os.urandom(32)}, active="k"))
    url = f"sqlite:///{tmp_path / 'sealed.db'}"
    secret = "my card number is 4242-4242"
    result = run(agent(2), {"input": secret}, store=url, storage=storage)
    with sqlite3.connect(tmp_path / "sealed.db") as db:
        rows = db.execute("SELECT arguments FROM effects").fetchall()
    assert rows and all(secret.encode() not in (row[0] or b"") for row in rows)
    [first, _] = model_calls(result.run_id, store=url, storage=storage)
    assert first.request is not None and first.request.messages[1]["content"] == secret


def test_a_fork_reads_what_its_reused_calls_were_asked_from_its_own_journal(
    store: Store,
) -> None:
    origin = run(agent(4), {"input": "all"}, store=store)
    after_first_turn = [cp for cp in history(origin.run_id, store=store) if cp.node == "tools"][-1]
    forked = fork(after_first_turn.checkpoint_id, store=store, workflow=agent(4))
    assert forked.result is not None and forked.result.state == origin.state
    own = store.list_effects(forked.run_id)
    calls = model_calls(forked.run_id, store=store)
    assert calls and all(c.reused for c in calls)
    # The fork's journal alone gives every message: the copies brought along the parts
    # their origin recorded before the fork point.
    requests_asked = list(asked(own).values())
    assert len(requests_asked) == len(calls)
    for call, request in zip(calls, requests_asked, strict=True):
        assert request is not None and request.missing == []
        assert call.request == request
    assert calls[-1].request is not None
    assert calls[-1].request.messages == origin.state["messages"][:-1]


def test_an_entry_without_a_request_reads_as_none() -> None:
    old = EffectRecord(
        run_id="r", request_id="r:1:0", kind=EffectKind.LLM, name="llm:m", step=1, node="llm",
        call_index=0, status=EffectStatus.DONE,
        arguments=encode_value({"digest": "ab", "messages": 2, "tools": []}, "arguments"),
    )  # fmt: skip
    assert asked([old]) == {"r:1:0": None}


class Counting:
    """Answers from a list and counts each real call."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        self.calls += 1
        return ModelResponse(content="done", cost_usd=None)


def test_an_unknown_cost_makes_the_runs_cost_unknown(store: Store) -> None:
    model = Counting()
    result = run(Agent("free", model), {"input": "hi"}, store=store)
    assert (result.usage.llm_calls, result.usage.cost_usd) == (1, None)  # not a free 0.0
    assert get_run(result.run_id, store=store).status.value == "completed"
    [head] = history(result.run_id, store=store, limit=1)
    assert head.usage == result.usage  # stored and read back as unknown
    [call] = model_calls(result.run_id, store=store)
    assert call.response is not None and call.response.cost_usd is None
