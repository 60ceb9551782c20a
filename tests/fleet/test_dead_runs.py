"""Dead runs look dead, and a worker on the same host takes them over at once.

A user's project (``fleet.py``, ``submit.py``) in a folder; ``savegame worker`` started
there with a 120 s lease is SIGKILLed in the middle of a step. ``savegame runs`` (its
table and ``--json``) and the UI's list say the run's owner is gone, through the one
public rule (``savegame.client.owner_gone``), with the command that continues it. A second
worker on this host then runs it to its end. Its lease would hold the run for 120 s:
that worker exits once idle for a second, so it did not wait for the lease.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from tests.projects import python, sg, start

FLEET = textwrap.dedent(
    """
    import time
    from pathlib import Path

    from savegame import END, Workflow

    HERE = Path(__file__).parent
    wf = Workflow("tickets")


    @wf.step(entry=True)
    def triage(state, ctx):
        return {"kind": "refund"}, "answer"


    @wf.step
    def answer(state, ctx):
        (HERE / "entered").touch()
        while not (HERE / "go").exists():  # the test kills the worker here
            time.sleep(0.02)
        return {"reply": "refunded"}, END
    """
)

SUBMIT = textwrap.dedent(
    """
    import savegame
    from fleet import wf

    print(savegame.submit(wf, {"text": "broken"}).run_id)
    """
)

LEASE = "120"


def wait_for(path: Path, worker: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert worker.poll() is None, worker.communicate()
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


def test_a_killed_worker_s_run_is_shown_dead_and_taken_over_at_once(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "fleet.py").write_text(FLEET)
    (project / "submit.py").write_text(SUBMIT)
    run_id = python("submit.py", cwd=project).stdout.strip()

    doomed = start("worker", "--lease-ttl", LEASE, "--poll", "0.05", cwd=project)
    try:
        wait_for(project / "entered", doomed)
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.communicate(timeout=30)

    listed = sg("runs", cwd=project)
    assert listed.returncode == 0, listed.stderr
    reason = f"PID {doomed.pid} on host {socket.gethostname()} is not running"
    assert "running (owner gone)" in listed.stdout, listed.stdout
    assert (
        f"run {run_id}: its owner is gone ({reason}); continue it: savegame resume {run_id}"
        in listed.stdout
    )
    [row] = json.loads(sg("runs", "--json", cwd=project).stdout)
    assert (row["run_id"], row["status"], row["step"]) == (run_id, "running", 1)
    assert row["owner_gone"]["owner"].startswith(f"{socket.gethostname()}:{doomed.pid}:")
    assert row["owner_gone"]["reason"] == reason
    assert row["owner_gone"]["continue_with"] == f"savegame resume {run_id}"
    assert ui_status(project, run_id) == ["running", "owner gone"]

    (project / "go").touch()
    heir = sg("worker", "--lease-ttl", LEASE, "--exit-when-idle", "1", "--poll", "0.05",
              cwd=project)  # fmt: skip
    assert heir.returncode == 0, heir.stderr
    assert heir.stdout.strip() == "worker stopped: claimed 1 run (1 completed)", heir.stderr
    assert f"run {run_id} was held by a process that is not running: freed" in heir.stderr
    [row] = json.loads(sg("runs", "--json", cwd=project).stdout)
    assert (row["status"], row["owner_gone"]) == ("completed", None)
    assert ui_status(project, run_id) == ["completed"]


def ui_status(project: Path, run_id: str) -> list[str]:
    """The status cell of the run's row in the UI's list of runs, as its words."""
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from savegame.ui import create_app

    app = create_app(f"sqlite:///{project / 'savegame.db'}")
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:  # the host it guards
        page = client.get("/runs")
    assert page.status_code == 200
    row = page.text[page.text.index(f'<tr data-run="{run_id}">') :]
    cell = row.split("<td>", 2)[1].split("</td>")[0]
    return [
        part.rsplit(">", 1)[-1].strip()
        for part in cell.split("</span>")
        if part.rsplit(">", 1)[-1].strip()
    ]
