"""What a LangGraph source may hold that a migration must not guess at or run.

LangGraph's serializer rebuilds objects from the module and class names stored with
them: a class it cannot import comes back as its raw fields, and a row naming
``os.system`` would be called; a JSON row's LangChain constructor (``lc: 1``) is built
by LangChain's reviver. A migration reads the source with a serializer that builds only
what savegame stores, in msgpack and JSON rows alike: anything else is reported with
its path in the checkpoint tuple, its thread skipped whole, and the source file left
byte for byte.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip("langgraph.checkpoint.sqlite")

from savegame.langgraph import SavegameSaver, migrate
from tests.integrations.langgraph.migrate_graphs import (
    conf,
    fill,
    postgres_saver,
    postgres_source_url,
    set_write,
    sqlite_saver,
    sqlite_source,
)

WIDGETS = textwrap.dedent(
    """
    import dataclasses
    from typing import Any, TypedDict

    from langgraph.graph import END, START, StateGraph


    @dataclasses.dataclass
    class Widget:
        name: str


    BUILT = []


    class Recorder:
        def __init__(self, **kwargs):
            BUILT.append(kwargs)


    class State(TypedDict):
        w: Any


    def build():
        def node(state):
            return {"w": {"ok": [1, 2, {"deep": Widget("x")}]}}

        g = StateGraph(State)
        g.add_node("n", node)
        g.add_edge(START, "n")
        g.add_edge("n", END)
        return g
    """
)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def widgets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A module of the app's own types, importable in this process only."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "widgets_app.py").write_text(WIDGETS)
    monkeypatch.syspath_prepend(str(tmp_path / "app"))
    import widgets_app  # type: ignore[import-not-found]

    yield widgets_app
    sys.modules.pop("widgets_app", None)


@pytest.fixture
def source(tmp_path: Path, widgets: Any) -> Path:
    """Threads ``good-*`` of the usual graph, and ``bad`` holding a Widget."""
    path = tmp_path / "langgraph.db"
    sqlite_source(path, prefix="good-")
    with sqlite_saver(path) as saver:
        widgets.build().compile(checkpointer=saver).invoke({"w": 0}, conf("bad"))
    return path


def first_holding_widget(path: Path) -> str:
    with sqlite_saver(path) as saver:
        tuples = sorted(
            saver.list(conf("bad")), key=lambda t: t.config["configurable"]["checkpoint_id"]
        )
    return next(
        t.config["configurable"]["checkpoint_id"]
        for t in tuples
        if any(c == "w" and v != 0 for _, c, v in t.pending_writes)
    )


def test_a_type_savegame_does_not_store_is_reported_with_its_path_not_guessed(
    source: Path, sqlite_url: str
) -> None:
    before = digest(source)
    report = migrate(str(source), sqlite_url)
    bad = next(r for r in report.results if r.thread_id == "bad")
    assert bad.status == "skipped"
    # The node's write, on the checkpoint before the one whose values hold it.
    assert bad.path == "pending_writes[0][2].ok[2].deep"
    assert bad.checkpoint_id == first_holding_widget(source)
    assert "widgets_app.Widget" in (bad.reason or "") and "does not store" in (bad.reason or "")
    assert [r.status for r in report.results if r.thread_id != "bad"] == ["migrated"] * 3
    # Nothing of the thread is in the target: whole or not at all.
    assert list(SavegameSaver(sqlite_url).list(conf("bad"))) == []
    assert digest(source) == before


def test_where_the_class_cannot_even_be_imported_it_is_reported_the_same(
    source: Path, tmp_path: Path
) -> None:
    target = f"sqlite:///{tmp_path / 'target.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAVEGAME_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # without the app's folder
    out = subprocess.run(
        [sys.executable, "-m", "savegame", "migrate", "langgraph", str(source), "--to", target,
         "--json"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    results = {r["thread_id"]: r for r in orjson.loads(out.stdout)["results"]}
    # LangGraph's own reader would have handed on {"name": "x"} here.
    assert results["bad"]["status"] == "skipped"
    assert results["bad"]["path"] == "pending_writes[0][2].ok[2].deep"
    assert "widgets_app.Widget" in results["bad"]["reason"]
    assert results["good-waiting"]["status"] == "migrated"


def test_a_class_registered_and_passed_is_read_and_comes_back(
    source: Path, sqlite_url: str, widgets: Any
) -> None:
    import savegame

    savegame.register(widgets.Widget)
    report = migrate(str(source), sqlite_url, threads=["bad"], types=[widgets.Widget])
    assert [r.status for r in report.results] == ["migrated"]
    app = widgets.build().compile(checkpointer=SavegameSaver(sqlite_url))
    assert app.get_state(conf("bad")).values == {"w": {"ok": [1, 2, {"deep": widgets.Widget("x")}]}}


def _rewrite_write(path: Path, thread: str, channel: str, value: Any) -> str:
    """Edit one stored pending write by hand: its value set to raw msgpack; its checkpoint id."""
    import ormsgpack

    return set_write(path, thread, channel, "msgpack", ormsgpack.packb(value))


def _write_index(path: Path, thread: str, cid: str, channel: str) -> int:
    with sqlite_saver(path) as saver:
        tup = saver.get_tuple(conf(thread, checkpoint_ns="", checkpoint_id=cid))
    return next(i for i, (_, c, _) in enumerate(tup.pending_writes) if c == channel)


def test_a_row_naming_os_system_is_never_called(tmp_path: Path, sqlite_url: str) -> None:
    import ormsgpack
    from langgraph.checkpoint.serde.jsonplus import EXT_CONSTRUCTOR_SINGLE_ARG

    path = tmp_path / "langgraph.db"
    sqlite_source(path)
    pwned = tmp_path / "PWNED"
    call = ormsgpack.Ext(
        EXT_CONSTRUCTOR_SINGLE_ARG, ormsgpack.packb(["os", "system", f"touch {pwned}"])
    )
    cid = _rewrite_write(path, "waiting", "topics", [call])
    before = digest(path)
    report = migrate(str(path), sqlite_url)
    assert not pwned.exists()
    waiting = next(r for r in report.results if r.thread_id == "waiting")
    assert waiting.status == "skipped" and waiting.checkpoint_id == cid
    index = _write_index(path, "waiting", cid, "topics")
    assert waiting.path == f"pending_writes[{index}][2][0]"
    assert "a os.system, a type savegame does not store" in (waiting.reason or "")
    assert digest(path) == before


def test_a_class_hidden_inside_an_allowed_one_is_found(tmp_path: Path, sqlite_url: str) -> None:
    import ormsgpack
    from langgraph.checkpoint.serde.jsonplus import (
        EXT_CONSTRUCTOR_KW_ARGS,
        EXT_CONSTRUCTOR_POS_ARGS,
    )

    path = tmp_path / "langgraph.db"
    sqlite_source(path)
    hidden = ormsgpack.Ext(EXT_CONSTRUCTOR_KW_ARGS, ormsgpack.packb(["shop", "Order", {"id": 1}]))
    send = ormsgpack.Ext(EXT_CONSTRUCTOR_POS_ARGS,
                         ormsgpack.packb(["langgraph.types", "Send", ["work", {"o": hidden}]]))  # fmt: skip
    _rewrite_write(path, "done", "__pregel_tasks", send)
    done = next(r for r in migrate(str(path), sqlite_url).results if r.thread_id == "done")
    assert done.status == "skipped"
    assert "a shop.Order inside a langgraph.types.Send" in (done.reason or "")


def test_a_value_changed_under_the_same_version_fails_verification_naming_the_channel(
    tmp_path: Path, sqlite_url: str
) -> None:
    import ormsgpack

    path = tmp_path / "langgraph.db"
    sqlite_source(path)
    conn = sqlite3.connect(path)
    cid, blob = conn.execute(
        "SELECT checkpoint_id, checkpoint FROM checkpoints WHERE thread_id = 'waiting' AND "
        "checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1"
    ).fetchone()
    # The newest checkpoint's topics, edited: LangGraph never changes a value without its
    # version, and SavegameSaver stores a channel again only when its version moved.
    keep = ormsgpack.unpackb(blob, ext_hook=lambda code, data: ormsgpack.Ext(code, data))
    keep["channel_values"]["topics"] = ["edited"]
    conn.execute("UPDATE checkpoints SET checkpoint = ? WHERE checkpoint_id = ?",
                 (ormsgpack.packb(keep), cid))  # fmt: skip
    conn.commit()
    conn.close()
    waiting = next(r for r in migrate(str(path), sqlite_url).results if r.thread_id == "waiting")
    assert waiting.status == "skipped"
    assert (waiting.reason or "").startswith("verification failed: checkpoint " + cid)
    assert "channel 'topics' differs: source ['edited'], target ['a', 'b', 'c']" in (
        waiting.reason or ""
    )
    assert list(SavegameSaver(sqlite_url).list(conf("waiting"))) == []


def test_a_pickled_row_is_skipped_never_unpickled(tmp_path: Path, sqlite_url: str) -> None:
    path = tmp_path / "langgraph.db"
    sqlite_source(path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE checkpoints SET type = 'pickle' WHERE thread_id = 'forked'")
    conn.commit()
    conn.close()
    report = migrate(str(path), sqlite_url)
    forked = next(r for r in report.results if r.thread_id == "forked")
    assert forked.status == "skipped"
    assert "could not read it" in (forked.reason or "") and "pickle" in (forked.reason or "")
    assert list(SavegameSaver(sqlite_url).list(conf("forked"))) == []
    assert [r.status for r in report.results if r.thread_id != "forked"] == ["migrated"] * 2


#: What LangChain's reviver builds from a JSON row (its "core" list names it).
PROMPT = {
    "lc": 1,
    "type": "constructor",
    "id": ["langchain", "prompts", "prompt", "PromptTemplate"],
    "kwargs": {"template": "say {x}", "input_variables": ["x"]},
}


@pytest.fixture(params=["sqlite", "postgres"])
def any_source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path | str]:
    """The usual threads in a real SqliteSaver file or PostgresSaver schema."""
    if request.param == "sqlite":
        path = tmp_path / "langgraph.db"
        sqlite_source(path)
        yield path
        return
    pytest.importorskip("langgraph.checkpoint.postgres")
    with postgres_source_url() as url:
        with postgres_saver(url) as saver:
            fill(saver)
        yield url


@contextmanager
def _saver(source: Path | str) -> Iterator[Any]:
    with sqlite_saver(source) if isinstance(source, Path) else postgres_saver(source) as saver:
        yield saver


def _first_write(source: Path | str, thread: str, channel: str) -> tuple[str, int]:
    """The checkpoint :func:`set_write` edits for ``channel``, and the write's index in that
    checkpoint's pending writes (read before the edit, with LangGraph's own reader)."""
    with _saver(source) as saver:
        tuples = sorted(
            saver.list(conf(thread)), key=lambda t: t.config["configurable"]["checkpoint_id"]
        )
    for tup in tuples:
        for index, (_, name, _) in enumerate(tup.pending_writes):
            if name == channel:
                return tup.config["configurable"]["checkpoint_id"], index
    raise AssertionError(f"no {channel} write in {thread}")


def _migrate_cli(source: Path | str, target: str) -> tuple[dict[str, Any], set[str]]:
    """``savegame migrate langgraph`` in its own process: its JSON report, and every module
    the process imported (``-X importtime`` lists each one on stderr, once)."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "savegame", "migrate", "langgraph",
         str(source), "--to", target, "--json"],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert out.returncode == 1, out.stderr[-2000:]  # 1: a thread was skipped
    imported = {
        line.rpartition("|")[2].strip()
        for line in out.stderr.splitlines()
        if line.startswith("import time:")
    }
    return {r["thread_id"]: r for r in orjson.loads(out.stdout)["results"]}, imported


