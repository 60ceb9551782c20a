"""Ctrl-C through the Python API, in real processes: ``savegame.run`` (sync steps), ``arun``
under ``asyncio.run`` (async steps) and an Agent against a local model server, each sent a
real SIGINT to its process group while a call is in flight (sigint_harness.py).

What each test holds the process to: after the first Ctrl-C no call starts (the calls log,
the journal, the server's requests), the boundary is saved (the head checkpoint is the step
the call was in, ``interrupted``), the program gets a KeyboardInterrupt naming the run (an
uncaught one still ends the process by SIGINT), and ``savegame resume`` takes the run to
the state an uninterrupted run ends in. A second Ctrl-C stops at once. The CLI's side is
tests/cli/test_ctrlc.py.
"""

from __future__ import annotations

import signal
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import savegame
from savegame import RunStatus
from tests import provider
from tests.runtime import sigint_workload as workload
from tests.runtime.sigint_harness import (
    Child,
    Ended,
    first_ctrl_c,
    head,
    resumed,
    second_ctrl_c,
)

pytestmark = pytest.mark.slow


fake = pytest.fixture(provider.serve, name="fake")


def reference(name: str) -> dict[str, Any]:
    """The state an uninterrupted run of ``name`` ends in (no gate, nothing logged)."""
    done = savegame.run(workload.TARGETS[name], workload.INPUTS.get(name, {}), store="memory://")
    assert done.status is RunStatus.COMPLETED
    return done.state


def stopped(ended: Ended) -> tuple[str, int]:
    """The run and step the program's KeyboardInterrupt named; the process died of it."""
    assert ended.returncode == -signal.SIGINT, ended
    [[_, run_id, step, status]] = ended.lines("INTERRUPTED")
    assert status == "interrupted"
    [message] = [line for line in ended.stdout.splitlines() if line.startswith("MESSAGE")]
    assert (
        message
        == f"MESSAGE run {run_id} stopped at step {step}: savegame resume {run_id} continues it"
    )
    return run_id, int(step)


@pytest.mark.parametrize(("name", "how"), [("sync_wf", "run"), ("async_wf", "arun")])
def test_the_first_ctrl_c_stops_at_the_boundary_and_resume_ends_as_an_uninterrupted_run(
    name: str, how: str, sqlite_url: str, tmp_path: Path
) -> None:
    child = Child.python(name, sqlite_url, how, tmp_path)
    run_id, step = stopped(first_ctrl_c(child))
    assert step == 2
    assert child.calls() == ["start 1", "end 1", "start 2", "end 2"]
    assert len(savegame.client.list_effects(run_id, store=sqlite_url)) == 2
    assert head(run_id, sqlite_url) == (2, RunStatus.INTERRUPTED, "tick")
    assert savegame.client.get_run(run_id, store=sqlite_url).lease is None

    assert resumed(run_id, sqlite_url, tmp_path) == reference(name)
    assert child.calls()[4:] == ["start 3", "end 3", "start 4", "end 4"]


def test_a_second_ctrl_c_stops_at_once_and_resume_still_ends_the_same(
    sqlite_url: str, tmp_path: Path
) -> None:
    child = Child.python("sync_wf", sqlite_url, "run", tmp_path)
    ended = second_ctrl_c(child)
    assert ended.returncode == -signal.SIGINT
    assert ended.lines("INTERRUPTED") == [["INTERRUPTED"]]  # Python's own: no run named
    assert child.calls() == ["start 1", "end 1", "start 2"]  # call 2 abandoned
    [run] = savegame.client.list_runs(store=sqlite_url)
    # Step 2 did not happen, except its journal: the write's intent, in doubt.
    assert head(run.run_id, sqlite_url) == (1, RunStatus.RUNNING, "tick")
    assert [e.status.value for e in savegame.client.list_effects(run.run_id, store=sqlite_url)] == [
        "done",
        "pending",
    ]

    child.open_gate()
    assert resumed(run.run_id, sqlite_url, tmp_path) == reference("sync_wf")
    # The idempotent write in doubt is called again with its request id, then 3 and 4.
    assert child.calls()[3:] == ["start 2", "end 2", "start 3", "end 3", "start 4", "end 4"]


def test_a_ctrl_c_in_the_last_step_returns_the_ended_run(sqlite_url: str, tmp_path: Path) -> None:
    ended = first_ctrl_c(Child.python("sync_wf", sqlite_url, "run", tmp_path, hold="4"))
    assert ended.returncode == 0, ended
    [[_, run_id, step, status]] = ended.lines("RESULT")
    assert (step, status) == ("4", "completed")
    assert savegame.client.get_checkpoint(run_id, store=sqlite_url).state == reference("sync_wf")


def test_the_ctrl_c_sent_to_the_process_alone_stops_it_the_same(
    sqlite_url: str, tmp_path: Path
) -> None:
    child = Child.python("sync_wf", sqlite_url, "run", tmp_path, hold="3")
    run_id, step = stopped(first_ctrl_c(child, group=False))
    assert step == 3 and head(run_id, sqlite_url) == (3, RunStatus.INTERRUPTED, "tick")


