"""A durable tool's journal entry edited by someone with database access: the node's
re-run refuses it and names the entry, and the tool is never called a second time."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

from savegame import SavegameError, StorageConfig
from savegame.codec.crypto import Keyring
from savegame.errors import CorruptRecordError
from savegame.langgraph import SavegameSaver, durable_tool

KEYS = StorageConfig(keyring=Keyring({"k1": os.urandom(32)}, active="k1"))
EDITS = {
    "result": "X'00'",
    "arguments": "X'00'",
    "status": "'not_done'",
    "status-pending": "'pending'",
    "name": "'another_tool'",
    "metadata": "'{}'",
}


def graph(url: str, ledger: Path) -> Any:
    @durable_tool
    def send_email(to: str) -> str:
        with ledger.open("a") as f:
            f.write(json.dumps({"to": to}) + "\n")
        return "sent"

    def node(state: MessagesState) -> dict[str, Any]:
        sent = send_email("ann@example.com")
        interrupt("confirm")
        return {"messages": [AIMessage(content=sent)]}

    g = StateGraph(MessagesState)
    g.add_node("n", node)
    g.add_edge(START, "n")
    g.add_edge("n", END)
    return g.compile(checkpointer=SavegameSaver(url, storage=KEYS))


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edited_tool_entry_is_refused_and_nothing_is_sent_again(
    tmp_path: Path, edit: str
) -> None:
    path, ledger = tmp_path / "lg.db", tmp_path / "ledger.jsonl"
    url = f"sqlite:///{path}"
    config = {"configurable": {"thread_id": "t"}}
    graph(url, ledger).invoke({"messages": [HumanMessage(content="hi")]}, config)
    column = edit.split("-")[0]
    with sqlite3.connect(path) as db:
        changed = db.execute(
            f"UPDATE effects SET {column} = {EDITS[edit]} WHERE request_id LIKE 'tool:%'"
        ).rowcount
    assert changed == 1
    with pytest.raises(SavegameError) as caught:
        graph(url, ledger).invoke(Command(resume="yes"), config)
    assert isinstance(caught.value, CorruptRecordError)
    assert "/tool:" in str(caught.value)  # names the entry: run/request id
    assert len(ledger.read_text().splitlines()) == 1
