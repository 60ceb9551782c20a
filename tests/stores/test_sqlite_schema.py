"""What is specific to the SQLite schema (sqlite/_schema.py): migrations, old files, WAL setup."""

from __future__ import annotations

import multiprocessing
import sqlite3
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest

from savegame import codec
from savegame.errors import ConfigurationError
from savegame.model import CheckpointRecord, EffectStatus, RunInfo, RunStatus
from savegame.stores import SqliteStore
from savegame.stores._common import to_micros
from savegame.stores._sql.rows import EFFECT_COLS
from savegame.stores.schedules import schedules_of
from savegame.stores.sqlite._schema import MIGRATIONS, SCHEMA_VERSION
from savegame.testing.builders import OWNER, blob_digest, make_effect, make_run, next_record


def _versions(path: Path) -> list[int]:
    conn = sqlite3.connect(path)
    try:
        return [
            row[0] for row in conn.execute("SELECT version FROM savegame_schema ORDER BY version")
        ]
    finally:
        conn.close()


def test_schema_is_recorded_and_reopening_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "s.db"  # parents are created
    run, first = make_run()
    with SqliteStore(path) as store:
        lease = store.create_run(run, first, owner=OWNER, ttl=30)
        store.put_checkpoint(next_record(first), lease_token=lease.token)
    for _ in range(2):
        with SqliteStore(path) as store:
            assert store.stats().checkpoints == 2
            assert store.latest_checkpoint(run.run_id).header.step == 1
    assert _versions(path) == list(range(1, SCHEMA_VERSION + 1))


def test_a_file_from_a_newer_savegame_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    SqliteStore(path).close()
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.execute("INSERT INTO savegame_schema VALUES (?, 0)", (SCHEMA_VERSION + 1,))
    finally:
        conn.close()
    with pytest.raises(ConfigurationError, match="newer than this savegame"):
        SqliteStore(path)


# The version-1 columns of a checkpoint row; later migrations only add columns.
_V1_CHECKPOINT_COLS = (
    "thread_id, run_id, checkpoint_id, parent_id, step, node, status, next, usage, metadata,"
    " created_at, expires_at, format_version, state_version, size, checksum, payload"
)


def _old_file(
    path: Path, version: int, run: RunInfo, records: list[CheckpointRecord], token: int
) -> sqlite3.Connection:
    """A file as an older savegame wrote it: migrations up to ``version``, rows in their columns.

    The caller adds rows of its own, then commits and closes the returned connection.
    """
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute(
        "CREATE TABLE savegame_schema (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    for number in range(1, version + 1):
        for statement in MIGRATIONS[number - 1]:
            conn.execute(statement)
        conn.execute("INSERT INTO savegame_schema VALUES (?, 0)", (number,))
    head = records[-1].header
    conn.execute(
        "INSERT INTO runs (run_id, thread_id, workflow, workflow_ref, status, step,"
        " head_checkpoint_id, created_at, updated_at, error, metadata, lease_owner,"
        " lease_token, lease_expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            run.run_id, run.thread_id, run.workflow, run.workflow_ref, head.status.value, head.step,
            head.checkpoint_id, to_micros(run.created_at), to_micros(run.updated_at),
            None, '{"user":"ada"}', None, token, None,
        ),
    )  # fmt: skip
    for record in records:
        h = record.header
        conn.execute(
            f"INSERT INTO checkpoints ({_V1_CHECKPOINT_COLS}) VALUES ({', '.join('?' * 17)})",
            (
                h.thread_id, h.run_id, h.checkpoint_id, h.parent_id, h.step, h.node,
                h.status.value, h.next, orjson.dumps(h.usage.to_dict()).decode(),
                orjson.dumps(dict(h.metadata)).decode(), to_micros(h.created_at), None,
                h.format_version, h.state_version, h.size, record.checksum, record.payload,
            ),
        )  # fmt: skip
    return conn


def test_a_version_1_file_upgrades_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    run, first = make_run(metadata={"user": "ada"})
    second = next_record(first, status=RunStatus.INTERRUPTED)
    # A file as savegame wrote it before the journal existed (no cancel_requested).
    conn = _old_file(path, 1, run, [first, second], 3)
    conn.execute("COMMIT")
    conn.close()
    assert _versions(path) == [1]

    with SqliteStore(path) as store:
        got = store.get_run(run.run_id)
        assert (got.status, got.step, got.head_checkpoint_id) == (
            RunStatus.INTERRUPTED,
            1,
            second.checkpoint_id,
        )
        assert (got.metadata, got.created_at, got.cancel_requested) == (
            {"user": "ada"},
            run.created_at,
            False,
        )
        assert store.latest_checkpoint(run.run_id) == second
        assert store.get_checkpoint(first.checkpoint_id) == first
        assert store.stats().checkpoints == 2
        # The new parts work on the old rows: the journal, fenced by the kept token, and the flag.
        lease = store.acquire_lease(run.run_id, OWNER, 30)
        assert lease.token == 4
        effect = make_effect(run.run_id)
        assert store.record_intent(effect, lease_token=lease.token) == effect
        store.request_cancel(run.run_id)
        assert store.get_run(run.run_id).cancel_requested is True
        assert got.checksum == ""  # a row from before run rows had a check of their own
    assert (
        _versions(path)
        == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
        == list(range(1, SCHEMA_VERSION + 1))
    )


