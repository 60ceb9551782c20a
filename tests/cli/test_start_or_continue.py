"""`savegame run --run-id` / `submit --run-id` start or continue, and a busy thread: real
processes (one killed with SIGKILL mid-run), a real SQLite file, the real CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from savegame import open_store
from tests.projects import completed

from .conftest import clean_env

FLOW = textwrap.dedent(
    """
    import os
    import signal
    import time

    from savegame import END, Workflow

    HERE = os.path.dirname(os.path.abspath(__file__))


    def flag(name):
        return os.path.exists(os.path.join(HERE, name))


    def effect(line):
        # The side-effect counter: one line per step executed, whichever process ran it.
        with open(os.path.join(HERE, "effects.txt"), "a") as fh:
            fh.write(line + "\\n")


    wf = Workflow("steps")


    @wf.step(entry=True)
    def tick(state, ctx):
        n = state.get("n", 0) + 1
        effect(f"{ctx.run_id} tick {n}")
        if n == 2 and flag("CRASH"):
            os.kill(os.getpid(), signal.SIGKILL)
        if flag("HOLD"):
            open(os.path.join(HERE, f"HELD-{ctx.run_id}"), "w").close()
            while not flag("GO"):
                time.sleep(0.02)
        return {"n": n, "seen": [*state.get("seen", []), n]}, ("tick" if n < state["until"] else END)


    other = Workflow("other")


    @other.step(entry=True)
    def once(state, ctx):
        return {}, END
    """
)


@pytest.fixture
def flow(tmp_path: Path) -> Path:
    (tmp_path / "steps_flow.py").write_text(FLOW)
    return tmp_path


def sg(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return completed([sys.executable, "-m", "savegame", *args], cwd=cwd, env=clean_env())


def background(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "savegame", *args],
        cwd=cwd,
        env={**clean_env(), "PYTHONUNBUFFERED": "1"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def effects(flow: Path) -> list[str]:
    path = flow / "effects.txt"
    return path.read_text().splitlines() if path.exists() else []


def state_of(flow: Path, store: str, run_id: str) -> dict[str, Any]:
    out = sg("show", run_id, "--store", store, "--json", cwd=flow)
    assert out.returncode == 0, out.stderr
    shown: dict[str, Any] = orjson.loads(out.stdout)
    return shown


def crash(flow: Path, store: str, *args: str) -> None:
    """Start a run that SIGKILLs itself inside its second step."""
    (flow / "CRASH").touch()
    out = sg("run", "steps_flow.py:wf", "--store", store, *args, cwd=flow)
    assert out.returncode == -signal.SIGKILL, out.stdout + out.stderr
    (flow / "CRASH").unlink()


def wait_for(path: Path) -> None:
    # The other process writes it when it is inside its step; no timing is asserted.
    while not path.exists():
        os.sched_yield()


START = ["--input", '{"until": 3}']


def test_run_id_after_kill_9_continues_the_run_to_the_same_end_state(flow: Path) -> None:
    store = f"sqlite:///{flow / 'runs.db'}"
    crash(flow, store, "--run-id", "X", *START)
    assert effects(flow) == ["X tick 1", "X tick 2"]

    out = sg("run", "steps_flow.py:wf", "--run-id", "X", *START, "--store", store, cwd=flow)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert out.stdout.startswith("run X exists (running at step 1): continuing it\n")
    assert "run X ended: completed after 3 steps" in out.stdout
    # Step 1 was checkpointed before the kill: only the killed step runs again.
    assert effects(flow) == ["X tick 1", "X tick 2", "X tick 2", "X tick 3"]

    reference = sg("run", "steps_flow.py:wf", "--run-id", "R", *START, "--store", store, cwd=flow)
    assert reference.returncode == 0, reference.stderr
    resumed, uninterrupted = state_of(flow, store, "X"), state_of(flow, store, "R")
    assert resumed["state"] == uninterrupted["state"] == {"n": 3, "seen": [1, 2, 3], "until": 3}
    assert (resumed["step"], resumed["status"]) == (3, "completed")


def test_a_finished_run_returns_its_recorded_result_without_executing(flow: Path) -> None:
    store = f"sqlite:///{flow / 'runs.db'}"
    first = sg(
        "run", "steps_flow.py:wf", "--run-id", "X", *START, "--store", store, "--json", cwd=flow
    )
    assert first.returncode == 0, first.stderr
    done = effects(flow)
    assert len(done) == 3

    again = sg(
        "run", "steps_flow.py:wf", "--run-id", "X", *START, "--store", store, "--json", cwd=flow
    )
    assert again.returncode == 0, again.stderr
    assert orjson.loads(again.stdout) == orjson.loads(first.stdout)
    shown = sg("run", "steps_flow.py:wf", "--run-id", "X", "--store", store, cwd=flow)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(
        "run X exists (completed at step 3): nothing executed, as it stands:\n"
        "run X ended: completed after 3 steps\n"
    )
    submitted = sg(
        "submit", "steps_flow.py:wf", "--run-id", "X", "--store", store, "--json", cwd=flow
    )
    assert submitted.returncode == 0, submitted.stderr
    assert orjson.loads(submitted.stdout)["status"] == "completed"
    assert effects(flow) == done  # not one step ran again


def test_another_input_or_workflow_is_refused_naming_both(flow: Path) -> None:
    store = f"sqlite:///{flow / 'runs.db'}"
    crash(flow, store, "--run-id", "X", *START)
    before = effects(flow)

    out = sg(
        "run",
        "steps_flow.py:wf",
        "--run-id",
        "X",
        "--input",
        '{"until": 5}',
        "--store",
        store,
        cwd=flow,
    )
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr == (
        "error: run X exists already (running): it was started with another input: "
        "until: 5 given, 3 at its start\n"
    )
    out = sg("submit", "steps_flow.py:other", "--run-id", "X", "--store", store, cwd=flow)
    assert out.returncode == 1
    assert out.stderr == (
        "error: run X exists already (running): it is a run of workflow 'steps', not 'other'\n"
    )
    out = sg(
        "run",
        "steps_flow.py:wf",
        "--run-id",
        "X",
        "--on-exists",
        "reject",
        "--store",
        store,
        cwd=flow,
    )
    assert out.returncode == 1
    assert out.stderr.startswith("error: run X exists already (running): on_exists='reject'")
    assert effects(flow) == before


def test_on_exists_return_shows_an_unfinished_run_as_it_stands(flow: Path) -> None:
    store = f"sqlite:///{flow / 'runs.db'}"
    crash(flow, store, "--run-id", "X", *START)
    out = sg(
        "run",
        "steps_flow.py:wf",
        "--run-id",
        "X",
        "--on-exists",
        "return",
        "--store",
        store,
        "--json",
        cwd=flow,
    )
    assert out.returncode == 0, out.stderr
    result = orjson.loads(out.stdout)
    assert (result["status"], result["step"], result["state"]["n"]) == ("running", 1, 1)
    assert effects(flow) == ["X tick 1", "X tick 2"]


def test_a_thread_with_an_unfinished_run_refuses_a_second_run_naming_it(flow: Path) -> None:
    store = f"sqlite:///{flow / 'runs.db'}"
    crash(flow, store, "--thread", "T", *START)
    [crashed] = orjson.loads(
        sg("runs", "--thread", "T", "--store", store, "--json", cwd=flow).stdout
    )
    before = effects(flow)

    for command in ("run", "submit"):
        out = sg(command, "steps_flow.py:wf", "--thread", "T", *START, "--store", store, cwd=flow)
        assert out.returncode == 1, out.stdout
        assert out.stderr.startswith(
            f"error: thread T has an unfinished run {crashed['run_id']} (running): "
            f"continue it (`savegame resume {crashed['run_id']}`)"
        )
    assert effects(flow) == before
    assert (
        len(orjson.loads(sg("runs", "--thread", "T", "--store", store, "--json", cwd=flow).stdout))
        == 1
    )

    allowed = sg(
        "run",
        "steps_flow.py:wf",
        "--thread",
        "T",
        *START,
        "--on-thread-busy",
        "allow",
        "--store",
        store,
        "--json",
        cwd=flow,
    )
    assert allowed.returncode == 0, allowed.stderr
    second = orjson.loads(allowed.stdout)
    assert second["run_id"] != crashed["run_id"]
    assert (second["status"], second["thread_id"]) == ("completed", "T")


def test_on_thread_busy_wait_starts_once_the_other_run_has_finished(flow: Path) -> None:
    store = f"sqlite:///{flow / 'runs.db'}"
    (flow / "HOLD").touch()
    first = background(
        "run",
        "steps_flow.py:wf",
        "--run-id",
        "A",
        "--thread",
        "W",
        *START,
        "--store",
        store,
        cwd=flow,
    )
    wait_for(flow / "HELD-A")  # A is inside its first step

    second = background(
        "run", "steps_flow.py:wf", "--run-id", "B", "--thread", "W", "--input", '{"until": 5}',
        "--on-thread-busy", "wait", "--store", store, cwd=flow,
    )  # fmt: skip
    assert second.stdout is not None
    line = second.stdout.readline()
    assert line == "thread W has an unfinished run A (running): waiting for it to finish\n"
    (flow / "GO").touch()
    _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    rest, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert "run B ended: completed after 2 steps" in rest
    # B started from the thread's state once A had finished: it went on from n=3.
    assert state_of(flow, store, "B")["state"]["seen"] == [1, 2, 3, 4, 5]
    assert effects(flow) == [f"A tick {n}" for n in (1, 2, 3)] + [f"B tick {n}" for n in (4, 5)]


def test_two_processes_starting_one_run_id_at_once_create_it_once(flow: Path) -> None:
    store = f"sqlite:///{flow / 'runs.db'}"
    open_store(store).close()  # the file exists before the race
    (flow / "HOLD").touch()
    args = ["run", "steps_flow.py:wf", "--run-id", "X", *START, "--store", store]
    racers = [background(*args, cwd=flow) for _ in range(2)]
    wait_for(flow / "HELD-X")  # one of them created the run and is inside its first step
    # The other found the run held by a live process and says so; nothing ran there.
    finished: list[subprocess.Popen[str]] = []
    while not finished:
        time.sleep(0.01)
        finished = [p for p in racers if p.poll() is not None]
    [loser] = finished
    _, err = loser.communicate()
    assert loser.returncode == 1
    assert err.startswith("error: run X is being executed by ")
    (flow / "GO").touch()
    [winner] = [p for p in racers if p is not loser]
    _, err = winner.communicate(timeout=60)
    assert winner.returncode == 0, err
    assert effects(flow) == ["X tick 1", "X tick 2", "X tick 3"]
    runs = orjson.loads(sg("runs", "--store", store, "--json", cwd=flow).stdout)
    assert [(r["run_id"], r["status"]) for r in runs] == [("X", "completed")]