def test_the_step_in_flight_stops_before_its_next_call(sqlite_url: str, tmp_path: Path) -> None:
    """Two calls a step: the Ctrl-C in step 2's first call keeps its second from starting;
    the run is saved before step 2, whose finished call comes back from the journal."""
    child = Child.python("pairs_wf", sqlite_url, "run", tmp_path, hold="3")
    run_id, step = stopped(first_ctrl_c(child))
    assert child.calls() == ["start 1", "end 1", "start 2", "end 2", "start 3", "end 3"]
    assert step == 1 and head(run_id, sqlite_url) == (1, RunStatus.INTERRUPTED, "tick")
    assert len(savegame.client.list_effects(run_id, store=sqlite_url)) == 3

    assert resumed(run_id, sqlite_url, tmp_path) == reference("pairs_wf")
    assert child.calls()[6:] == ["start 4", "end 4"] + [
        f"{edge} {n}" for n in range(5, 9) for edge in ("start", "end")
    ]


def test_a_tool_s_own_process_dies_of_the_group_s_sigint_and_the_run_stops_not_fails(
    sqlite_url: str, tmp_path: Path
) -> None:
    """A terminal's Ctrl-C reaches the tool's child process too: the tool raises, and the
    step is stopped with the run (to run again on resume) rather than failed."""
    child = Child.python("shell_wf", sqlite_url, "run", tmp_path)
    child.in_call()
    child.ctrl_c()
    run_id, step = stopped(child.end())
    assert step == 1 and child.calls() == ["start 1", "end 1", "start 2"]
    assert head(run_id, sqlite_url) == (1, RunStatus.INTERRUPTED, "tick")
    assert "died with <Signals.SIGINT: 2>" in (
        savegame.client.get_run(run_id, store=sqlite_url).error or ""
    )

    child.open_gate()
    assert resumed(run_id, sqlite_url, tmp_path) == reference("shell_wf")


def test_a_program_s_own_handler_gets_the_ctrl_c_after_the_run_stopped(
    sqlite_url: str, tmp_path: Path
) -> None:
    ended = first_ctrl_c(Child.python("sync_wf", sqlite_url, "handler", tmp_path))
    assert ended.returncode == 0, ended
    assert ended.lines("HANDLER") == [["HANDLER", "1", "True"]]  # called once, put back
    [[_, run_id, step, status]] = ended.lines("RESULT")
    assert (step, status) == ("2", "interrupted")
    assert resumed(run_id, sqlite_url, tmp_path) == reference("sync_wf")


def test_a_run_started_in_another_thread_keeps_python_s_behaviour(
    sqlite_url: str, tmp_path: Path
) -> None:
    """Only the main thread may set a handler: Python's KeyboardInterrupt goes to the main
    thread, and the run goes on to its end."""
    child = Child.python("sync_wf", sqlite_url, "thread", tmp_path)
    child.in_call()
    child.ctrl_c()
    child.wait_for("the main thread's KeyboardInterrupt", lambda: "MAIN" in child.out.read_text())
    child.open_gate()
    ended = child.end()
    assert ended.returncode == 0, ended
    assert [line[2:] for line in ended.lines("RESULT")] == [["4", "completed"]]


def test_an_agent_stops_after_its_tool_round_and_asks_the_model_nothing_more(
    sqlite_url: str, tmp_path: Path, fake: provider.FakeProvider
) -> None:
    def script() -> None:
        fake.script(
            provider.CHAT,
            provider.chat(calls=[("lookup", {"city": "Oslo"})]),
            provider.chat("It is sunny in Oslo."),
        )

    script()
    env = {"SIGINT_MODEL_URL": fake.openai_url}
    child = Child.python("agent", sqlite_url, "run", tmp_path, hold="lookup Oslo", **env)
    run_id, step = stopped(first_ctrl_c(child))
    # receive (1), llm (2), tools (3): the tool round in flight finished and was saved.
    assert step == 3 and head(run_id, sqlite_url) == (3, RunStatus.INTERRUPTED, "llm")
    assert len(fake.asked) == 1
    assert [e.kind.value for e in savegame.client.list_effects(run_id, store=sqlite_url)] == [
        "llm",
        "read",
    ]

    state = resumed(run_id, sqlite_url, tmp_path, **env)
    assert len(fake.asked) == 2 and child.calls() == ["start lookup Oslo", "end lookup Oslo"]
    fake.reset()
    script()
    uninterrupted = savegame.run(
        workload.make_agent(fake.openai_url), workload.INPUTS["agent"], store="memory://"
    )
    assert state == uninterrupted.state


def test_an_agent_under_arun_stops_after_its_model_call_and_calls_no_tool(
    sqlite_url: str, tmp_path: Path, fake: provider.FakeProvider
) -> None:
    hold = threading.Event()
    fake.script(
        provider.CHAT,
        replace(provider.chat(calls=[("lookup", {"city": "Oslo"})]), gate=hold),
        provider.chat("It is sunny in Oslo."),
    )
    env = {"SIGINT_MODEL_URL": fake.openai_url}
    child = Child.python("agent", sqlite_url, "arun", tmp_path, hold="lookup Oslo", **env)
    child.wait_for("the model call", lambda: len(fake.asked) == 1)
    child.ctrl_c()
    child.noticed()
    hold.set()
    run_id, step = stopped(child.end())
    assert step == 2 and head(run_id, sqlite_url) == (2, RunStatus.INTERRUPTED, "tools")
    assert child.calls() == [] and len(fake.asked) == 1
    child.open_gate()
    resumed(run_id, sqlite_url, tmp_path, **env)
    assert len(fake.asked) == 2 and child.calls() == ["start lookup Oslo", "end lookup Oslo"]