def test_a_json_row_naming_a_langchain_class_is_neither_imported_nor_built(
    any_source: Path | str, tmp_path: Path
) -> None:
    # LangGraph reads a ``json`` row with LangChain's reviver, which imports and builds any
    # class its "core" list names: langchain_core.prompts is imported nowhere else.
    cid, index = _first_write(any_source, "waiting", "topics")
    assert set_write(any_source, "waiting", "topics", "json", orjson.dumps([PROMPT])) == cid
    before = digest(any_source) if isinstance(any_source, Path) else None
    results, imported = _migrate_cli(any_source, f"sqlite:///{tmp_path / 'target.db'}")
    assert not {m for m in imported if m.startswith("langchain_core.prompts")}
    waiting = results["waiting"]
    assert waiting["status"] == "skipped" and waiting["checkpoint_id"] == cid
    assert waiting["path"] == f"pending_writes[{index}][2][0]"
    unstored = "a langchain.prompts.prompt.PromptTemplate, a type savegame does not store"
    assert unstored in waiting["reason"]
    assert [results[t]["status"] for t in ("done", "forked")] == ["migrated"] * 2
    if before is not None:
        assert digest(any_source) == before


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        # LangGraph's reader hands the ``lc: 2`` envelope of a class it may not build on as
        # the envelope itself: a dict that would be stored as if it were the value.
        ({"lc": 2, "type": "constructor", "id": ["widgets_app", "Recorder"],
          "kwargs": {"armed": True}},
         "a widgets_app.Recorder, a type savegame does not store"),
        # An allowed message, whose fields hold a class savegame does not store.
        ({"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"],
          "kwargs": {"content": "hi", "additional_kwargs": {"p": PROMPT}}},
         "a langchain.prompts.prompt.PromptTemplate inside a langchain_core.messages.ai."
         "AIMessage, a type savegame does not store"),
        # LangChain hands a secret back as None: a guess, never stored.
        ({"lc": 1, "type": "secret", "id": ["OPENAI_API_KEY"]},
         "a LangChain secret (['OPENAI_API_KEY']): savegame stores no such value"),
        # LangGraph's own ``lc: 2`` spelling of a class it knows, but savegame does not store.
        ({"lc": 2, "type": "constructor", "id": ["pathlib", "Path"], "args": ["/etc"]},
         "a pathlib.Path, a type savegame does not store"),
    ],
)  # fmt: skip
def test_what_a_json_row_may_hide_is_reported_never_built(
    tmp_path: Path, sqlite_url: str, widgets: Any, value: Any, reason: str
) -> None:
    path, cid = _json_topics(tmp_path, value)
    waiting = next(r for r in migrate(str(path), sqlite_url).results if r.thread_id == "waiting")
    assert widgets.BUILT == []
    assert waiting.status == "skipped" and waiting.checkpoint_id == cid
    assert reason in (waiting.reason or "")
    assert list(SavegameSaver(sqlite_url).list(conf("waiting"))) == []


