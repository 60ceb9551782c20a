"""The check after a thread is written: real tuples from a SqliteSaver and a SavegameSaver,
and each kind of difference named (the channel, the metadata key, the pending write)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langgraph.checkpoint.sqlite")

from savegame.integrations.langgraph._verify import differences, verify_thread
from savegame.langgraph import SavegameSaver, migrate
from tests.integrations.langgraph.migrate_graphs import conf, sqlite_saver, sqlite_source


@pytest.fixture
def moved(tmp_path: Path, sqlite_url: str) -> Path:
    path = tmp_path / "langgraph.db"
    sqlite_source(path)
    migrate(str(path), sqlite_url)
    return path


def test_the_same_thread_has_no_differences(moved: Path, sqlite_url: str) -> None:
    with sqlite_saver(moved) as lg:
        target = SavegameSaver(sqlite_url)
        for thread in ("done", "forked", "waiting"):
            assert verify_thread(lg, target, thread, ["", "x"], None) == []


def test_each_difference_is_named(moved: Path, sqlite_url: str) -> None:
    with sqlite_saver(moved) as lg:
        src = lg.get_tuple(conf("waiting", checkpoint_ns=""))
    dst = SavegameSaver(sqlite_url).get_tuple(conf("waiting", checkpoint_ns=""))
    cid = src.config["configurable"]["checkpoint_id"]
    assert differences(src, dst) == []
    values = {**dst.checkpoint["channel_values"], "results": ["A", "B"]}
    changed = dst._replace(
        checkpoint={**dst.checkpoint, "channel_values": values},
        metadata={**dst.metadata, "step": 99},
        pending_writes=dst.pending_writes[:-1],
    )
    assert differences(src, changed) == [
        f"checkpoint {cid} (namespace ''): metadata 'step': source 2, target 99",
        f"checkpoint {cid} (namespace ''): channel 'results' differs: source ['A', 'B', 'C'], "
        "target ['A', 'B']",
        f"checkpoint {cid} (namespace ''): 1 pending writes in the source, 0 in the target",
    ]
    assert differences(src, None) == [f"checkpoint {cid} (namespace ''): not in the target"]


def test_a_checkpoint_only_one_side_has_is_found(moved: Path, sqlite_url: str) -> None:
    target = SavegameSaver(sqlite_url)
    latest = target.get_tuple(conf("done", checkpoint_ns=""))
    extra = {**latest.checkpoint, "id": "ffffffff-0000-6000-8000-000000000000"}
    target.put(latest.config, extra, latest.metadata, {})
    with sqlite_saver(moved) as lg:
        found = verify_thread(lg, target, "done", [""], None)
    assert (
        found[0]
        == "history: the source's next checkpoint is "
        + str(latest.config["configurable"]["checkpoint_id"])
        + ", the target's ffffffff-0000-6000-8000-000000000000"
    )
