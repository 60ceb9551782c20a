"""``savegame.langgraph.migrate``: real SqliteSaver and PostgresSaver databases, made by
real graphs (a ``Send`` fan-out, a subgraph that interrupts, a time-travel branch), moved
into savegame stores; the graphs then go on there, and the source is never written."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import orjson
import pytest

pytest.importorskip("langgraph.checkpoint.sqlite")

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from savegame.langgraph import SavegameSaver, migrate
from tests.integrations.langgraph.migrate_graphs import (
    conf,
    graph,
    postgres_saver,
    postgres_source_url,
    set_write,
    sqlite_saver,
    sqlite_source,
    states,
)
from tests.services import postgres_schema, postgres_url

SHAPES = ["done", "forked", "waiting"]


def extend(state: list[int] | None, writes: list[list[int]]) -> list[int]:
    return [*(state or []), *(item for write in writes for item in write)]


class Deltas(TypedDict):
    items: Annotated[list[int], DeltaChannel(extend)]
    n: int


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "langgraph.db"
    sqlite_source(path)
    return path


def test_every_thread_moves_whole_and_the_source_file_is_not_written(
    source: Path, sqlite_url: str
) -> None:
    before = digest(source)
    report = migrate(str(source), sqlite_url)
    assert [(r.thread_id, r.status) for r in report.results] == [(t, "migrated") for t in SHAPES]
    assert digest(source) == before
    target = SavegameSaver(sqlite_url)
    with sqlite_saver(source) as lg:
        for thread in SHAPES:
            # What a graph shows of the thread, state by state: values, next, interrupts.
            assert states(target, thread) == states(lg, thread)
            # And what the savers return: every checkpoint, subgraph namespaces included.
            want = list(lg.list(conf(thread)))
            got = list(target.list(conf(thread)))
            assert [t.config for t in got] == [t.config for t in want]
            assert [t.pending_writes for t in got] == [t.pending_writes for t in want]
            assert [t.checkpoint for t in got] == [t.checkpoint for t in want]
    forked = {t.config["configurable"]["checkpoint_ns"] for t in target.list(conf("forked"))}
    assert len(forked) == 3  # the root and one approval subgraph per branch
    assert report.checkpoints == sum(r.checkpoints for r in report.results) == 27
    assert report.bytes_before > 0 and report.bytes_after > 0


def test_a_migrated_interrupt_resumes_on_the_new_store(
    source: Path, sqlite_url: str, tmp_path: Path
) -> None:
    reference = tmp_path / "reference.db"
    shutil.copy(source, reference)
    migrate(f"sqlite:///{source}", sqlite_url)
    moved = graph().compile(checkpointer=SavegameSaver(sqlite_url))
    pending = moved.get_state(conf("waiting"))
    assert pending.next == ("approve",)
    assert pending.tasks[0].interrupts[0].value == {"question": "send it?", "draft": "reply 1"}
    done = moved.invoke(Command(resume="yes"), conf("waiting"))
    with sqlite_saver(reference) as lg:
        expected = graph().compile(checkpointer=lg).invoke(Command(resume="yes"), conf("waiting"))
    assert done["approved"] is True
    assert [m.content for m in done["messages"]] == ["hi", "reply 1", "said yes"]
    assert done == {**expected, "messages": done["messages"]}
    assert [m.content for m in done["messages"]] == [m.content for m in expected["messages"]]


def test_a_rerun_leaves_what_is_done_and_names_pick_threads(source: Path, sqlite_url: str) -> None:
    first = migrate(str(source), sqlite_url, threads=["waiting", "nobody"])
    assert [(r.thread_id, r.status, r.reason) for r in first.results] == [
        ("nobody", "skipped", "no such thread in the source"),
        ("waiting", "migrated", None),
    ]
    again = migrate(str(source), sqlite_url)
    assert [(r.thread_id, r.status) for r in again.results] == [
        ("done", "migrated"),
        ("forked", "migrated"),
        ("waiting", "already migrated"),
    ]
    assert len(list(SavegameSaver(sqlite_url).list(conf("waiting")))) == 6  # not twice


def test_latest_only_keeps_the_newest_of_each_namespace_and_still_resumes(
    source: Path, sqlite_url: str
) -> None:
    report = migrate(str(source), sqlite_url, latest_only=True)
    assert {r.thread_id: r.checkpoints for r in report.results} == {
        "done": 2,
        "forked": 3,
        "waiting": 2,
    }
    target = SavegameSaver(sqlite_url)
    with sqlite_saver(source) as lg:
        for thread in SHAPES:
            for tup in target.list(conf(thread)):
                ns = tup.config["configurable"]["checkpoint_ns"]
                latest = lg.get_tuple(conf(thread, checkpoint_ns=ns))
                assert tup.config == latest.config and tup.checkpoint == latest.checkpoint
    moved = graph().compile(checkpointer=target)
    assert moved.invoke(Command(resume="yes"), conf("waiting"))["approved"] is True


def test_a_dry_run_reads_everything_and_writes_nothing(source: Path, tmp_path: Path) -> None:
    target = tmp_path / "never.db"
    report = migrate(str(source), f"sqlite:///{target}", dry_run=True)
    assert [(r.thread_id, r.status) for r in report.results] == [
        (t, "would migrate") for t in SHAPES
    ]
    assert report.checkpoints == 27 and report.writes > 0 and report.bytes_before > 0
    assert not target.exists()


def test_a_thread_the_target_ran_itself_is_left_alone(source: Path, sqlite_url: str) -> None:
    own = graph().compile(checkpointer=SavegameSaver(sqlite_url))
    own.invoke({"messages": [("user", "mine")]}, conf("waiting"))
    mine = states(SavegameSaver(sqlite_url), "waiting")
    report = migrate(str(source), sqlite_url)
    result = next(r for r in report.results if r.thread_id == "waiting")
    assert result.status == "skipped"
    assert "no migration wrote" in (result.reason or "")
    assert states(SavegameSaver(sqlite_url), "waiting") == mine


def test_a_source_that_is_no_langgraph_database_is_refused(tmp_path: Path) -> None:
    from savegame.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="no such file"):
        migrate(str(tmp_path / "missing.db"), "memory://")
    other = f"sqlite:///{tmp_path / 'savegame.db'}"
    SavegameSaver(other).close()
    with pytest.raises(ConfigurationError, match="is a savegame store"):
        migrate(str(tmp_path / "savegame.db"), "memory://")


def test_a_missing_driver_names_the_package(source: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from savegame.errors import ConfigurationError

    monkeypatch.setitem(__import__("sys").modules, "langgraph.checkpoint.sqlite", None)
    with pytest.raises(ConfigurationError, match="pip install langgraph-checkpoint-sqlite"):
        migrate(str(source), "memory://")


@pytest.fixture
def pg_source() -> Iterator[str]:
    pytest.importorskip("langgraph.checkpoint.postgres")
    with postgres_source_url() as url:
        yield url


def test_a_postgres_saver_database_moves_to_postgres_and_resumes(pg_source: str) -> None:
    from tests.integrations.langgraph.migrate_graphs import fill

    with postgres_saver(pg_source) as lg:
        fill(lg)
        before = {t: states(lg, t) for t in SHAPES}
        rows = lg.conn.execute("SELECT count(*) AS n FROM checkpoints").fetchone()["n"]
    with postgres_schema() as schema:
        target = postgres_url(schema)
        report = migrate(pg_source, target)
        assert [(r.thread_id, r.status) for r in report.results] == [
            (t, "migrated") for t in SHAPES
        ]
        assert report.checkpoints == rows and report.source_bytes
        saver = SavegameSaver(target)
        assert {t: states(saver, t) for t in SHAPES} == before
        done = graph().compile(checkpointer=saver).invoke(Command(resume="no"), conf("waiting"))
        assert done["approved"] is False
        saver.close()
    with postgres_saver(pg_source) as lg:  # the source is as it was
        assert {t: states(lg, t) for t in SHAPES} == before


def test_latest_only_keeps_what_a_delta_channel_is_rebuilt_from(
    tmp_path: Path, sqlite_url: str
) -> None:
    def step(state: Deltas) -> dict[str, Any]:
        return {"items": [len(state.get("items") or [])], "n": state.get("n", 0) + 1}

    g = StateGraph(Deltas)
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: END if s["n"] >= 6 else "step")
    path = tmp_path / "deltas.db"
    with sqlite_saver(path) as lg:
        g.compile(checkpointer=lg).invoke({"items": [], "n": 0}, conf("d"))
        rows = len(list(lg.list(conf("d"))))
    # The newest checkpoint holds no value of `items`: LangGraph replays its ancestors' writes.
    report = migrate(str(path), sqlite_url, latest_only=True)
    assert [(r.status, r.checkpoints) for r in report.results] == [("migrated", rows)]
    moved = g.compile(checkpointer=SavegameSaver(sqlite_url)).get_state(conf("d"))
    assert moved.values == {"items": [0, 1, 2, 3, 4, 5], "n": 6}


class Snapshotted(TypedDict):
    items: Annotated[list[int], DeltaChannel(extend, snapshot_frequency=3)]
    n: int


def test_a_delta_channels_snapshots_move_too(tmp_path: Path, sqlite_url: str) -> None:
    """Every third update of this channel LangGraph stores its whole value (a
    ``_DeltaSnapshot``): migrated like any other value, and read back the same."""

    def step(state: Snapshotted) -> dict[str, Any]:
        return {"items": [len(state.get("items") or [])], "n": state.get("n", 0) + 1}

    g = StateGraph(Snapshotted)
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: END if s["n"] >= 8 else "step")
    path = tmp_path / "snapshots.db"
    with sqlite_saver(path) as lg:
        g.compile(checkpointer=lg).invoke({"items": [], "n": 0}, conf("s"))
        rows = len(list(lg.list(conf("s"))))
    report = migrate(str(path), sqlite_url)
    assert [(r.status, r.checkpoints) for r in report.results] == [("migrated", rows)]
    moved = g.compile(checkpointer=SavegameSaver(sqlite_url)).get_state(conf("s"))
    assert moved.values == {"items": list(range(8)), "n": 8}


def test_a_json_row_of_messages_moves_as_langgraph_reads_it(source: Path, sqlite_url: str) -> None:
    """Older LangGraph wrote values as JSON, a message as LangChain's ``lc: 1`` envelope (and
    LangGraph still writes some values so): read through the migration's guard, the classes
    savegame stores come back as LangGraph's own reader builds them."""
    messages = [AIMessage(content="old", id="m-1").to_json(), HumanMessage(content="hi").to_json()]
    cid = set_write(source, "waiting", "messages", "json", orjson.dumps(messages))
    at = conf("waiting", checkpoint_ns="", checkpoint_id=cid)
    with sqlite_saver(source) as lg:
        expected = lg.get_tuple(at).pending_writes
    assert [AIMessage(content="old", id="m-1"), HumanMessage(content="hi")] in [
        v for _, _, v in expected
    ]
    report = migrate(str(source), sqlite_url)
    assert [r.status for r in report.results] == ["migrated"] * 3
    assert SavegameSaver(sqlite_url).get_tuple(at).pending_writes == expected
