"""examples/fleet: a project laid out as users lay it out (``fleet.py`` holds the workflow,
``submit.py`` does ``from fleet import wf`` and queues runs), copied to a folder of its
own. Workers and ``savegame run`` find its code from the working directory (or
``--app-dir``) with no PYTHONPATH to it; a worker that cannot leaves the runs queued,
says so once, and the next worker with the code runs them; a worker runs in the
user's own process too (``worker.py``: ``Worker.run()`` and ``await Worker.arun()``).

The fleet guide's "How workers find your code" (docs/guides/fleet.md) is what these tests check.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.projects import python, sg

from .conftest import EXAMPLES


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    shutil.copytree(EXAMPLES / "fleet", folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def submit(project: Path, *texts: str) -> list[str]:
    out = python("submit.py", *texts, cwd=project).stdout.splitlines()
    assert all(line.endswith("(fleet:wf)") for line in out), out
    return [line.split()[1] for line in out]


def runs(project: Path, *store: str) -> dict[str, dict[str, object]]:
    out = sg("runs", "--json", *store, cwd=project)
    assert out.returncode == 0, out.stderr
    return {r["run_id"]: r for r in json.loads(out.stdout)}


def test_a_worker_started_in_the_project_folder_runs_what_submit_queued(project: Path) -> None:
    ids = submit(project, "my kettle arrived broken", "where is my order?")
    out = sg("worker", "--exit-when-idle", "0.5", "--poll", "0.05", cwd=project)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "worker stopped: claimed 2 runs (2 completed)", out.stderr
    assert {r["status"] for r in runs(project).values()} == {"completed"}
    kinds = [sg("show", i, "--json", cwd=project) for i in ids]
    assert [json.loads(k.stdout)["state"]["kind"] for k in kinds] == ["refund", "question"]


def test_a_worker_without_the_code_leaves_runs_queued_and_one_with_it_runs_them(
    project: Path, tmp_path: Path
) -> None:
    [run_id] = submit(project, "my kettle arrived broken")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    store = ("--store", f"sqlite:///{project / 'savegame.db'}")
    # Started in another folder: fleet.py is not on its path. The run is held back
    # (1 s, then 2 s ...) and tried again, not failed.
    lost = sg("worker", "--exit-when-idle", "2.5", "--poll", "0.05", *store, cwd=elsewhere)
    assert lost.returncode == 0, lost.stderr
    claims = int(lost.stdout.split("claimed ")[1].split()[0])
    assert claims >= 2, lost.stdout
    told = [line for line in lost.stderr.splitlines() if "cannot import" in line]
    assert len(told) == 1, lost.stderr  # said once, however often it was tried
    assert "cannot import 'fleet' for workflow 'fleet:wf': No module named 'fleet'" in told[0]
    assert "stay queued" in told[0] and "savegame worker --app-dir DIR" in told[0]
    assert f"this worker runs in {elsewhere}" in told[0]
    info = runs(project)[run_id]
    assert (info["status"], info["error"]) == ("queued", None)

    found = sg(
        "worker", "--app-dir", str(project), "--exit-when-idle", "0.5", "--poll", "0.05",
        *store, cwd=elsewhere,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    # Released by the first worker as it stopped: claimed at once, not after its hold.
    assert found.stdout.strip() == "worker stopped: claimed 1 run (1 completed)", found.stderr
    assert runs(project)[run_id]["status"] == "completed"


def test_savegame_run_finds_the_module_from_the_project_folder(
    project: Path, tmp_path: Path
) -> None:
    here = sg("run", "fleet:wf", "--input", '{"text": "broken lid"}', "--json", cwd=project)
    assert here.returncode == 0, here.stderr
    assert json.loads(here.stdout)["state"]["kind"] == "refund"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    store = f"sqlite:///{project / 'savegame.db'}"
    args = ("run", "fleet:wf", "--input", '{"text": "hi"}', "--store", store, "--json")
    lost = sg(*args, cwd=elsewhere)
    assert lost.returncode == 2
    assert lost.stderr.startswith("{") and "No module named 'fleet'" in lost.stderr
    found = sg(*args, "--app-dir", str(project), cwd=elsewhere)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["status"] == "completed"


@pytest.mark.parametrize("how", [[], ["--async"]], ids=["run", "arun"])
def test_a_worker_inside_the_user_s_own_process(project: Path, how: list[str]) -> None:
    ids = submit(project, "broken", "a question")
    out = python("worker.py", *how, "--idle", "0.5", cwd=project)
    assert out.stdout.strip() == "worker stopped: claimed 2, ['completed']", out.stderr
    assert {runs(project)[i]["status"] for i in ids} == {"completed"}
