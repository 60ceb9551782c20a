"""A LangGraph task's pending writes ride with the step's checkpoint (one commit), are
never reported stored before they are committed, and go on their own when no checkpoint
takes them (integrations/langgraph/_rides.py)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from savegame.errors import ConflictError, SerializationError
from savegame.integrations.langgraph import _rides
from savegame.integrations.langgraph._rides import BARRED_FOR, Seats
from savegame.langgraph import SavegameSaver
from savegame.stores import SqliteStore
from tests.integrations.langgraph.test_lines import talk
from tests.services import BACKENDS

#: LangGraph's calls carry the durability; a direct caller's do not.
LANGGRAPH = {_rides.DURABILITY_KEY: "sync"}


class Counted(SqliteStore):
    """A real SQLite store that counts journal writes on their own and with a checkpoint."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.alone: list[int] = []
        self.with_checkpoint: list[int] = []

    def record_intents(self, effects: Any, *, lease_token: int) -> Any:
        self.alone.append(len(effects))
        return super().record_intents(effects, lease_token=lease_token)

    def put_checkpoint(self, record: Any, **kwargs: Any) -> Any:
        self.with_checkpoint.append(len(kwargs.get("effects", ())))
        return super().put_checkpoint(record, **kwargs)


@pytest.fixture
def patient(monkeypatch: pytest.MonkeyPatch) -> None:
    # Waits long enough that a loaded machine never decides the outcome; a ride that
    # should have happened and did not fails the test instead of passing slowly.
    monkeypatch.setattr(_rides, "RIDE_WAIT", 30.0)
    monkeypatch.setattr(_rides, "BOARDING_WAIT", 30.0)


def pending(saver: Any, thread: str) -> list[Any]:
    config = {"configurable": {"thread_id": thread}}
    return [[(w[1], w[2]) for w in t.pending_writes] for t in saver.list(config)]


def test_a_steps_writes_are_committed_with_its_checkpoint(tmp_path: Path, patient: None) -> None:
    store = Counted(tmp_path / "lg.db")
    config = {"configurable": {"thread_id": "chat"}}
    expected = InMemorySaver()
    for checkpointer in (SavegameSaver(store), expected):
        talk(5).compile(checkpointer=checkpointer).invoke(
            {"messages": [HumanMessage(content="go")]}, config, durability="sync"
        )
    # The checkpoints after the first (which created the run) bring the tasks' writes,
    # each its message and the next node's trigger (the last task's, its message only),
    # when the writes' thread begins before LangGraph puts the next checkpoint: on a quiet
    # machine all but the input's (seen: alone == [] or [2]). On a loaded one LangGraph's
    # executor may start a put_writes after that put, and its writes go alone: correct,
    # only slower. So: some rode, and every write is stored once either way.
    assert sum(store.with_checkpoint) > 0, store.alone
    assert len(store.with_checkpoint) == 6
    assert sum(store.with_checkpoint) + sum(store.alone) == 11
    mine = pending(SavegameSaver(f"sqlite:///{tmp_path / 'lg.db'}"), "chat")
    theirs = pending(expected, "chat")
    assert [[c for c, _ in step] for step in mine] == [[c for c, _ in step] for step in theirs]
    assert sum(len(step) for step in mine) == 11


def test_a_direct_callers_writes_never_wait(tmp_path: Path) -> None:
    store = Counted(tmp_path / "lg.db")
    saver = SavegameSaver(store)
    stored = saver.put({"configurable": {"thread_id": "t"}}, empty_checkpoint(), {}, {})
    saver.put_writes(stored, [("a", 1), ("b", 2)], "task")
    assert store.alone == [2]  # without LangGraph's key: at once, on their own


def test_writes_no_checkpoint_takes_go_alone_and_their_channels_stop_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_rides, "RIDE_WAIT", 0.01)
    store = Counted(tmp_path / "lg.db")
    saver = SavegameSaver(store)
    stored = saver.put({"configurable": {"thread_id": "t"}}, empty_checkpoint(), {}, {})
    config = {"configurable": {**stored["configurable"], **LANGGRAPH}}
    saver.put_writes(config, [("delta", 1)], "task-1")
    assert store.alone == [1]  # stored when put_writes returned, no checkpoint or not
    line = saver._lines.find("t", "")
    assert line is not None and frozenset({"delta"}) in line.seats.barred
    found = SavegameSaver(f"sqlite:///{tmp_path / 'lg.db'}").get_tuple(stored)
    assert found is not None and found.pending_writes == [("task-1", "delta", 1)]


