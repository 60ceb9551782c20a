"""run / runs / history / show against a real SQLite file, checked through --json."""

from __future__ import annotations

import datetime
import itertools
from pathlib import Path
from typing import Any

import pytest

from savegame.codec import from_data

RUN_FIELDS = {
    "run_id",
    "thread_id",
    "workflow",
    "status",
    "step",
    "head_checkpoint_id",
    "created_at",
    "updated_at",
}
CHECKPOINT_FIELDS = {"run_id", "checkpoint_id", "parent_id", "step", "node", "status", "next"}


def start(cli: Any, ref: str, store: str, *extra: str, until: int = 3) -> dict[str, Any]:
    out = cli("run", ref, "--input", f'{{"until": {until}}}', "--store", store, "--json", *extra)
    assert out.exit_code == 0, out.stderr
    result: dict[str, Any] = out.json()
    return result


def test_run_prints_each_checkpoint_and_the_final_state(cli: Any, ref: str, store: str) -> None:
    out = cli("run", ref, "--input", '{"until": 3}', "--store", store)
    assert out.exit_code == 0, out.stderr
    assert out.stderr == ""
    lines = [line for line in out.stdout.splitlines() if line.startswith("step ")]
    assert [line.split()[1] for line in lines] == ["0", "1", "2", "3"]
    assert "completed after 3 steps" in out.stdout
    assert '"$sg:tuple"' in out.stdout


def test_run_json_returns_the_result_with_tagged_state(cli: Any, ref: str, store: str) -> None:
    result = start(cli, ref, store, "--run-id", "r-1", "--thread", "t-1", until=4)
    assert result["run_id"] == "r-1"
    assert result["thread_id"] == "t-1"
    assert result["status"] == "completed"
    assert result["step"] == 4
    assert result["state"]["n"] == 4
    assert result["state"]["seen"] == {"$sg:tuple": [1, 2, 3, 4]}
    assert from_data(result["state"])["day"] == datetime.date(2024, 1, 4)


def test_input_accepts_tagged_values(cli: Any, ref: str, store: str) -> None:
    tagged = '{"until": 2, "seen": {"$sg:tuple": [-1]}, "note": {"$sg:bytes": "aGk="}}'
    out = cli("run", ref, "--input", tagged, "--store", store, "--json")
    assert out.exit_code == 0, out.stderr
    state = from_data(out.json()["state"])
    assert (state["seen"], state["note"]) == ((-1, 1, 2), b"hi")


def test_runs_json_lists_newest_first_and_filters(cli: Any, ref: str, store: str) -> None:
    first = start(cli, ref, store, "--thread", "alpha")
    second = start(cli, ref, store, "--thread", "beta", until=2)
    runs = cli("runs", "--store", store, "--json").json()
    assert [r["run_id"] for r in runs] == [second["run_id"], first["run_id"]]
    for r in runs:
        assert set(r) >= RUN_FIELDS
        assert r["workflow"] == "counter"
        assert r["status"] == "completed"
    assert runs[0]["step"] == 2
    assert runs[0]["head_checkpoint_id"] == second["checkpoint_id"]
    assert runs[0]["workflow_ref"].endswith("counter_flow.py:wf")

    alpha = cli("runs", "--thread", "alpha", "--store", store, "--json").json()
    assert [r["run_id"] for r in alpha] == [first["run_id"]]
    assert cli("runs", "--status", "failed", "--store", store, "--json").json() == []
    assert len(cli("runs", "--limit", "1", "--store", store, "--json").json()) == 1


def test_history_json_is_newest_first_with_parent_links(cli: Any, ref: str, store: str) -> None:
    result = start(cli, ref, store, until=3)
    items = cli("history", result["run_id"], "--store", store, "--json").json()
    assert [h["step"] for h in items] == [3, 2, 1, 0]
    for h in items:
        assert set(h) >= CHECKPOINT_FIELDS
        assert h["run_id"] == result["run_id"]
        assert "state" not in h
    assert items[0]["checkpoint_id"] == result["checkpoint_id"]
    assert (items[0]["status"], items[0]["next"]) == ("completed", None)
    assert (items[-1]["node"], items[-1]["next"], items[-1]["parent_id"]) == (None, "tick", None)
    for newer, older in itertools.pairwise(items):
        assert newer["parent_id"] == older["checkpoint_id"]
        assert newer["checkpoint_id"] > older["checkpoint_id"]
    limited = cli("history", result["run_id"], "--limit", "2", "--store", store, "--json").json()
    assert [h["step"] for h in limited] == [3, 2]


