"""ctx.llm / ctx.allm: a model call in any step, journaled, replayed, counted once.

In-process on a real SQLite file. A step that calls a model and then waits on
``ctx.interrupt`` is re-executed on resume: that is where the journal is asked
for the recorded response (the kill -9 version is in tests/crash/test_llm_crash.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from savegame import END, RunStatus, StepContext, Workflow, resume, run, tool
from savegame.agent import ModelResponse, ToolCall, ToolSpec
from savegame.client import get_checkpoint, list_effects
from savegame.errors import ConfigurationError, NonDeterminismError


class Counting:
    """A model that counts its (paid) calls and remembers what it was told."""

    def __init__(self, name: str = "counting", content: str = "42") -> None:
        self.name = name
        self.content = content
        self.calls = 0
        self.tools: list[str] = []

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        self.calls += 1
        self.tools = [spec.name for spec in tools]
        return ModelResponse(
            content=self.content,
            tool_calls=(ToolCall("c1", "lookup", {"q": messages[-1]["content"]}),),
            input_tokens=100,
            output_tokens=10,
            cost_usd=0.125,
        )


class AsyncCounting(Counting):
    async def complete(  # type: ignore[override]
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        return Counting.complete(self, messages, tools)


@tool(effect="read")
def lookup(q: str) -> str:
    """Look something up."""
    return q


def asking(model_for: dict[str, Any], question: dict[str, str]) -> Workflow:
    """A step that asks ``model_for["model"]`` the current ``question``, then waits for a person."""
    wf = Workflow("asks")

    @wf.step(entry=True)
    def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        reply = ctx.llm(
            model_for["model"], [{"role": "user", "content": question["text"]}], tools=[lookup]
        )
        ok = ctx.interrupt({"reply": reply.content})
        return {"reply": reply, "ok": ok}, END

    return wf


def url_in(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


def test_a_custom_step_calls_a_model_once_and_the_run_counts_its_usage(tmp_path: Path) -> None:
    url, model = url_in(tmp_path), Counting()
    wf = asking({"model": model}, {"text": "six times seven?"})
    paused = run(wf, {}, run_id="r", store=url)
    assert paused.status is RunStatus.INTERRUPTED
    assert model.calls == 1 and model.tools == ["lookup"]
    [entry] = [e for e in list_effects("r", store=url) if e.kind.value == "llm"]
    assert (entry.name, entry.status.value) == ("llm:counting", "done")

    done = resume("r", value=True, workflow=wf, store=url)
    assert model.calls == 1  # the re-executed step got the journaled response
    assert done.status is RunStatus.COMPLETED
    usage = done.usage
    assert (usage.llm_calls, usage.input_tokens, usage.output_tokens) == (1, 100, 10)
    assert usage.cost_usd == pytest.approx(0.125)
    # The response is pure data: it sits in the state and loads back as itself.
    reply = get_checkpoint("r", store=url).state["reply"]
    assert reply == ModelResponse("42", (ToolCall("c1", "lookup", {"q": "six times seven?"}),),
                                  100, 10, 0.125)  # fmt: skip


@pytest.mark.parametrize(
    ("change", "recorded", "attempted"),
    [
        ("model", "llm:counting(", "llm:other("),
        ("messages", "llm:counting(", "llm:counting("),
    ],
)
def test_another_model_or_other_messages_at_a_journaled_position_are_refused(
    tmp_path: Path, change: str, recorded: str, attempted: str
) -> None:
    url, first = url_in(tmp_path), Counting()
    model_for, question = {"model": first}, {"text": "six times seven?"}
    wf = asking(model_for, question)
    run(wf, {}, run_id="r", store=url)
    if change == "model":
        model_for["model"] = Counting(name="other")
    else:
        question["text"] = "seven times six?"
    with pytest.raises(NonDeterminismError) as caught:
        resume("r", value=True, workflow=wf, store=url)
    error = caught.value
    assert error.recorded.startswith(recorded) and error.attempted.startswith(attempted)
    assert error.recorded != error.attempted  # the digests differ for other messages
    assert "messages=1" in error.recorded and "tools=['lookup']" in error.attempted
    assert first.calls == 1 and (change == "messages" or model_for["model"].calls == 0)


def test_an_async_step_awaits_allm_and_a_sync_step_refuses_an_async_model(tmp_path: Path) -> None:
    url, model = url_in(tmp_path), AsyncCounting(name="async")
    wf = Workflow("async-asks")

    @wf.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        reply = await ctx.allm(model, [{"role": "user", "content": "hi"}])
        return {"answer": reply.content}, END

    result = run(wf, {}, store=url)
    assert result.state["answer"] == "42" and result.usage.llm_calls == 1

    sync = Workflow("sync-asks")

    @sync.step(entry=True)
    def ask_sync(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.llm(model, [{"role": "user", "content": "hi"}])
        return {}, END

    with pytest.raises(ConfigurationError, match=r"model llm:async is async.*ctx\.allm"):
        run(sync, {}, store=url)


def test_a_model_response_is_pure_data_in_state_and_in_a_tools_result(tmp_path: Path) -> None:
    # Before: ctx.call(model.complete, ...) failed with "ModelResponse is not serializable
    # until registered". It is a plain (buffered) read now; ctx.llm is the durable path.
    url, model = url_in(tmp_path), Counting()
    wf = Workflow("stores-responses")

    @wf.step(entry=True)
    def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        spec = ToolSpec("lookup", "Look something up.", {"type": "object"})
        reply = ctx.call(model.complete, [{"role": "user", "content": "hi"}], [spec])
        return {"reply": reply, "spec": spec}, END

    run(wf, {}, run_id="r", store=url)
    state = get_checkpoint("r", store=url).state
    assert (
        isinstance(state["reply"], ModelResponse) and state["reply"].tool_calls[0].name == "lookup"
    )
    assert state["spec"] == ToolSpec("lookup", "Look something up.", {"type": "object"})
