"""What a graph hands SavegameSaver comes back as from LangGraph's own savers.

Each case failed LangGraph's own graph tests before (issue 28's causes A-D and the
tuples): ``message.text`` (a str subclass), LangGraph's ``Command`` inside a ``Send``,
LangChain's ``Document``, ``deque`` and ``Path``, the graph's own pydantic models,
dataclasses and enums without ``savegame.register`` (in a fresh process too, and under
``LANGGRAPH_STRICT_MSGPACK`` only those the graph's schemas name), tuples given back as
lists, and a refusal that records none of the task's writes.
"""

from __future__ import annotations

import collections
import dataclasses
import operator
import os
import pathlib
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send

from savegame.errors import SerializationError
from savegame.langgraph import SavegameSaver


def conf(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    result: str


def test_message_text_a_str_subclass_is_kept_as_a_str(sqlite_url: str) -> None:
    def answer(state: Chat) -> dict[str, Any]:
        return {"result": AIMessage(content="forty-two").text}

    g = StateGraph(Chat)
    g.add_node("answer", answer)
    g.add_edge(START, "answer")
    g.compile(checkpointer=SavegameSaver(sqlite_url)).invoke({"messages": []}, conf("t"))
    fresh = g.compile(checkpointer=SavegameSaver(sqlite_url))
    assert fresh.get_state(conf("t")).values["result"] == "forty-two"
    assert type(fresh.get_state(conf("t")).values["result"]) is str


class Bag(TypedDict, total=False):
    notes: Annotated[list[str], operator.add]
    queue: collections.deque[int]
    where: pathlib.Path
    docs: list[Document]


def test_langgraphs_safe_types_are_kept(sqlite_url: str) -> None:
    """LangGraph's strict serializer accepts these without an allow-list; so does savegame."""

    def fan(state: Bag) -> list[Send]:
        return [Send("work", Command(update={"notes": ["from a command"]}))]

    def work(arg: Any) -> dict[str, Any]:
        assert isinstance(arg, Command)
        return {
            "notes": arg.update["notes"],
            "queue": collections.deque([1, 2, 3], maxlen=5),
            "where": pathlib.Path("/srv/reports/q3.txt"),
            "docs": [Document(page_content="q3", metadata={"page": 1})],
        }

    g = StateGraph(Bag)
    g.add_node("work", work)
    g.add_conditional_edges(START, fan, ["work"])
    g.add_edge("work", END)
    g.compile(checkpointer=SavegameSaver(sqlite_url)).invoke({"notes": []}, conf("t"))
    values = g.compile(checkpointer=SavegameSaver(sqlite_url)).get_state(conf("t")).values
    assert values["notes"] == ["from a command"]
    assert values["queue"] == collections.deque([1, 2, 3], maxlen=5)
    assert values["queue"].maxlen == 5
    assert values["where"] == pathlib.Path("/srv/reports/q3.txt")
    assert values["docs"] == [Document(page_content="q3", metadata={"page": 1})]


class Counters(TypedDict, total=False):
    pair: tuple[int, int]
    seen: set[tuple[int, int]]


def test_tuples_come_back_as_lists_as_from_msgpack(sqlite_url: str) -> None:
    """LangGraph's savers give a tuple back as a list; a set's tuples stay tuples."""

    def count(state: Counters) -> dict[str, Any]:
        return {"pair": (2, 4), "seen": {(1, 2)}}

    g = StateGraph(Counters)
    g.add_node("count", count)
    g.add_edge(START, "count")
    saver = SavegameSaver(sqlite_url)
    graph = g.compile(checkpointer=saver)
    graph.invoke({}, conf("t"))
    graph.update_state(conf("t"), {"pair": (5, 6)})
    values = graph.get_state(conf("t")).values
    assert values["pair"] == [5, 6]
    assert values["seen"] == {(1, 2)}
    # A DeltaChannel's counters in the metadata are a tuple when LangGraph writes them.
    saver.put(conf("m"), empty_checkpoint(), {"counters": {"items": (2, 4)}}, {})
    again = SavegameSaver(sqlite_url).get_tuple(conf("m"))
    assert again is not None
    assert again.metadata["counters"] == {"items": [2, 4]}


def test_a_refused_write_records_none_of_the_tasks_writes(sqlite_url: str) -> None:
    class Handle:
        pass

    saver = SavegameSaver(sqlite_url)
    graph = StateGraph(Chat)
    graph.add_node("n", lambda s: {})
    graph.add_edge(START, "n")
    compiled = graph.compile(checkpointer=saver)
    compiled.invoke({"messages": []}, conf("t"))
    head = saver.get_tuple(conf("t"))
    assert head is not None
    with pytest.raises(SerializationError, match=r"writes\[task-1\]\[1\]\(result\)"):
        saver.put_writes(head.config, [("messages", []), ("result", Handle())], "task-1")
    after = SavegameSaver(sqlite_url).get_tuple(head.config)
    assert after is not None
    assert after.pending_writes == []


# -- the graph's own types: a module of the user's, run in fresh processes -----------------
SCHEMA = '''
import dataclasses
import enum
import operator
from typing import Annotated, Any

import pydantic
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Address(pydantic.BaseModel):
    city: str


class Customer(pydantic.BaseModel):
    name: str
    address: Address
    priority: Priority = Priority.LOW


@dataclasses.dataclass
class Decision:
    approved: bool
    reason: str


class State(pydantic.BaseModel):
    customer: Customer
    log: Annotated[list[str], operator.add] = []
    decision: Decision | None = None


class Stray:
    """Not data: refused with its path, in every mode."""


def ask(state: State) -> dict[str, Any]:
    answer = interrupt({"who": state.customer.name}, response_schema=Decision)
    return {"decision": answer, "log": [f"decided {answer.approved}"]}


def graph(saver: Any) -> Any:
    g = StateGraph(State)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    return g.compile(checkpointer=saver)
'''

START_RUN = """
import sys
from schema import Address, Customer, Priority, graph
from savegame.langgraph import SavegameSaver
from langgraph.types import Command
g = graph(SavegameSaver(sys.argv[1]))
config = {"configurable": {"thread_id": "c1"}}
out = g.invoke({"customer": Customer(name="Ada", address=Address(city="Turin"),
                priority=Priority.HIGH)}, config)
print(out["__interrupt__"][0].value["who"])
"""

RESUME_RUN = """
import sys
from schema import Decision, Priority, graph
from savegame.langgraph import SavegameSaver
from langgraph.types import Command
g = graph(SavegameSaver(sys.argv[1]))
config = {"configurable": {"thread_id": "c1"}}
before = g.get_state(config).values
assert before["customer"].address.city == "Turin", before
assert before["customer"].priority is Priority.HIGH, before
out = g.invoke(Command(resume=Decision(approved=True, reason="ok")), config)
assert out["decision"] == Decision(approved=True, reason="ok"), out
state = graph(SavegameSaver(sys.argv[1])).get_state(config).values
assert state["decision"] == Decision(approved=True, reason="ok"), state
print(state["log"])
"""


def _project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "schema.py").write_text(textwrap.dedent(SCHEMA))
    return folder