def test_a_version_2_file_upgrades_in_place_to_the_storage_engine(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    run, first = make_run(metadata={"user": "ada"})
    second = next_record(first)
    effect = make_effect(run.run_id, status=EffectStatus.DONE, result=b"ok")
    # A file as savegame wrote it before deltas and blobs: migrations 1-2, a journal entry.
    conn = _old_file(path, 2, run, [first, second], 1)
    conn.execute(
        f"INSERT INTO effects ({EFFECT_COLS}) VALUES ({', '.join('?' * 15)})",
        (
            effect.run_id, effect.request_id, effect.kind.value, effect.name, effect.step,
            effect.node, effect.call_index, effect.status.value, effect.arguments, effect.result,
            None, "{}", to_micros(effect.created_at), None, effect.checksum,
        ),
    )  # fmt: skip
    conn.execute("COMMIT")
    conn.close()
    assert _versions(path) == [1, 2]

    with SqliteStore(path) as store:
        # Old rows read as keyframes that refer to no blob.
        assert store.get_checkpoint(first.checkpoint_id) == first
        assert store.latest_checkpoint(run.run_id) == second
        assert store.get_chain(second.checkpoint_id) == [second]
        assert store.get_effect(run.run_id, effect.request_id) == effect
        # The new parts work beside them.
        digest = blob_digest(b"large value")
        third = next_record(second, base_id=second.checkpoint_id, blobs=(digest,))
        store.put_checkpoint(third, lease_token=1, blobs={digest: b"large value"})
        assert store.get_chain(third.checkpoint_id) == [third, second]
        assert store.get_blobs([digest]) == {digest: b"large value"}
        assert store.delete_unreferenced_blobs() == (0, 0)
        stats = store.stats()
        assert (stats.checkpoints, stats.blobs, stats.effects) == (3, 1, 1)
        sizes = store.run_sizes()
        assert [(s.run_id, s.checkpoints, s.effects) for s in sizes] == [(run.run_id, 3, 1)]
        assert store.delete_runs([run.run_id]) == 1
        assert store.delete_unreferenced_blobs() == (1, len(b"large value"))
    assert _versions(path) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]


def test_a_schedule_written_before_queues_loads_with_none_and_keeps_its_check(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v10.db"
    run, first = make_run()
    conn = _old_file(path, 10, run, [first], 1)
    at = to_micros(datetime(2030, 1, 7, 9, 0, tzinfo=timezone.utc))
    # The row as savegame wrote it before migration 11, with the check it computed then.
    conn.execute(
        "INSERT INTO schedules (name, workflow, workflow_ref, cron, input, missed,"
        " catchup_window, next_at, created_at, updated_at, paused, fired, last_run_id,"
        " metadata, checksum) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, NULL, ?, ?)",
        (
            "daily", "daily-report", "flows:daily", "0 9 * * 1-5", '{"team":"ops"}', "latest",
            60.0, at, at, at, '{"owner":"ada"}', "c1:7a204226592675de8915f1bb32a2de95",
        ),
    )  # fmt: skip
    conn.execute("COMMIT")
    conn.close()
    with SqliteStore(path) as store:
        found = schedules_of(store).get_schedule("daily")
        assert (found.queue, found.priority) == (None, 0)
        assert codec.verify_schedule(found, None) == found
    assert _versions(path) == list(range(1, SCHEMA_VERSION + 1))


def test_checkpoint_inserts_maintain_only_the_indexes_queries_use(tmp_path: Path) -> None:
    """Every index on checkpoints costs WAL pages on each checkpoint; migration 5
    dropped the one on base_id that no query read."""
    with SqliteStore(tmp_path / "s.db") as store:
        names = {
            row[0]
            for row in store._conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'checkpoints'"
            )
        }
    assert names == {
        "sqlite_autoindex_checkpoints_1",
        "checkpoints_by_run",
        "checkpoints_by_thread",
    }


def test_opening_an_up_to_date_store_does_not_wait_for_a_writer(tmp_path: Path) -> None:
    """A CLI or UI read opens the store while a worker writes: checking the schema version
    takes no write lock (it used to wait out the busy timeout, 30 s)."""
    path = tmp_path / "s.db"
    SqliteStore(path).close()  # created and migrated
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        with SqliteStore(path) as reader:
            assert reader.list_runs() == []
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def _open_when_told(path: str, go: Any, outcomes: Any) -> None:
    go.wait()
    try:
        SqliteStore(path).close()
        outcomes.put("ok")
    except Exception as exc:  # reported to the parent, which asserts on it
        outcomes.put(f"{type(exc).__name__}: {exc}")


def test_processes_opening_a_brand_new_file_together_all_succeed(tmp_path: Path) -> None:
    """Switching a new file to WAL fails at once with "database is locked" for all but one
    process (SQLite skips the busy handler there); the store retries it. Real processes,
    released together; without the retry about one trial in ten had a failure."""
    context = multiprocessing.get_context("fork")
    for trial in range(6):
        path = str(tmp_path / f"fresh-{trial}.db")
        go, outcomes = context.Event(), context.Queue()
        procs = [
            context.Process(target=_open_when_told, args=(path, go, outcomes)) for _ in range(10)
        ]
        for proc in procs:
            proc.start()
        time.sleep(0.2)
        go.set()
        for proc in procs:
            proc.join(timeout=60)
        assert [outcomes.get(timeout=5) for _ in procs] == ["ok"] * len(procs), trial
        with sqlite3.connect(path) as conn:
            versions = [row[0] for row in conn.execute("SELECT version FROM savegame_schema")]
        assert versions == list(range(1, SCHEMA_VERSION + 1))
