"""The model call the agent SDK integrations share (integrations/_model_calls.py): made once,
committed before the framework sees it, replayed when the step runs again, counted both
times, and refused when the entry at its position is another integration's.

In-process on a real SQLite file; the step waits on ``ctx.interrupt`` after its model call,
so a resume runs it again and the journal answers (the integrations' own tests drive it
through pydantic-ai, the Agents SDK and ADK, and kill processes in the middle).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from savegame import END, RunStatus, StepContext, Workflow, resume, run
from savegame.client import list_effects
from savegame.effects import ModelCall
from savegame.errors import ConfigurationError
from savegame.integrations._model_calls import journaled_model_call

CALL = ModelCall("llm:m", [{"role": "user", "content": "hi"}], [], {})


def workflow(payload: str, asked: list[str], *, shape: type = object) -> Workflow:
    """One step: a model call kept under ``payload``, then a question to a person."""
    wf = Workflow("model-calls")

    async def ask(request_id: str) -> dict[str, Any]:
        asked.append(request_id)
        return {payload: {"text": "hello"}, "input_tokens": 7, "cost_usd": 0.5}

    @wf.step(entry=True)
    async def talk(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        assert ctx.calls is not None
        kept = await journaled_model_call(
            ctx, ctx.calls, CALL, ask,
            system="test", payload=payload, recorded_by="this test's step", payload_type=shape,
        )  # fmt: skip
        ok = ctx.interrupt("send?")
        return {"said": kept[payload]["text"], "ok": ok}, END

    return wf


def test_made_once_replayed_on_resume_and_counted_each_time(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    asked: list[str] = []
    wf = workflow("mine", asked)
    waiting = run(wf, {}, run_id="r", store=url)
    assert waiting.status is RunStatus.INTERRUPTED
    # Committed at once, before the step went on: the journal holds the answer.
    [entry] = [e for e in list_effects("r", store=url) if e.name == "llm:m"]
    assert entry.status.value == "done"
    done = resume("r", value=True, workflow=wf, store=url)
    assert done.status is RunStatus.COMPLETED
    assert done.state == {"said": "hello", "ok": True}
    assert asked == [entry.request_id]  # the resume's step was answered by the journal
    assert (done.usage.llm_calls, done.usage.input_tokens) == (1, 7)
    assert done.usage.cost_usd == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("payload", "shape"),
    [("another", object), ("mine", list)],
    ids=["another integration's key", "a payload of another shape"],
)
def test_an_entry_another_integration_recorded_is_refused_by_name(
    tmp_path: Path, payload: str, shape: type
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    asked: list[str] = []
    assert run(workflow("mine", asked), {}, run_id="r", store=url).status is RunStatus.INTERRUPTED
    [request_id] = asked
    with pytest.raises(ConfigurationError) as refused:
        resume("r", value=True, workflow=workflow(payload, asked, shape=shape), store=url)
    assert str(refused.value) == (
        f"run r: the model call {request_id} was not recorded by this test's step: "
        "nothing to hand back to it"
    )
    assert asked == [request_id]  # refused without asking the model again