def _python(folder: Path, code: str, url: str, *, strict: bool) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), *sys.path])}
    env["LANGGRAPH_STRICT_MSGPACK"] = "true" if strict else "false"
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), url],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
def test_the_graphs_own_types_need_no_register_and_load_in_a_fresh_process(
    tmp_path: Path, sqlite_url: str, strict: bool
) -> None:
    """Pydantic models (nested), an enum and the interrupt's response_schema dataclass:
    kept by name, found again by a process that only imported the user's module."""
    folder = _project(tmp_path)
    started = _python(folder, START_RUN, sqlite_url, strict=strict)
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == "Ada"
    resumed = _python(folder, RESUME_RUN, sqlite_url, strict=strict)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "['decided True']"


def test_strict_mode_refuses_a_type_the_graphs_schemas_do_not_name(
    tmp_path: Path, sqlite_url: str
) -> None:
    """Under LANGGRAPH_STRICT_MSGPACK only the schemas' types are stored: another dataclass
    is refused at save time with its path, and nothing of the task is recorded."""
    folder = _project(tmp_path)
    code = """
    import dataclasses, sys
    from typing import Any, TypedDict
    from langgraph.graph import START, StateGraph
    from savegame.errors import SerializationError
    from savegame.langgraph import SavegameSaver

    @dataclasses.dataclass
    class Elsewhere:
        x: int

    class Loose(TypedDict):
        item: Any

    saver = SavegameSaver(sys.argv[1])
    g = StateGraph(Loose)
    g.add_node("stray", lambda s: {"item": Elsewhere(1)})
    g.add_edge(START, "stray")
    config = {"configurable": {"thread_id": "c1"}}
    try:
        g.compile(checkpointer=saver).invoke({"item": None}, config)
    except SerializationError as exc:
        print(exc)
    print(len(saver.get_tuple(config).pending_writes))
    """
    done = _python(folder, code, sqlite_url, strict=True)
    assert done.returncode == 0, done.stderr
    refusal, writes = done.stdout.strip().splitlines()
    assert "Elsewhere is not serializable until registered" in refusal
    assert "(item)" in refusal
    assert writes == "0"


