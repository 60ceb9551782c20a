"""A run killed with SIGKILL and resumed by another process shows the takeover on its page.

The first checkpoint of each execution names its writer (``metadata["writer"]``): the
killed process's last checkpoint says running, the next one names another writer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest
from starlette.testclient import TestClient

import savegame
from savegame.model import TAKEOVER_KEY, WRITER_KEY
from tests.crash.harness import kill_after_step, run_to_end
from tests.ui.conftest import ORIGIN

pytestmark = pytest.mark.crash

SRC = Path(savegame.__file__).resolve().parents[1]


def test_the_killed_process_and_the_one_that_went_on_are_named(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    killed = kill_after_step("start", url, "crash-run", 4)
    assert killed.returncode is not None and killed.returncode < 0  # SIGKILLed
    resumed = run_to_end("resume", url, "crash-run")
    assert resumed.done == "completed", resumed.stderr
    headers = list(reversed(savegame.client.history("crash-run", store=url)))
    writers = [(h.step, h.metadata[WRITER_KEY]) for h in headers if WRITER_KEY in h.metadata]
    assert [step for step, _ in writers] == [1, 5]  # one stamp per execution, its first checkpoint
    assert writers[0][1] != writers[1][1]
    from savegame.ui import create_app

    with TestClient(create_app(url), base_url=ORIGIN) as c:
        html = c.get("/runs/crash-run").text
    taken = html.index("taken over: ")
    assert html.rindex('id="cp-', 0, taken) == html.index(f'id="cp-{headers[5].checkpoint_id}"')
    assert f"{writers[0][1]} stopped mid-run, {writers[1][1]} went on" in html


DEMO = textwrap.dedent(
    """
    import sys

    import orjson

    from savegame.demo import run_demo

    report = run_demo(store=sys.argv[1])
    print(orjson.dumps({"run_id": report.run_id, "killed": report.kill.pid,
                        "resumed": report.resumed_pid, "verdict": report.verdict}).decode())
    """
)


def test_the_demos_killed_and_resumed_run_shows_the_crash(tmp_path: Path) -> None:
    """The demo kills its second process inside the refund, before that process writes
    a checkpoint: the third names the lease it took over, and the timeline marks it."""
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAVEGAME_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
    env["TMPDIR"] = str(tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", DEMO, url], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = orjson.loads(out.stdout.splitlines()[-1])
    assert report["verdict"] is True
    run_id = report["run_id"]
    headers = list(reversed(savegame.client.history(run_id, store=url)))
    taking = [h for h in headers if TAKEOVER_KEY in h.metadata]
    assert len(taking) == 1
    (first_of_third,) = taking
    killed, went_on = first_of_third.metadata[TAKEOVER_KEY], first_of_third.metadata[WRITER_KEY]
    assert killed.split(":")[1] == str(report["killed"])  # host:pid:start of process 2
    assert went_on.split(":")[1] == str(report["resumed"])
    # Process 2 wrote nothing: no checkpoint names it as its writer.
    assert all(h.metadata.get(WRITER_KEY) != killed for h in headers)
    from savegame.ui import create_app

    with TestClient(create_app(url), base_url=ORIGIN) as c:
        html = c.get(f"/runs/{run_id}").text
    mark = html.index(f"taken over: {killed} took the run and stopped before its first")
    assert html.rindex('id="cp-', 0, mark) == html.index(f'id="cp-{first_of_third.checkpoint_id}"')
    assert f"{went_on} went on" in html
