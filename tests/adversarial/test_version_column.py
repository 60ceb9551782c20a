"""The claim filters on a run row's ``version`` column, which no check covers: a row
edited to another version is claimed by that version's worker, and refused before its
code runs (the version under the row's check says otherwise)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from savegame import RunStatus, Worker, submit
from savegame.stores import SqliteStore
from tests.runtime.version_flows import V1


def test_a_row_edited_to_another_version_is_not_run_by_that_version_s_code(
    tmp_path: Path,
) -> None:
    path = tmp_path / "fleet.db"
    with SqliteStore(path) as store:
        run_id = submit(V1, store=store).run_id
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE runs SET version = 'v2' WHERE run_id = ?", (run_id,))
    conn.close()
    with SqliteStore(path) as store:
        stats = Worker(store, poll=0.01, version="v2", backoff=60).run(idle_exit=0.2)
        assert stats.finished == {}
        assert "damaged" in stats.errors[run_id] and "'v1'" in stats.errors[run_id]
        assert store.get_run(run_id).status is RunStatus.QUEUED
        assert store.get_run(run_id).head_checkpoint_id is not None
        assert store.latest_checkpoint(run_id).header.step == 0  # no step ran