def test_a_class_made_in_a_function_and_made_again_is_stored_each_time(sqlite_url: str) -> None:
    """LangGraph's tests define their state classes inside the test: the second run of one
    makes a new class of the same name, which replaces the first as the one stored."""

    def run(thread: str) -> Any:
        @dataclasses.dataclass
        class Point:
            x: int

        class Holder(TypedDict):
            point: Any  # a local class: not resolvable as an annotation here

        g = StateGraph(Holder)
        g.add_node("move", lambda s: {"point": Point(s["point"].x + 1)})
        g.add_edge(START, "move")
        graph = g.compile(checkpointer=SavegameSaver(sqlite_url))
        graph.invoke({"point": Point(1)}, conf(thread))
        return Point, graph.get_state(conf(thread)).values["point"]

    first_class, first = run("a")
    second_class, second = run("b")
    assert first_class is not second_class
    assert first == first_class(2)
    assert second == second_class(2)


def test_an_unknown_class_in_a_fresh_process_is_named(tmp_path: Path, sqlite_url: str) -> None:
    """A process that never imported the class's module does not import it: the load
    fails naming the type, and nothing is built."""
    folder = _project(tmp_path)
    assert _python(folder, START_RUN, sqlite_url, strict=False).returncode == 0
    code = """
    import sys
    from savegame.errors import SerializationError
    from savegame.langgraph import SavegameSaver
    try:
        SavegameSaver(sys.argv[1]).get_tuple({"configurable": {"thread_id": "c1"}})
    except SerializationError as exc:
        print(exc)
    print("schema" in sys.modules)
    """
    done = _python(folder, code, sqlite_url, strict=False)
    assert done.returncode == 0, done.stderr
    refusal, imported = done.stdout.strip().splitlines()
    assert "'schema.Customer' is not registered in this process" in refusal
    assert imported == "False"


