"""Ctrl-C at ``savegame run`` and ``savegame resume``, as in a terminal: a real SIGINT to the
command's process group while a call is in flight (tests/runtime/sigint_harness.py).

The first Ctrl-C: the call in flight returns, no other starts, the boundary is saved, and
the command says ``run X stopped at step N: savegame resume X --store URL continues it``
and exits 130; that resume ends the run as an uninterrupted one ends. A second Ctrl-C stops
at once (``error: interrupted``, 130). The Python API's side is
tests/runtime/test_sigint_process.py.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

import savegame
from savegame import RunStatus
from tests import provider
from tests.runtime import sigint_workload as workload
from tests.runtime.sigint_harness import (
    NOTICE,
    WORKLOAD,
    Child,
    Ended,
    first_ctrl_c,
    head,
    resumed,
    second_ctrl_c,
)

fake = pytest.fixture(provider.serve, name="fake")


def stopped(ended: Ended, sqlite_url: str) -> tuple[str, int]:
    """The run and step the command said it stopped at; exit 130."""
    assert ended.returncode == 130, ended
    notice, said = ended.stderr.strip().splitlines()
    assert notice.startswith(NOTICE)
    words = said.split()
    run_id, step = words[1], words[5].rstrip(":")
    assert said == (
        f"run {run_id} stopped at step {step}: savegame resume {run_id} --store {sqlite_url} continues it"
    )
    return run_id, int(step)


def reference(target: Any, given: dict[str, Any]) -> dict[str, Any]:
    return savegame.run(target, given, store="memory://").state


# The sync case in the default run (two processes, about 2 s); the rest with the slow ones.
@pytest.mark.parametrize("name", ["sync_wf", pytest.param("async_wf", marks=pytest.mark.slow)])
def test_run_stops_at_the_boundary_says_how_to_resume_and_exits_130(
    name: str, sqlite_url: str, tmp_path: Path
) -> None:
    child = Child.cli(["run", f"{WORKLOAD}:{name}", "--store", sqlite_url], tmp_path)
    ended = first_ctrl_c(child)
    run_id, step = stopped(ended, sqlite_url)
    assert step == 2
    assert child.calls() == ["start 1", "end 1", "start 2", "end 2"]
    assert len(savegame.client.list_effects(run_id, store=sqlite_url)) == 2
    assert head(run_id, sqlite_url) == (2, RunStatus.INTERRUPTED, "tick")
    progress = ended.stdout.splitlines()[-1].split()[:6]  # the stop checkpoint's line
    assert progress == ["step", "2", "tick", "->", "tick", "interrupted"]

    assert resumed(run_id, sqlite_url, tmp_path) == reference(workload.TARGETS[name], {})
    assert child.calls()[4:] == ["start 3", "end 3", "start 4", "end 4"]


@pytest.mark.slow
def test_a_stopped_run_is_one_json_line_under_json(sqlite_url: str, tmp_path: Path) -> None:
    child = Child.cli(["run", f"{WORKLOAD}:sync_wf", "--store", sqlite_url, "--json"], tmp_path)
    ended = first_ctrl_c(child)
    assert ended.returncode == 130 and ended.stdout == ""
    [run] = savegame.client.list_runs(store=sqlite_url)
    said = orjson.loads(ended.stderr.strip().splitlines()[-1])
    assert said == {
        "error": f"run {run.run_id} stopped at step 2: "
        f"savegame resume {run.run_id} --store {sqlite_url} continues it",
        "code": 130,
        "type": "KeyboardInterrupt",
    }


@pytest.mark.slow
def test_a_second_ctrl_c_stops_at_once(sqlite_url: str, tmp_path: Path) -> None:
    child = Child.cli(["run", f"{WORKLOAD}:sync_wf", "--store", sqlite_url], tmp_path)
    ended = second_ctrl_c(child)
    assert ended.returncode == 130
    assert ended.stderr.endswith("error: interrupted\n")
    assert child.calls() == ["start 1", "end 1", "start 2"]
    [run] = savegame.client.list_runs(store=sqlite_url)
    assert head(run.run_id, sqlite_url) == (1, RunStatus.RUNNING, "tick")
    assert resumed(run.run_id, sqlite_url, tmp_path) == reference(workload.sync_wf, {})


@pytest.mark.slow
def test_resume_stops_the_same(sqlite_url: str, tmp_path: Path) -> None:
    first = Child.cli(["run", f"{WORKLOAD}:sync_wf", "--store", sqlite_url], tmp_path, hold="1")
    run_id, step = stopped(first_ctrl_c(first), sqlite_url)
    assert step == 1
    (tmp_path / "gate").unlink()
    again = Child.cli(["resume", run_id, "--store", sqlite_url], tmp_path, hold="3")
    ended = first_ctrl_c(again)
    assert stopped(ended, sqlite_url) == (run_id, 3)
    assert again.calls() == [f"{edge} {n}" for n in (1, 2, 3) for edge in ("start", "end")]


@pytest.mark.slow
def test_an_agent_stops_after_the_model_call_in_flight_and_calls_no_tool(
    sqlite_url: str, tmp_path: Path, fake: provider.FakeProvider
) -> None:
    def script(hold: threading.Event | None = None) -> None:
        fake.script(
            provider.CHAT,
            replace(provider.chat(calls=[("lookup", {"city": "Oslo"})]), gate=hold),
            provider.chat("It is sunny in Oslo."),
        )

    hold = threading.Event()
    script(hold)
    env = {"SIGINT_MODEL_URL": fake.openai_url}
    given = orjson.dumps(workload.INPUTS["agent"]).decode()
    args = ["run", f"{WORKLOAD}:agent", "--input", given, "--store", sqlite_url]
    child = Child.cli(args, tmp_path, hold="-", **env)
    child.wait_for("the model call", lambda: len(fake.asked) == 1)
    child.ctrl_c()
    child.noticed()
    hold.set()
    run_id, step = stopped(child.end(), sqlite_url)
    # receive (1), llm (2): the model's answer is saved; its tool call never started.
    assert step == 2 and head(run_id, sqlite_url) == (2, RunStatus.INTERRUPTED, "tools")
    assert child.calls() == [] and len(fake.asked) == 1

    state = resumed(run_id, sqlite_url, tmp_path, **env)
    assert child.calls() == ["start lookup Oslo", "end lookup Oslo"] and len(fake.asked) == 2
    fake.reset()
    script()
    assert state == reference(workload.make_agent(fake.openai_url), workload.INPUTS["agent"])
