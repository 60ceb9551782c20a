"""Real LangGraph graphs run on LangGraph's own savers: the sources migrations read.

One graph: a node replies, a ``Send`` fans out three workers, then a subgraph asks a
person (``interrupt``) and records the answer. Threads left in every shape a saver
holds: finished, waiting on the interrupt, and forked by time travel.
"""

from __future__ import annotations

import operator
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, interrupt


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    topics: list[str]
    results: Annotated[list[str], operator.add]
    approved: bool


class Approval(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    approved: bool


def _approval() -> Any:
    def ask(state: Approval) -> dict[str, Any]:
        answer = interrupt({"question": "send it?", "draft": state["messages"][-1].content})
        return {"approved": answer == "yes", "messages": [HumanMessage(content=f"said {answer}")]}

    g = StateGraph(Approval)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    return g.compile()


def graph() -> Any:
    """The graph (uncompiled): reply, fan out, then the approval subgraph."""

    def reply(state: Chat) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(content=f"reply {n}")], "topics": ["a", "b", "c"]}

    def work(arg: dict[str, str]) -> dict[str, list[str]]:
        return {"results": [arg["topic"].upper()]}

    g = StateGraph(Chat)
    g.add_node("reply", reply)
    g.add_node("work", work)
    g.add_node("approve", _approval())
    g.add_edge(START, "reply")
    g.add_conditional_edges(
        "reply", lambda s: [Send("work", {"topic": t}) for t in s["topics"]], ["work"]
    )
    g.add_edge("work", "approve")
    g.add_edge("approve", END)
    return g


def conf(thread: str, **extra: Any) -> Any:
    return {"configurable": {"thread_id": thread, **extra}}


def fill(saver: Any, prefix: str = "") -> dict[str, str]:
    """Run the graph on ``saver`` into threads of every shape; thread id -> its shape."""
    app = graph().compile(checkpointer=saver)
    first = {"messages": [HumanMessage(content="hi")]}
    app.invoke(first, conf(f"{prefix}waiting"))
    app.invoke(first, conf(f"{prefix}done"))
    app.invoke(Command(resume="yes"), conf(f"{prefix}done"))
    app.invoke(first, conf(f"{prefix}forked"))
    app.invoke(Command(resume="no"), conf(f"{prefix}forked"))
    # Back before the fan-out, with an edited message: a second branch, left waiting.
    history = list(app.get_state_history(conf(f"{prefix}forked")))
    before = next(s for s in history if s.next == ("reply",))
    branch = app.update_state(before.config, {"messages": [HumanMessage(content="edited")]})
    app.invoke(None, branch)
    return {f"{prefix}waiting": "waiting", f"{prefix}done": "done", f"{prefix}forked": "forked"}


@contextmanager
def sqlite_saver(path: Path) -> Iterator[Any]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


def sqlite_source(path: Path, prefix: str = "") -> dict[str, str]:
    """A SqliteSaver file at ``path`` holding :func:`fill`'s threads."""
    with sqlite_saver(path) as saver:
        return fill(saver, prefix)


@contextmanager
def postgres_source_url() -> Iterator[str]:
    """A new schema on the test server (dropped afterwards), as a PostgresSaver URL: the
    schema on its search path."""
    import psycopg

    from tests.services import POSTGRES_URL, postgres_schema, with_query

    with postgres_schema("lgsrc") as schema:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        yield with_query(POSTGRES_URL, options=f"-csearch_path%3D{schema}")


@contextmanager
def postgres_saver(url: str) -> Iterator[Any]:
    """A PostgresSaver on ``url`` (its schema on the search path), tables set up."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    with psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)  # type: ignore[arg-type]
        saver.setup()
        yield saver


def states(saver: Any, thread: str) -> list[tuple[Any, ...]]:
    """A thread's history as a graph on ``saver`` shows it: what a user compares."""
    app = graph().compile(checkpointer=saver)
    return [
        (s.config["configurable"]["checkpoint_id"], s.values, s.next, s.metadata,
         [t.interrupts for t in s.tasks])
        for s in app.get_state_history(conf(thread))
    ]  # fmt: skip


def set_write(source: Path | str, thread: str, channel: str, kind: str, raw: bytes) -> str:
    """Edit one stored pending write by hand (a SqliteSaver file, or a PostgresSaver URL):
    its type and bytes set to ``kind`` and ``raw``; its checkpoint id."""
    first = (
        "SELECT checkpoint_id, task_id, idx FROM {t} WHERE thread_id = ? AND channel = ? "
        "ORDER BY checkpoint_id, task_path, task_id, idx LIMIT 1"
    )
    edit = (
        "UPDATE {t} SET type = ?, {v} = ? WHERE thread_id = ? AND checkpoint_id = ? "
        "AND task_id = ? AND idx = ?"
    )
    if isinstance(source, Path):
        conn = sqlite3.connect(source)
        cid, task, idx = conn.execute(first.format(t="writes"), (thread, channel)).fetchone()
        conn.execute(edit.format(t="writes", v="value"), (kind, raw, thread, cid, task, idx))
        conn.commit()
        conn.close()
        return str(cid)
    import psycopg

    with psycopg.connect(source, autocommit=True) as pg:
        sql = first.format(t="checkpoint_writes").replace("?", "%s")
        cid, task, idx = pg.execute(sql, (thread, channel)).fetchone()
        sql = edit.format(t="checkpoint_writes", v="blob").replace("?", "%s")
        pg.execute(sql, (kind, raw, thread, cid, task, idx))
    return str(cid)