def test_a_graph_with_a_pydantic_input_schema_resumes_in_a_new_saver(sqlite_url: str) -> None:
    """The same in one process: LangGraph keeps the input model in its ``__start__`` channel."""
    import pydantic

    class Input(pydantic.BaseModel):
        question: str

    class Out(TypedDict):
        question: str
        answer: str

    g = StateGraph(Out, input_schema=Input)
    g.add_node("first", lambda s: {"answer": s["question"].upper()})
    g.add_edge(START, "first")
    g.compile(checkpointer=SavegameSaver(sqlite_url)).invoke(Input(question="why"), conf("t"))
    graph = g.compile(checkpointer=SavegameSaver(sqlite_url))
    assert graph.get_state(conf("t")).values == {"question": "why", "answer": "WHY"}
    first = list(graph.get_state_history(conf("t")))[-1]
    assert first.values == {}
    assert first.next == ("__start__",)


# -- values LangGraph changes in place after put ----------------------------------------
class Edited(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    box: dict[str, Any]


def _editing_graph() -> Any:
    """A node edits a message and a nested dict in place and returns them: what each
    checkpoint holds is what the values were at its ``put``, as LangGraph's savers store."""

    def first(state: Edited) -> dict[str, Any]:
        return {"messages": [AIMessage("draft", id="a1")], "box": {"n": {"k": 1}}}

    def edit(state: Edited) -> dict[str, Any]:
        message = state["messages"][-1]
        message.content = "edited"
        state["box"]["n"]["k"] = 2
        return {"messages": [message], "box": state["box"]}

    def last(state: Edited) -> dict[str, Any]:
        return {"messages": [AIMessage("ok", id="a2")]}

    graph = StateGraph(Edited)
    graph.add_node("first", first)
    graph.add_node("edit", edit)
    graph.add_node("last", last)
    graph.add_edge(START, "first")
    graph.add_edge("first", "edit")
    graph.add_edge("edit", "last")
    graph.add_edge("last", END)
    return graph


def _history(saver: Any, thread: str) -> list[tuple[int, list[str], Any]]:
    return [
        (
            t.metadata["step"],
            [m.content for m in t.checkpoint["channel_values"].get("messages", [])],
            t.checkpoint["channel_values"].get("box"),
        )
        for t in saver.list(conf(thread))
    ]


def test_a_value_changed_in_place_is_stored_as_it_was_at_each_put(
    sqlite_url: str, tmp_path: Path
) -> None:
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    reference = SqliteSaver(sqlite3.connect(tmp_path / "lg.db", check_same_thread=False))
    start = {"messages": [AIMessage("hi", id="h1")], "box": {}}
    _editing_graph().compile(checkpointer=reference).invoke(start, conf("t"), durability="sync")
    expected = _history(reference, "t")
    assert expected[1] == (2, ["hi", "edited"], {"n": {"k": 2}})  # LangGraph's own saver
    saver = SavegameSaver(sqlite_url)
    start = {"messages": [AIMessage("hi", id="h1")], "box": {}}
    _editing_graph().compile(checkpointer=saver).invoke(start, conf("t"), durability="sync")
    saver.close()
    fresh = SavegameSaver(sqlite_url)  # read back from the store, not from the line
    try:
        assert _history(fresh, "t") == expected
    finally:
        fresh.close()


def test_a_barrier_set_added_to_after_its_put_keeps_each_puts_members(sqlite_url: str) -> None:
    """A waiting edge's channel (NamedBarrierValue) stores the same set at every step
    and adds to it in place: the put after the second member came holds both (LangGraph's
    fan-in tests lost a member about once in fifty runs, the put racing the next step)."""
    seen = {"retriever_two"}
    saver = SavegameSaver(sqlite_url)
    config = conf("t")
    for step, version in ((1, 1), (2, 2)):
        if step == 2:
            seen.add("retriever_one")
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"join": seen}
        checkpoint["channel_versions"] = {"join": version}
        config = saver.put(config, checkpoint, {"step": step, "source": "loop"}, {})
    saver.close()
    fresh = SavegameSaver(sqlite_url)
    try:
        stored = [t.checkpoint["channel_values"]["join"] for t in fresh.list(conf("t"))]
    finally:
        fresh.close()
    assert stored == [{"retriever_one", "retriever_two"}, {"retriever_two"}]
