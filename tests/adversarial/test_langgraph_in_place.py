"""Adversarial: a graph whose nodes change LangGraph's values in place, then return them.

SavegameSaver's encoder is ``by_value`` (it remembers trees, reuses the trees of a
list's unchanged items): each checkpoint, read back by a fresh saver, must equal what
LangGraph's own SqliteSaver stored for the same run (``durability="sync"``), whatever
a node did in place to the objects it was handed: messages' nested dicts, tool call
args, a float turned int turned bool, sets, dicts with int keys, lists shrunk and grown,
items replaced with equal-looking objects, and a saver restarted mid-thread.
"""

from __future__ import annotations

import datetime as dt
import itertools
import sqlite3
import uuid
import zoneinfo
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("langgraph.checkpoint.sqlite")

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from savegame.codec.storage import StorageConfig
from savegame.langgraph import SavegameSaver

ZONE = zoneinfo.ZoneInfo("Europe/Paris")
#: Small packs and short chains: keyframes, deltas and closed packs within one run.
STORAGES = [
    StorageConfig(keyframe_every=2, pack_bytes=256, blob_threshold=64, compress_threshold=128),
    StorageConfig(keyframe_every=5, pack_bytes=512),
    StorageConfig(),
]


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    box: dict[str, Any]
    rows: list[Any]


def _msg(state: State, k: int) -> Any:
    messages = state["messages"]
    return messages[k % len(messages)] if messages else None


def _op(name: str, k: int, n: int) -> Any:
    """A node: one in-place change of what it was handed, then it returns what it changed."""

    def node(state: State) -> dict[str, Any]:
        box, rows, message = state["box"], state["rows"], _msg(state, k)
        if name == "append":
            return {"messages": [AIMessage(f"m{n}", id=f"m{n}", response_metadata={"p": 1.0})]}
        if message is not None and name == "content":
            message.content = f"edited {n}"
            return {"messages": [message]}
        if message is not None and name == "kwargs":
            inner = message.additional_kwargs.setdefault("a", {"b": [1]})
            inner["b"].append(n)  # a list in a dict in a dict on the message
            return {"messages": [message]}
        if message is not None and name == "number":
            meta = message.response_metadata
            kind = type(meta.get("p"))  # 1.0 -> 1 -> True -> 1.0: all equal, all kept apart
            meta["p"] = 1 if kind is float else True if kind is int else 1.0
            return {"messages": [message]}
        if message is not None and name == "tool_args" and isinstance(message, AIMessage):
            if not message.tool_calls:
                message.tool_calls = [{"name": "t", "args": {"x": [1]}, "id": f"c{n}"}]
            else:
                message.tool_calls[0]["args"]["x"].append(n)
            return {"messages": [message]}
        if message is not None and name == "same_id":  # equal-looking new object, same id
            return {"messages": [type(message)(str(message.content), id=message.id)]}
        if message is not None and name == "remove":
            return {"messages": [RemoveMessage(id=message.id)]}
        if name == "box":
            box.setdefault("tags", set()).add(n % 3)
            box.setdefault("by_int", {})[n % 2] = [n]
            box["frozen"] = frozenset({n % 2})
            box.setdefault("deep", {"l": [[1], [2]]})["l"][n % 2].append(n)
            box["when"] = dt.datetime(2024, 10, 27, 2, 30, tzinfo=ZONE, fold=n % 2)
            return {"box": box}
        if name == "shrink":
            del rows[1:]
            return {"rows": rows}
        if name == "grow":
            rows.extend([[n], {"n": n}, [[n, 1.0]]])
            return {"rows": rows}
        if name == "row_edit" and rows:
            row = rows[k % len(rows)]
            if type(row) is list:
                row.append(1 if n % 2 else 1.0)
            elif type(row) is dict:
                row["n"] = True if row.get("n") == 1 else 1
            return {"rows": rows}
        if name == "reorder" and len(rows) > 1:
            rows.reverse()
            return {"rows": rows}
        return {"rows": rows}

    return node


ops = st.lists(
    st.tuples(
        st.sampled_from(
            ["append", "append", "content", "kwargs", "number", "tool_args", "same_id",
             "remove", "box", "shrink", "grow", "grow", "row_edit", "reorder"]
        ),
        st.integers(0, 7),
    ),
    min_size=1,
    max_size=8,
)  # fmt: skip


def _graph(script: list[tuple[str, int]]) -> Any:
    graph = StateGraph(State)
    names = []
    for n, (name, k) in enumerate(script):
        names.append(f"n{n}_{name}")
        graph.add_node(names[-1], _op(name, k, n))
    graph.add_edge(START, names[0])
    for a, b in itertools.pairwise(names):
        graph.add_edge(a, b)
    graph.add_edge(names[-1], END)
    return graph.compile


def _start() -> dict[str, Any]:
    return {
        "messages": [HumanMessage("hi", id="h0"), AIMessage("yo", id="a0")],
        "box": {},
        "rows": [[0], {"n": 0}],
    }


def _canon(value: Any) -> Any:
    """Values with their types, so 1, 1.0 and True (and a set and a list) differ."""
    kind = type(value)
    if kind is dict:
        return ("dict", sorted(((_canon(k), _canon(v)) for k, v in value.items()), key=repr))
    if kind in (list, tuple):
        return (kind.__name__, [_canon(v) for v in value])
    if kind in (set, frozenset):
        return (kind.__name__, sorted(map(repr, map(_canon, value))))
    if kind is dt.datetime:
        # SqliteSaver keeps a zone's offset only (fold is then always 0); savegame keeps
        # the zone and the fold. The same instant and offset: the same ISO text.
        return (kind.__name__, value.isoformat())
    if hasattr(value, "model_dump"):
        return (kind.__name__, _canon(value.model_dump()))
    return (kind.__name__, repr(value))


def _values(saver: Any, thread: str) -> list[Any]:
    return [
        (t.metadata["step"], _canon(t.checkpoint["channel_values"]))
        for t in saver.list({"configurable": {"thread_id": thread}})
    ]


def _run(compile_: Any, saver: Any, thread: str, restart: Any = None) -> Any:
    """Two invokes on one thread; ``restart``: a new saver for the second."""
    config = {"configurable": {"thread_id": thread}}
    compile_(checkpointer=saver).invoke(_start(), config, durability="sync")
    if restart is not None:
        saver.close()
        saver = restart()
    compile_(checkpointer=saver).invoke(
        {"messages": [HumanMessage("again", id="h1")]}, config, durability="sync"
    )
    return saver


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(script=ops, storage=st.sampled_from(STORAGES), restart=st.booleans())
def test_each_checkpoint_equals_sqlite_savers_after_in_place_changes(
    tmp_path: Path, script: list[tuple[str, int]], storage: StorageConfig, restart: bool
) -> None:
    compile_ = _graph(script)
    thread = uuid.uuid4().hex  # tmp_path is shared by the examples
    with sqlite3.connect(tmp_path / f"{thread}-lg.db", check_same_thread=False) as conn:
        reference = SqliteSaver(conn)
        _run(compile_, reference, thread)
        expected = _values(reference, thread)
    url = f"sqlite:///{tmp_path / f'{thread}-sg.db'}"
    saver = _run(
        compile_,
        SavegameSaver(url, storage=storage),
        thread,
        (lambda: SavegameSaver(url, storage=storage)) if restart else None,
    )
    saver.close()
    fresh = SavegameSaver(url, storage=storage)  # read back from the store
    try:
        assert _values(fresh, thread) == expected
    finally:
        fresh.close()
