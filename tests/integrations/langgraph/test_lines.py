"""How SavegameSaver stores a LangGraph thread (integrations/langgraph/_lines.py and
_types.py): deltas that hold what a step appended, encryption that seals values and
refuses plaintext rows, the allow-list that refuses an unknown type with its path."""

from __future__ import annotations

import collections
import os
import sqlite3
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

import savegame

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from savegame.codec.crypto import Keyring
from savegame.codec.storage import StorageConfig
from savegame.errors import SavegameError, SerializationError
from savegame.integrations.langgraph import _lines as lines_module
from savegame.integrations.langgraph._lines import Write
from savegame.integrations.langgraph._types import RecordedError
from savegame.langgraph import SavegameSaver
from savegame.stores import SqliteStore, open_store

MESSAGE = "lorem ipsum dolor sit amet " * 80  # about 2 KB


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def talk(steps: int) -> Any:
    def say(state: Chat) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"{len(state['messages'])} {MESSAGE}")]}

    g = StateGraph(Chat)
    g.add_node("say", say)
    g.add_edge(START, "say")
    g.add_conditional_edges("say", lambda s: END if len(s["messages"]) > steps else "say")
    return g


def payloads(url: str) -> list[int]:
    store = open_store(url)
    (run,) = [r for r in store.list_runs(limit=10) if r.workflow == "langgraph"]
    return [h.size for h in reversed(store.list_checkpoints(run.run_id))]


