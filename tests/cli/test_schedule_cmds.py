"""savegame schedule add|list|pause|resume|remove, and a worker firing one, on real SQLite files."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

import savegame
from savegame.fleet._schedules import occurrence_id
from savegame.stores import Enqueue, SqliteStore
from savegame.stores.schedules import schedules_of


def test_add_list_pause_resume_remove(cli: Any, ref: str, store: str) -> None:
    added = cli(
        "schedule", "add", "nightly", ref, "--cron", "0 9 * * 1-5", "--input", '{"until": 2}',
        "--missed", "skip", "--catchup-window", "5m", "--store", store, "--json",
    )  # fmt: skip
    assert added.exit_code == 0, added.stderr
    shown = orjson.loads(added.stdout)
    assert (shown["cron"], shown["missed"], shown["catchup_window"], shown["input"]) == (
        "0 9 * * 1-5", "skip", 300.0, {"until": 2},
    )  # fmt: skip
    assert shown["workflow_ref"] == ref  # already absolute: workers load it from anywhere
    again = cli("schedule", "add", "nightly", ref, "--cron", "@daily", "--store", store)
    assert again.exit_code != 0 and "exists already" in again.stderr
    listed = cli("schedule", "list", "--store", store)
    assert "nightly" in listed.stdout and "0 9 * * 1-5" in listed.stdout
    paused = cli("schedule", "pause", "nightly", "--store", store)
    assert "paused" in paused.stdout
    assert "paused" in cli("schedule", "list", "--store", store).stdout
    resumed = cli("schedule", "resume", "nightly", "--store", store)
    assert "resumed" in resumed.stdout and "next at" in resumed.stdout
    assert cli("schedule", "remove", "nightly", "--store", store).exit_code == 0
    assert "no schedules" in cli("schedule", "list", "--store", store).stdout
    gone = cli("schedule", "remove", "nightly", "--store", store)
    assert gone.exit_code != 0 and "no schedule 'nightly'" in gone.stderr


def test_bad_input_is_one_clear_error(cli: Any, ref: str, store: str) -> None:
    bad = cli("schedule", "add", "x", ref, "--cron", "0 9 * *", "--store", store)
    assert bad.exit_code != 0 and "has 4 fields" in bad.stderr
    policy = cli(
        "schedule", "add", "x", ref, "--cron", "@daily", "--missed", "no", "--store", store
    )
    assert policy.exit_code != 0 and "missed must be one of" in policy.stderr


def test_a_worker_starts_the_due_occurrence(cli: Any, ref: str, store: str, tmp_path: Path) -> None:
    assert (
        cli("schedule", "add", "tick", ref, "--cron", "* * * * *", "--store", store).exit_code == 0
    )
    due = datetime.now(timezone.utc).replace(second=0, microsecond=0)
    with SqliteStore(tmp_path / "savegame.db") as handle:
        s = schedules_of(handle)
        s.put_schedule(replace(s.get_schedule("tick"), next_at=due), replace=True)
    out = cli("worker", "--poll", "0.05", "--exit-when-idle", "1", "--store", store)
    assert out.exit_code == 0, out.stderr
    run_id = occurrence_id("tick", due)
    assert f"schedule tick started {run_id}" in out.stderr
    assert savegame.client.get_run(run_id, store=store).status is savegame.RunStatus.COMPLETED


def test_a_schedule_with_a_queue_fires_into_it(
    cli: Any, ref: str, store: str, tmp_path: Path
) -> None:
    assert (
        cli("queues", "declare", "nightly", "--concurrency", "1", "--store", store).exit_code == 0
    )
    added = cli(
        "schedule", "add", "tick", ref, "--cron", "* * * * *", "--queue", "nightly",
        "--priority", "2", "--store", store, "--json",
    )  # fmt: skip
    assert added.exit_code == 0, added.stderr
    assert orjson.loads(added.stdout)["queue"] == "nightly"
    listed = cli("schedule", "list", "--store", store, "--json")
    assert [(s["queue"], s["priority"]) for s in orjson.loads(listed.stdout)] == [("nightly", 2)]
    due = datetime.now(timezone.utc).replace(second=0, microsecond=0)
    with SqliteStore(tmp_path / "savegame.db") as handle:
        s = schedules_of(handle)
        s.put_schedule(replace(s.get_schedule("tick"), next_at=due), replace=True)
    out = cli(
        "worker", "--queue", "nightly", "--poll", "0.05", "--exit-when-idle", "1",
        "--store", store,
    )  # fmt: skip
    assert out.exit_code == 0, out.stderr
    run_id = occurrence_id("tick", due)
    assert savegame.client.get_run(run_id, store=store).status is savegame.RunStatus.COMPLETED
    with SqliteStore(tmp_path / "savegame.db") as handle:
        assert handle.run_queue(run_id) == Enqueue("nightly", 2)


def test_a_schedule_s_queue_must_be_declared(cli: Any, ref: str, store: str) -> None:
    out = cli(
        "schedule", "add", "tick", ref, "--cron", "@daily", "--queue", "nope", "--store", store
    )
    assert out.exit_code != 0 and "nope" in out.stderr
    assert "no schedules" in cli("schedule", "list", "--store", store).stdout