def test_show_by_run_id_is_the_latest_checkpoint(cli: Any, ref: str, store: str) -> None:
    result = start(cli, ref, store, until=3)
    by_run = cli("show", result["run_id"], "--store", store, "--json").json()
    assert CHECKPOINT_FIELDS | {"state"} <= set(by_run)
    assert by_run["checkpoint_id"] == result["checkpoint_id"]
    assert by_run["step"] == 3
    assert by_run["state"] == result["state"]
    state = from_data(by_run["state"])
    assert state == {"until": 3, "n": 3, "seen": (1, 2, 3), "day": datetime.date(2024, 1, 3)}


def test_show_by_checkpoint_id_is_that_checkpoint(cli: Any, ref: str, store: str) -> None:
    result = start(cli, ref, store, until=3)
    history = cli("history", result["run_id"], "--store", store, "--json").json()
    step_one = next(h for h in history if h["step"] == 1)
    shown = cli("show", step_one["checkpoint_id"], "--store", store, "--json").json()
    assert shown["checkpoint_id"] == step_one["checkpoint_id"]
    assert (shown["step"], shown["node"], shown["next"]) == (1, "tick", "tick")
    assert from_data(shown["state"]) == {
        "until": 3,
        "n": 1,
        "seen": (1,),
        "day": datetime.date(2024, 1, 1),
    }


def test_human_views_name_the_ids(cli: Any, ref: str, store: str) -> None:
    result = start(cli, ref, store, "--thread", "support-42")
    run_id, head = result["run_id"], result["checkpoint_id"]
    runs = cli("runs", "--store", store)
    assert runs.exit_code == 0
    assert run_id in runs.stdout and "support-42" in runs.stdout and "completed" in runs.stdout
    history = cli("history", run_id, "--store", store)
    assert history.exit_code == 0
    assert head in history.stdout and "(input)" in history.stdout
    shown = cli("show", head, "--store", store)
    assert shown.exit_code == 0
    assert run_id in shown.stdout and '"$sg:date": "2024-01-03"' in shown.stdout


def test_store_defaults_to_the_environment_then_the_current_folder(
    cli: Any, ref: str, store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAVEGAME_STORE", store)
    result = start_without_store(cli, ref)
    assert [r["run_id"] for r in cli("runs", "--store", store, "--json").json()] == [result]

    monkeypatch.delenv("SAVEGAME_STORE")
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    other = start_without_store(cli, ref)
    assert (workdir / "savegame.db").exists()
    assert [r["run_id"] for r in cli("runs", "--json").json()] == [other]


def start_without_store(cli: Any, ref: str) -> str:
    out = cli("run", ref, "--json")
    assert out.exit_code == 0, out.stderr
    run_id: str = out.json()["run_id"]
    return run_id


def test_a_failed_run_resumes_from_its_last_checkpoint(
    cli: Any, ref: str, store: str, workflow_file: Path
) -> None:
    flag = workflow_file.parent / "FAIL"
    flag.touch()
    out = cli("run", ref, "--input", '{"until": 3}', "--run-id", "flaky", "--store", store)
    assert out.exit_code == 1
    assert out.stderr == (
        "error: run flaky: step 'tick' raised RuntimeError: the flaky API said no\n"
    )
    failed = cli("runs", "--status", "failed", "--store", store, "--json").json()
    assert [(r["run_id"], r["step"]) for r in failed] == [("flaky", 1)]

    flag.unlink()
    resumed = cli("resume", "flaky", "--store", store, "--json")
    assert resumed.exit_code == 0, resumed.stderr
    state = from_data(resumed.json()["state"])
    assert state == {"until": 3, "n": 3, "seen": (1, 2, 3), "day": datetime.date(2024, 1, 3)}
    statuses = [h["status"] for h in cli("history", "flaky", "--store", store, "--json").json()]
    assert statuses == ["completed", "running", "failed", "running", "running"]
