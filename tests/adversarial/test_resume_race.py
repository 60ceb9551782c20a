"""Two processes resume one run; the one that loses says so and calls nothing damaged
(issue 30, point 7).

``resume`` read the run row, imported the workflow (as slow as the user's module makes
it), then took the lease and compared the row it read first with the head it read now:
a resume that lost the race to one that finished the run meanwhile saw ``running``
against ``completed`` and exited 9 (damaged data, which pages an operator) over a store
that ``savegame verify`` passes. Here the slow import is held by the test: the module
says on stdout that it is being imported and waits for a line on stdin, while a second
``savegame resume`` runs the run to its end. The first must then refuse as for any
ended run, exit 4, and the store must verify.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import savegame
from tests import services

ROOT = Path(__file__).resolve().parents[2]
SRC = Path(savegame.__file__).resolve().parents[1]
FLOW = "tests.adversarial.resume_race_flow:wf"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SAVEGAME_", "SG_RACE_"))}
    return {**env, "PYTHONPATH": os.pathsep.join([str(SRC), str(ROOT)]), **extra}


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "savegame", *args],
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with services.BACKENDS[request.param](tmp_path) as found:
        yield found


def test_a_resume_that_loses_the_race_says_the_run_ended(url: str) -> None:
    killed = _cli("run", FLOW, "--run-id", "race", "--store", url, SG_RACE_KILL="1")
    assert killed.returncode == -9, killed.stderr  # SIGKILLed in its second step: left running
    assert savegame.client.get_run("race", store=url).status.value == "running"

    slow = subprocess.Popen(
        [sys.executable, "-m", "savegame", "resume", "race", "--store", url],
        env=_env(SG_RACE_HOLD="1"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert slow.stdin is not None and slow.stdout is not None
    try:
        # It has read the run (running) and is importing the workflow, the lease not taken.
        assert slow.stdout.readline() == "importing the workflow\n"
        fast = _cli("resume", "race", "--store", url)
        assert fast.returncode == 0, fast.stderr
        assert savegame.client.get_run("race", store=url).status.value == "completed"
        _, err = slow.communicate("go\n", timeout=120)
    finally:
        if slow.poll() is None:
            slow.kill()
            slow.wait()
    assert (slow.returncode, err.strip()) == (4, "error: cannot resume run race: it is completed")
    assert _cli("verify", "--store", url).returncode == 0