def test_a_growing_messages_channel_stores_about_what_was_appended(sqlite_url: str) -> None:
    graph = talk(40).compile(checkpointer=SavegameSaver(sqlite_url))
    out = graph.invoke(
        {"messages": [HumanMessage(content="go")]}, {"configurable": {"thread_id": "grow"}}
    )
    assert len(out["messages"]) == 41
    sizes = payloads(sqlite_url)
    full = 40 * len(MESSAGE)
    # Every record after the first few is a delta: about one message (compressed),
    # never the whole list; a keyframe now and then is packed, not the whole list again.
    assert sum(sizes) < full
    assert sorted(sizes)[len(sizes) // 2] < len(MESSAGE)


def test_a_short_thread_is_one_keyframe_then_deltas(sqlite_url: str) -> None:
    # Each delta used to outgrow the small state it followed, so a short thread was
    # rewritten whole every step or two; a line's deltas may reach DELTA_FLOOR first.
    graph = talk(8).compile(checkpointer=SavegameSaver(sqlite_url))
    config = {"configurable": {"thread_id": "short"}}
    out = graph.invoke({"messages": [HumanMessage(content="go")]}, config)
    store = open_store(sqlite_url)
    (run,) = store.list_runs(thread_id="short")
    keyframes = [h.base_id is None for h in reversed(store.list_checkpoints(run.run_id))]
    assert keyframes == [True] + [False] * 9
    fresh = talk(8).compile(checkpointer=SavegameSaver(sqlite_url))
    assert fresh.get_state(config).values == out
    assert savegame.client.verify(store=sqlite_url).ok


class CountingStore(SqliteStore):
    """A real SQLite store that counts its journal writes."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.journal_writes: list[int] = []

    def record_intents(self, effects: Any, *, lease_token: int) -> Any:
        self.journal_writes.append(len(effects))
        return super().record_intents(effects, lease_token=lease_token)


def test_a_tasks_writes_are_journaled_in_one_store_write(tmp_path: Path) -> None:
    # One commit for a task's writes, as SqliteSaver's put_writes: they were one each.
    store = CountingStore(str(tmp_path / "lg.db"))
    saver = SavegameSaver(store)
    config = {"configurable": {"thread_id": "w", "checkpoint_ns": ""}}
    stored = saver.put(config, empty_checkpoint(), {}, {})
    saver.put_writes(stored, [("messages", MESSAGE), ("branch:to:b", None), ("n", 1)], "task-1")
    assert store.journal_writes == [3]
    found = SavegameSaver(f"sqlite:///{tmp_path / 'lg.db'}").get_tuple(stored)
    assert found is not None
    assert found.pending_writes == [
        ("task-1", "messages", MESSAGE), ("task-1", "branch:to:b", None), ("task-1", "n", 1)
    ]  # fmt: skip


def test_with_keys_no_plaintext_is_stored_and_a_plaintext_row_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lg.db'}"
    keys = StorageConfig(keyring=Keyring({"k1": os.urandom(32)}, active="k1"))
    graph = talk(3).compile(checkpointer=SavegameSaver(url, storage=keys))
    config = {"configurable": {"thread_id": "sealed"}}
    graph.invoke({"messages": [HumanMessage(content="secret-handshake-42")]}, config)
    raw = b"".join(
        bytes(str(row), "utf-8")
        for table in ("checkpoints", "effects", "blobs")
        for row in sqlite3.connect(tmp_path / "lg.db").execute(f"SELECT * FROM {table}")
    )
    assert b"secret-handshake-42" not in raw and b"lorem ipsum" not in raw
    assert SavegameSaver(url, storage=keys).get_tuple(config) is not None

    # A thread written without keys is refused, not read, once keys are configured.
    plain = SavegameSaver(url, storage=StorageConfig())
    plain.put(
        {"configurable": {"thread_id": "plain", "checkpoint_ns": ""}}, empty_checkpoint(), {}, {}
    )
    with pytest.raises(
        SavegameError, match="stored without encryption while encryption is configured"
    ):
        SavegameSaver(url, storage=keys).get_tuple({"configurable": {"thread_id": "plain"}})


class Handle:
    """Not data: refused wherever it sits."""


def test_an_unknown_type_is_refused_at_save_with_its_path(sqlite_url: str) -> None:
    saver = SavegameSaver(sqlite_url)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"tools": [1, {"conn": Handle()}]}
    checkpoint["channel_versions"] = {"tools": saver.get_next_version(None, None)}
    config = {"configurable": {"thread_id": "bad", "checkpoint_ns": ""}}
    with pytest.raises(SerializationError) as refused:
        saver.put(config, checkpoint, {}, checkpoint["channel_versions"])
    assert str(refused.value).startswith("state['c:tools'][1].conn: ")
    assert saver.get_tuple(config) is None

    stored = saver.put(config, empty_checkpoint(), {}, {})
    with pytest.raises(SerializationError, match=r"writes\[task-1\]\[0\]\(out\)"):
        saver.put_writes(stored, [("out", Handle())], "task-1")
    assert saver.get_tuple(stored).pending_writes == []  # type: ignore[union-attr]


def test_a_node_error_is_kept_as_the_string_langgraph_savers_keep(sqlite_url: str) -> None:
    def boom(state: Chat) -> dict[str, Any]:
        raise ValueError("the tool is down")

    g = StateGraph(Chat)
    g.add_node("boom", boom)
    g.add_edge(START, "boom")
    graph = g.compile(checkpointer=SavegameSaver(sqlite_url))
    config = {"configurable": {"thread_id": "err"}}
    with pytest.raises(ValueError, match="the tool is down"):
        graph.invoke({"messages": [HumanMessage(content="go")]}, config)
    saver = SavegameSaver(sqlite_url)
    (task,) = saver.get_tuple(config).pending_writes  # type: ignore[union-attr]
    assert task[1:] == ("__error__", "ValueError('the tool is down')")
    # What LangGraph's own tests do with it: a substring test on a str.
    (failed,) = graph.get_state(config).tasks
    assert "ValueError('the tool is down')" in failed.error  # type: ignore[operator]

    # A thread written before kept a RecordedError: LangGraph gets the same string.
    head = saver.get_tuple(config)
    assert head is not None
    line = saver._lines.find("err", "")
    assert line is not None
    old = Write(task[0], "__error__", RecordedError("builtins.KeyError", "k"), "", -1)
    saver._lines.put_write(line, head.checkpoint["id"], old)
    (task,) = SavegameSaver(sqlite_url).get_tuple(config).pending_writes  # type: ignore[union-attr]
    assert task[2] == "KeyError('k')"


def test_writes_after_another_saver_took_the_thread_take_it_back(sqlite_url: str) -> None:
    # The pending writes of a checkpoint whose lease another process took since: the
    # saver takes it back once and writes them (a stale token alone writes nothing).
    one, two = SavegameSaver(sqlite_url), SavegameSaver(sqlite_url)
    config = {"configurable": {"thread_id": "taken", "checkpoint_ns": ""}}
    first = one.put(config, empty_checkpoint(), {"step": 0}, {})
    two.put(first, empty_checkpoint(), {"step": 1}, {})
    line = one._lines.find("taken", "")
    assert line is not None
    stale = line.token
    one.put_writes(first, [("seen", 1), ("also", 2)], "task-a")
    assert line.token is not None and stale is not None and line.token > stale
    found = SavegameSaver(sqlite_url).get_tuple(first)
    assert found is not None
    assert found.pending_writes == [("task-a", "seen", 1), ("task-a", "also", 2)]


def test_two_savers_take_turns_on_one_thread(sqlite_url: str) -> None:
    one, two = SavegameSaver(sqlite_url), SavegameSaver(sqlite_url)
    config = {"configurable": {"thread_id": "shared", "checkpoint_ns": ""}}
    ids = []
    for saver in (one, two, one, two):
        checkpoint = empty_checkpoint()
        if ids:
            config = {"configurable": {**config["configurable"], "checkpoint_id": ids[-1]}}
        stored = saver.put(config, checkpoint, {"step": len(ids)}, {})
        saver.put_writes(stored, [("seen", len(ids))], f"task-{len(ids)}")
        ids.append(stored["configurable"]["checkpoint_id"])
    history = list(SavegameSaver(sqlite_url).list({"configurable": {"thread_id": "shared"}}))
    assert [t.checkpoint["id"] for t in history] == ids[::-1]
    assert [t.pending_writes for t in history] == [
        [(f"task-{n}", "seen", n)] for n in reversed(range(4))
    ]


def test_every_listed_checkpoint_gets_its_own_writes_however_long_the_listing(
    sqlite_url: str,
) -> None:
    # list() reads the first tuples' writes one checkpoint at a time, then the run's at once.
    saver = SavegameSaver(sqlite_url)
    config: dict[str, Any] = {"configurable": {"thread_id": "long", "checkpoint_ns": ""}}
    ids: list[str] = []
    for n in range(20):
        if ids:
            config = {"configurable": {**config["configurable"], "checkpoint_id": ids[-1]}}
        stored = saver.put(config, empty_checkpoint(), {"step": n}, {})
        writes = [("seen", n)] + ([("even", MESSAGE)] if n % 2 == 0 else [])
        saver.put_writes(stored, writes, f"task-{n}")
        ids.append(stored["configurable"]["checkpoint_id"])

    def expected(n: int) -> list[Any]:
        return [(f"task-{n}", "seen", n)] + ([(f"task-{n}", "even", MESSAGE)] if n % 2 == 0 else [])

    reader = SavegameSaver(sqlite_url)
    thread = {"configurable": {"thread_id": "long"}}
    listed = list(reader.list(thread))
    assert [t.checkpoint["id"] for t in listed] == ids[::-1]
    assert [t.pending_writes for t in listed] == [expected(n) for n in reversed(range(20))]
    assert [t.pending_writes for t in reader.list(thread, limit=3)] == [
        expected(n) for n in (19, 18, 17)
    ]
    before = {"configurable": {"thread_id": "long", "checkpoint_id": ids[12]}}
    assert [t.pending_writes for t in reader.list(thread, before=before, limit=10)] == [
        expected(n) for n in reversed(range(2, 12))
    ]


def test_writes_that_come_before_their_namespaces_first_checkpoint_are_kept(
    sqlite_url: str,
) -> None:
    # durability="async" runs a subgraph's first put and its writes in parallel threads.
    saver = SavegameSaver(sqlite_url)
    checkpoint = empty_checkpoint()
    config = {"configurable": {"thread_id": "early", "checkpoint_ns": "inner:1"}}
    early = {"configurable": {**config["configurable"], "checkpoint_id": checkpoint["id"]}}
    saver.put_writes(early, [("out", 1)], "task-a")
    assert saver.get_tuple(config) is None
    stored = saver.put(config, checkpoint, {}, {})
    found = SavegameSaver(sqlite_url).get_tuple(stored)  # from the store, not this process
    assert found is not None and found.pending_writes == [("task-a", "out", 1)]


def test_a_long_pending_write_is_stored_compressed_and_read_back_by_every_reader(
    tmp_path: Path,
) -> None:
    # The message a node appends is most of what a step journals: compressed alone, as
    # a journal row is not compressed as a whole (a checkpoint record is).
    url = f"sqlite:///{tmp_path / 'lg.db'}"
    value = [{"role": "assistant", "content": MESSAGE}]
    for storage, compressed in ((None, True), (StorageConfig(compress_threshold=0), False)):
        saver = SavegameSaver(url, storage=storage)
        config = {"configurable": {"thread_id": f"w-{compressed}", "checkpoint_ns": ""}}
        stored = saver.put(config, empty_checkpoint(), {}, {})
        saver.put_writes(stored, [("messages", value), ("small", 1)], "task-1")
        found = SavegameSaver(url, storage=storage).get_tuple(stored)
        assert found is not None
        assert found.pending_writes == [("task-1", "messages", value), ("task-1", "small", 1)]
        (run,) = [r for r in saver.store.list_runs(thread_id=f"w-{compressed}")]
        results = {e.name: e.result for e in savegame.client.list_effects(run.run_id, store=url)}
        assert results == {"messages": value, "small": 1}  # savegame's own reader too
        rows = dict(
            sqlite3.connect(tmp_path / "lg.db").execute(
                "SELECT name, result FROM effects WHERE run_id = ?", (run.run_id,)
            )
        )
        assert rows["small"] == b"1"
        assert (rows["messages"][:4] == b"\x28\xb5\x2f\xfd") is compressed
        assert (len(rows["messages"]) < len(MESSAGE) // 4) is compressed


def test_a_saver_serving_many_threads_keeps_a_bounded_number_in_memory(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A service talks to many conversations: the lines (each with its encoder) this
    # process keeps stay bounded; a thread that was let go goes on as if kept.
    monkeypatch.setattr(lines_module, "MAX_LINES", 3)
    saver = SavegameSaver(sqlite_url)
    graph = talk(2).compile(checkpointer=saver)
    for n in range(6):
        graph.invoke(
            {"messages": [HumanMessage(content="go")]}, {"configurable": {"thread_id": f"t{n}"}}
        )
    kept = saver._lines._lines
    assert [key[0] for key in kept] == ["t3", "t4", "t5"]
    # t0 was let go: it continues from its stored state, its history one chain.
    config = {"configurable": {"thread_id": "t0"}}
    out = graph.invoke({"messages": [HumanMessage(content="again")]}, config)
    assert len(out["messages"]) == 5  # its three, "again", one more answer
    assert [key[0] for key in kept] == ["t4", "t5", "t0"]
    history = list(graph.get_state_history(config))
    assert [len(s.values.get("messages", [])) for s in history][:3] == [5, 4, 3]
    assert savegame.client.verify(store=sqlite_url).ok
    line = kept[("t0", "")]
    assert len(line.stored) <= lines_module.STORED_KEPT


def test_two_threads_of_one_saver_taking_the_lease_at_once_both_get_it(sqlite_url: str) -> None:
    """A durable tool's call and LangGraph's background put_writes take a line's lease
    again at the same time: both read the same token, and the second's takeover of it
    was refused (LeaseHeldError, seen once in the full suite under load)."""
    import contextlib
    import threading

    saver = SavegameSaver(sqlite_url)
    saver.put({"configurable": {"thread_id": "t"}}, empty_checkpoint(), {}, {})
    line = saver._lines.find("t", "")
    assert line is not None
    store = saver.store
    real = store.get_run
    both_read = threading.Barrier(2, timeout=2)

    def get_run(run_id: str) -> Any:
        found = real(run_id)
        # Without the lock both now hold the same token; with it, the other thread
        # waits for this one and there is nothing to meet (the barrier breaks).
        with contextlib.suppress(threading.BrokenBarrierError):
            both_read.wait()
        return found

    store.get_run = get_run  # type: ignore[method-assign]
    errors: list[BaseException] = []

    def take() -> None:
        try:
            saver._lines._token(line, again=True)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=take) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_pending_writes_identity_is_encoded_as_encode_value_encodes_it() -> None:
    """Three plain strings go through orjson directly (``_lines._encoded``): the same
    bytes; one that UTF-8 cannot encode is still refused, naming the write."""
    from savegame import codec

    write = Write("task-1", "messages", ["hi"], "~__pregel_pull, agent", 0)
    arguments, _ = lines_module._encoded("cp-1", write, 0)
    assert arguments == codec.encode_value(["task-1", "~__pregel_pull, agent", "cp-1"], "x")
    with pytest.raises(SerializationError, match=r"writes\[task\ud800\]\[0\]\(messages\)"):
        lines_module._encoded("cp-1", Write("task\ud800", "messages", 1, "", 0), 0)


def turns_graph() -> Any:
    """``agent``, then ``research`` (a subgraph on the same messages: search, then
    summarize), then ``answer``: five messages a turn with the user's."""

    def say(name: str) -> Any:
        return lambda s: {"messages": [AIMessage(content=f"{name} {len(s['messages'])}")]}

    inner = StateGraph(Chat)
    inner.add_node("search", say("search"))
    inner.add_node("summarize", say("summarize"))
    inner.add_edge(START, "search")
    inner.add_edge("search", "summarize")
    inner.add_edge("summarize", END)
    g = StateGraph(Chat)
    g.add_node("agent", say("agent"))
    g.add_node("research", inner.compile())
    g.add_node("answer", say("answer"))
    g.add_edge(START, "agent")
    g.add_edge("agent", "research")
    g.add_edge("research", "answer")
    g.add_edge("answer", END)
    return g


def test_a_thread_driven_a_turn_at_a_time_encodes_what_each_turn_adds(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An application invokes once a turn: LangGraph decodes the thread's history at each
    and goes on from the decoded messages, and each subgraph call is a new namespace
    whose input is the whole history. The saver encodes the messages a turn adds, not
    the history again (the line's encoder learns the loaded objects, a subgraph's line
    and a write of the whole list learn from the caller's line), and every checkpoint
    still reads back as an in-memory saver holds it."""
    from langgraph.checkpoint.memory import InMemorySaver

    from savegame.codec import _values

    saver = SavegameSaver(sqlite_url)
    graphs = {"sg": turns_graph().compile(checkpointer=saver)}
    graphs["mem"] = turns_graph().compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "talk"}}

    def turn(i: int) -> None:
        for graph in graphs.values():
            graph.invoke({"messages": [HumanMessage(content=f"user {i}")]}, config)

    for i in range(12):
        turn(i)
    encoded: list[Any] = []
    real = _values.encode_at

    def counting(value: Any, room: int) -> Any:
        if isinstance(value, HumanMessage | AIMessage):
            encoded.append(value)
        return real(value, room)

    monkeypatch.setattr(_values, "encode_at", counting)
    turn(12)
    messages = graphs["sg"].get_state(config).values["messages"]
    assert len(messages) == 65
    times = collections.Counter(m.content for m in encoded)
    # A new message goes into a few checkpoints and writes (the subgraph's too: 4 or 5,
    # as LangGraph's threads interleave); the 60 before it not at all, not even in the
    # subgraph's input (a dict, ``__start__``, in its first checkpoint and its write).
    # Before, a turn encoded the history four times over and more (323 messages).
    assert all(times[m.content] <= 6 for m in messages[60:]), times
    assert not any(times[m.content] for m in messages[:60]), times
    monkeypatch.undo()
    fresh = SavegameSaver(sqlite_url)  # reads only what was stored
    stored = [s.values for s in graphs["sg"].get_state_history(config)]
    reread = [s.values for s in turns_graph().compile(checkpointer=fresh).get_state_history(config)]
    in_memory = [s.values for s in graphs["mem"].get_state_history(config)]

    def texts(states: list[Any]) -> list[list[str]]:
        return [[m.content for m in s.get("messages", [])] for s in states]

    assert texts(stored) == texts(reread) == texts(in_memory)


def test_a_put_the_store_refused_leaves_the_later_checkpoints_readable(
    sqlite_url: str,
) -> None:
    """The encoder moves on as it encodes. A put the store then refused (a disk error, a
    lost connection, a constraint) left it on a record the store did not have, and every
    later checkpoint of the line was stored as a delta on it: unreadable. The next put
    starts again from a keyframe. The refusal is the database's own: another connection
    adds a trigger to the file that aborts the third checkpoint's INSERT."""
    from langgraph.checkpoint.base import create_checkpoint

    saver = SavegameSaver(sqlite_url)
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    path = sqlite_url.removeprefix("sqlite:///")
    for step in range(5):
        checkpoint = create_checkpoint(checkpoint, None, step)
        checkpoint["channel_values"] = {"log": ["entry"] * (step + 1)}
        checkpoint["channel_versions"] = {"log": step + 1}
        if step == 2:
            with sqlite3.connect(path) as other:
                other.execute(
                    "CREATE TRIGGER refuse BEFORE INSERT ON checkpoints "
                    "BEGIN SELECT RAISE(ABORT, 'refused by the database'); END"
                )
            with pytest.raises(sqlite3.IntegrityError, match="refused by the database"):
                saver.put(config, checkpoint, {"step": step}, {"log": step + 1})
            with sqlite3.connect(path) as other:
                other.execute("DROP TRIGGER refuse")
            continue
        config = saver.put(config, checkpoint, {"step": step}, {"log": step + 1})
    stored = list(SavegameSaver(sqlite_url).list({"configurable": {"thread_id": "t"}}))
    assert [t.metadata["step"] for t in stored] == [4, 3, 1, 0]
    assert [len(t.checkpoint["channel_values"]["log"]) for t in stored] == [5, 4, 2, 1]