def test_a_checkpoint_that_fails_leaves_its_riders_to_write_alone(
    tmp_path: Path, patient: None
) -> None:
    store = Counted(tmp_path / "lg.db")
    saver = SavegameSaver(store)
    thread = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    stored = saver.put(thread, checkpoint, {}, {})
    config = {"configurable": {**stored["configurable"], **LANGGRAPH}}
    rider = threading.Thread(target=saver.put_writes, args=(config, [("seen", 1)], "task"))
    rider.start()
    line = saver._lines.find("t", "")
    assert line is not None
    while not line.seats.riders:
        rider.join(0.001)
    with pytest.raises(ConflictError):  # the same checkpoint id again
        saver.put(stored, checkpoint, {}, {})
    rider.join()
    assert store.alone == [1]
    found = SavegameSaver(f"sqlite:///{tmp_path / 'lg.db'}").get_tuple(stored)
    assert found is not None and found.pending_writes == [("task", "seen", 1)]


def test_writes_that_arrive_while_the_next_checkpoint_is_encoded_still_ride(
    tmp_path: Path, patient: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LangGraph hands a task's writes and the next checkpoint to two threads, and the
    put holds the lines' lock while it encodes. Writes that came then waited for the lock
    to say they were coming, and the put, seeing none, committed without them: they paid
    a commit of their own (a quarter of a chat10 run's). They announce themselves before
    they are encoded now, on a lock of their own, and the put waits for them."""
    store = Counted(tmp_path / "lg.db")
    saver = SavegameSaver(store)
    lines = saver._lines
    thread = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    stored = saver.put(thread, empty_checkpoint(), {}, {})
    config = {"configurable": {**stored["configurable"], **LANGGRAPH}}
    announced, encoding = threading.Event(), threading.Event()
    encoded_all = lines.encoded_all

    def writes_wait_for_the_put(lg_id: str, writes: Any, seen: Any = None) -> Any:
        announced.set()
        assert encoding.wait(30)  # the put holds the lock: encode, then ask for it
        return encoded_all(lg_id, writes, seen)

    line = lines.find("t", "")
    assert line is not None and line.encoder is not None
    encode = line.encoder.encode

    def put_holds_the_lock(*args: Any, **kwargs: Any) -> Any:
        encoding.set()
        return encode(*args, **kwargs)

    monkeypatch.setattr(lines, "encoded_all", writes_wait_for_the_put)
    monkeypatch.setattr(line.encoder, "encode", put_holds_the_lock)
    rider = threading.Thread(target=saver.put_writes, args=(config, [("seen", 1)], "task"))
    rider.start()
    assert announced.wait(30)
    saver.put(stored, empty_checkpoint(), {}, {})
    rider.join(30)
    assert not rider.is_alive()
    assert store.alone == []  # no commit of their own
    # The second checkpoint took them (the first created the run).
    assert store.with_checkpoint == [1]
    assert lines._announced == {}
    found = SavegameSaver(f"sqlite:///{tmp_path / 'lg.db'}").get_tuple(stored)
    assert found is not None and found.pending_writes == [("task", "seen", 1)]


def test_seats_bar_a_channel_set_for_a_while_and_never_seat_some() -> None:
    seats = Seats()
    assert seats.board([], frozenset({"__error_source_node__", "x"})) is None
    ride = seats.board([], frozenset({"x"}))
    assert ride is not None
    seats.leave(ride)
    assert seats.riders == [] and seats.board([], frozenset({"x"})) is None
    assert seats.board([], frozenset({"y"})) is not None
    for _ in range(BARRED_FOR):
        assert all(r.taken for r in seats.take())
    assert seats.board([], frozenset({"x"})) is not None


def test_writes_that_fail_to_encode_hold_no_checkpoint_back(tmp_path: Path) -> None:
    saver = SavegameSaver(f"sqlite:///{tmp_path / 'lg.db'}")
    stored = saver.put({"configurable": {"thread_id": "t"}}, empty_checkpoint(), {}, {})
    config = {"configurable": {**stored["configurable"], **LANGGRAPH}}
    with pytest.raises(SerializationError, match="writes"):
        saver.put_writes(config, [("bad", object())], "task")
    line = saver._lines.find("t", "")
    assert line is not None and line.seats.riders == []
    assert saver._lines._announced == {}  # nothing announced is left for a put to wait on


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
def test_on_every_backend_writes_that_rode_read_back_as_langgraph_keeps_them(
    backend: str, tmp_path: Path, patient: None
) -> None:
    config = {"configurable": {"thread_id": "chat"}}
    expected = InMemorySaver()
    talk(5).compile(checkpointer=expected).invoke(
        {"messages": [HumanMessage(content="go")]}, config, durability="sync"
    )
    with BACKENDS[backend](tmp_path) as url:
        saver = SavegameSaver(url)
        try:
            out = (
                talk(5)
                .compile(checkpointer=saver)
                .invoke({"messages": [HumanMessage(content="go")]}, config, durability="sync")
            )
            reader = SavegameSaver(url)
            mine = pending(reader, "chat")
            values = [
                m.content for m in reader.get_tuple(config).checkpoint["channel_values"]["messages"]
            ]  # type: ignore[union-attr]
            reader.close()
        finally:
            saver.close()
    assert [[c for c, _ in step] for step in mine] == [
        [c for c, _ in step] for step in pending(expected, "chat")
    ]
    assert values == [m.content for m in out["messages"]]
