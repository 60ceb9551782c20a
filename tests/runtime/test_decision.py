"""approve / reject through the Python API: a Decision tells what became of the run after
the decision was recorded. Real SQLite file; the worker that continues a queued run is real."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from savegame import (
    END,
    RunStatus,
    StepContext,
    Worker,
    Workflow,
    approve,
    reject,
    resume,
    run,
    tool,
)
from savegame.client import Decision, Observer, get_run
from savegame.errors import ConfigurationError
from savegame.runtime import load

GATED = textwrap.dedent(
    """
    from savegame import END, Workflow, tool
    from savegame.errors import ApprovalRejected

    sent = []


    @tool(effect="write", approval=True)
    def send(to):
        sent.append(to)
        return f"sent to {to}"


    wf = Workflow("gated")


    @wf.step(entry=True)
    def ask(state, ctx):
        try:
            return {"sent": ctx.call(send, to=state["to"])}, END
        except ApprovalRejected as no:
            return {"sent": None, "why": no.reason}, END
    """
)


@pytest.fixture
def module(tmp_path: Path) -> Iterator[Any]:
    """An importable module ``gated_mod`` holding the workflow (reference ``gated_mod:wf``)."""
    (tmp_path / "gated_mod.py").write_text(GATED)
    sys.path.insert(0, str(tmp_path))
    load("gated_mod:wf")
    yield sys.modules["gated_mod"]
    if str(tmp_path) in sys.path:
        sys.path.remove(str(tmp_path))
    sys.modules.pop("gated_mod", None)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'decide.db'}"


def paused(module: Any, url: str, run_id: str) -> None:
    result = run(module.wf, {"to": "bob"}, run_id=run_id, store=url)
    assert result.status is RunStatus.INTERRUPTED


def test_approve_continues_the_run_here_and_says_where_it_ended(module: Any, url: str) -> None:
    paused(module, url, "r")
    events: list[str] = []
    observer = Observer(
        on_step=lambda run_id, index, name: events.append(f"step {name}"),
        on_decision=lambda entry: events.append(f"decided {entry.name} {entry.status.value}"),
    )
    decision = approve("r", by="alice", store=url, observer=observer)
    assert isinstance(decision, Decision)
    assert (decision.entry.name, decision.entry.metadata["by"]) == ("send", "alice")
    assert decision.result is not None
    assert (decision.result.status, decision.result.state["sent"]) == (
        RunStatus.COMPLETED,
        "sent to bob",
    )
    assert (decision.error, decision.not_continued, decision.queued) == (None, None, False)
    assert events == ["decided send done", "step ask"]
    assert module.sent == ["bob"]


def test_reject_continues_the_run_here_too(module: Any, url: str) -> None:
    paused(module, url, "r")
    decision = reject("r", reason="not bob", store=url)
    assert decision.result is not None
    assert decision.result.state == {"to": "bob", "sent": None, "why": "not bob"}
    assert module.sent == []


def test_resume_false_records_only_and_queues_the_run_for_a_worker(module: Any, url: str) -> None:
    paused(module, url, "r")
    decision = approve("r", store=url, resume=False)
    assert (decision.result, decision.queued) == (None, True)
    assert decision.not_continued == "not asked to (resume=False)"
    assert module.sent == []
    assert get_run("r", store=url).status is RunStatus.QUEUED
    stats = Worker(url, poll=0.05).run(idle_exit=0.3)
    assert stats.finished == {"r": "completed"}
    assert module.sent == ["bob"]


def test_where_the_workflow_does_not_import_the_decision_stands_and_the_run_waits(
    module: Any, url: str
) -> None:
    paused(module, url, "r")
    # This process no longer has the code: an approval service beside the agent's.
    sys.modules.pop("gated_mod")
    sys.path.remove(str(Path(module.__file__).parent))
    decision = approve("r", store=url)
    assert decision.result is None and decision.queued
    assert isinstance(decision.error, ConfigurationError)
    assert str(decision.error) == (
        "its workflow does not load here: cannot import 'gated_mod' for workflow "
        "'gated_mod:wf': No module named 'gated_mod'"
    )
    assert resume("r", store=url, workflow=module.wf).state["sent"] == "sent to bob"


def test_a_workflow_without_a_reference_is_continued_with_the_one_given(url: str) -> None:
    gate = Workflow("inline-gate")

    @tool(effect="write", approval=True)
    def act() -> str:
        return "acted"

    @gate.step(entry=True)
    def go(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"did": ctx.call(act)}, END

    assert run(gate, run_id="g", store=url).status is RunStatus.INTERRUPTED
    left = approve("g", store=url)
    assert (left.result, left.queued) == (None, False)  # no worker could import it either
    assert isinstance(left.error, ConfigurationError)
    assert "has no stored workflow reference" in str(left.error)
    assert resume("g", store=url, workflow=gate).state == {"did": "acted"}

    assert run(gate, run_id="h", store=url).status is RunStatus.INTERRUPTED
    given = approve("h", store=url, workflow=gate)
    assert given.result is not None and given.result.state == {"did": "acted"}