def _json_topics(tmp_path: Path, value: Any) -> tuple[Path, str]:
    """A SqliteSaver file whose first ``topics`` write of thread ``waiting`` is a ``json`` row
    of ``[value]``; its checkpoint id."""
    path = tmp_path / "langgraph.db"
    sqlite_source(path)
    return path, set_write(path, "waiting", "topics", "json", orjson.dumps([value]))


def test_a_json_row_of_a_class_registered_and_passed_comes_back(
    tmp_path: Path, sqlite_url: str, widgets: Any
) -> None:
    import savegame

    envelope = {"lc": 2, "type": "constructor", "id": ["widgets_app", "Widget"],
                "kwargs": {"name": "x"}}  # fmt: skip
    path, cid = _json_topics(tmp_path, envelope)
    # A name of its own: another test registered the Widget of an earlier import.
    savegame.register(widgets.Widget, name="adversarial.JsonWidget")
    report = migrate(str(path), sqlite_url, threads=["waiting"], types=[widgets.Widget])
    assert [r.status for r in report.results] == ["migrated"]
    tup = SavegameSaver(sqlite_url).get_tuple(conf("waiting", checkpoint_ns="", checkpoint_id=cid))
    assert [v for _, c, v in tup.pending_writes if c == "topics"] == [[widgets.Widget("x")]]
