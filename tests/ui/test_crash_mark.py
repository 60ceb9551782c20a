"""A run killed with SIGKILL and resumed by another process shows the takeover on its page.

The first checkpoint of each execution names its writer (``metadata["writer"]``): the
killed process's last checkpoint says running, the next one names another writer.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

import savegame
from savegame.model import WRITER_KEY
from tests.crash.harness import kill_after_step, run_to_end
from tests.ui.conftest import ORIGIN

pytestmark = pytest.mark.crash


def test_the_killed_process_and_the_one_that_went_on_are_named(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    killed = kill_after_step("start", url, "crash-run", 4)
    assert killed.returncode is not None and killed.returncode < 0  # SIGKILLed
    resumed = run_to_end("resume", url, "crash-run")
    assert resumed.done == "completed", resumed.stderr
    headers = list(reversed(savegame.history("crash-run", store=url)))
    writers = [(h.step, h.metadata[WRITER_KEY]) for h in headers if WRITER_KEY in h.metadata]
    assert [step for step, _ in writers] == [1, 5]  # one stamp per execution, its first checkpoint
    assert writers[0][1] != writers[1][1]
    from savegame.ui import create_app

    with TestClient(create_app(url), base_url=ORIGIN) as c:
        html = c.get("/runs/crash-run").text
    taken = html.index("taken over: ")
    assert html.rindex('id="cp-', 0, taken) == html.index(f'id="cp-{headers[5].checkpoint_id}"')
    assert f"{writers[0][1]} stopped mid-run, {writers[1][1]} went on" in html
