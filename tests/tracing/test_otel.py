"""Runs, steps, tool calls and model calls as OpenTelemetry spans, through the SDK's
in-memory exporter; the model call through the real openai SDK against the local
provider (``tests/provider.py``)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from savegame import END, RunStatus, StepContext, Workflow, arun, resume, run, tool
from savegame.client import history, list_effects, model_calls
from savegame.errors import StepError
from savegame.models import OpenAI
from savegame.runtime._trace import TRACE_KEY
from tests.provider import CHAT, FakeProvider, chat
from tests.tracing.conftest import Unended


@tool
def lookup(order_id: str) -> dict[str, Any]:
    return {"id": order_id, "total": 120}


@tool
def broken(order_id: str) -> dict[str, Any]:
    raise ConnectionError(f"no route to the shop for {order_id}")


def orders(model: Any) -> Workflow:
    wf = Workflow("orders")

    @wf.step(entry=True)
    def plan(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"order": ctx.call(lookup, "A-1")}, "ask"

    @wf.step()
    def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        answer = ctx.llm(model, [{"role": "user", "content": f"total of {state['order']}?"}])
        return {"answer": answer.content}, END

    return wf


def by_name(spans: Sequence[ReadableSpan]) -> dict[str, ReadableSpan]:
    named = {span.name: span for span in spans}
    assert len(named) == len(spans), [s.name for s in spans]
    return named


def parent_of(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def traceparent(span: ReadableSpan) -> str:
    ctx = span.get_span_context()
    assert ctx is not None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"


def test_a_run_is_a_tree_of_spans_with_its_ids_usage_and_genai_attributes(
    spans: InMemorySpanExporter, fake: FakeProvider, sqlite_url: str
) -> None:
    fake.script(CHAT, chat("It totals 120.", usage=(31, 7, 0)))
    model = OpenAI("gpt-4o", base_url=fake.openai_url, api_key="test-key")
    result = run(orders(model), {}, store=sqlite_url)
    assert result.status is RunStatus.COMPLETED and result.state["answer"] == "It totals 120."

    got = by_name(spans.get_finished_spans())
    assert set(got) == {
        "start orders", "run orders", "step plan", "execute_tool lookup", "step ask",
        "chat gpt-4o",
    }  # fmt: skip
    start, execution = got["start orders"], got["run orders"]
    assert {s.context.trace_id for s in got.values() if s.context} == {start.context.trace_id}
    assert start.parent is None and parent_of(execution) == start.context.span_id
    assert parent_of(got["step plan"]) == parent_of(got["step ask"]) == execution.context.span_id
    assert parent_of(got["execute_tool lookup"]) == got["step plan"].context.span_id
    assert parent_of(got["chat gpt-4o"]) == got["step ask"].context.span_id

    assert execution.attributes is not None
    assert execution.attributes["savegame.run_id"] == result.run_id
    assert execution.attributes["savegame.status"] == "completed"
    assert execution.attributes["savegame.checkpoint_id"] == result.checkpoint_id
    assert execution.attributes["savegame.resumed"] is False
    assert execution.attributes["gen_ai.usage.input_tokens"] == 31
    assert execution.attributes["savegame.usage.tool_calls"] == 1

    # Each step span names the checkpoint written after it, as the history has it.
    headers = {h.node: h for h in history(result.run_id, store=sqlite_url) if h.node}
    for step in ("plan", "ask"):
        attrs = got[f"step {step}"].attributes
        assert attrs is not None
        assert attrs["savegame.checkpoint_id"] == headers[step].checkpoint_id
        assert attrs["savegame.step"] == headers[step].step

    [effect] = [e for e in list_effects(result.run_id, store=sqlite_url) if e.name == "lookup"]
    tool_attrs = got["execute_tool lookup"].attributes
    assert tool_attrs is not None
    assert tool_attrs["savegame.request_id"] == effect.request_id
    assert tool_attrs["gen_ai.tool.name"] == "lookup" and tool_attrs["savegame.replayed"] is False

    chat_span = got["chat gpt-4o"]
    assert chat_span.kind is SpanKind.CLIENT
    [recorded] = model_calls(result.run_id, store=sqlite_url)
    expected = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.usage.input_tokens": 31,
        "gen_ai.usage.output_tokens": 7,
        "savegame.request_id": recorded.request_id,
        "savegame.replayed": False,
    }
    attributes = dict(chat_span.attributes or {})
    assert {k: attributes.get(k) for k in expected} == expected

    # Every checkpoint keeps the trace, pointing at the start span.
    assert {h.metadata.get(TRACE_KEY) for h in headers.values()} == {traceparent(start)}


def test_async_runs_trace_their_async_tool_and_model_calls(
    spans: InMemorySpanExporter, unended: Unended, fake: FakeProvider, sqlite_url: str
) -> None:
    fake.script(CHAT, chat("Noted.", usage=(9, 2, 0)))
    model = OpenAI("gpt-4o", base_url=fake.openai_url, api_key="test-key")
    wf = Workflow("async orders")

    @wf.step(entry=True)
    async def both(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        order = await ctx.acall(lookup, "A-2")
        answer = await ctx.allm(model, [{"role": "user", "content": str(order)}])
        return {"answer": answer.content}, END

    result = asyncio.run(arun(wf, {}, store=sqlite_url))
    assert result.status is RunStatus.COMPLETED
    assert unended.names == {}
    got = by_name(spans.get_finished_spans())
    step = got["step both"].context.span_id
    assert parent_of(got["execute_tool lookup"]) == parent_of(got["chat gpt-4o"]) == step
    assert (got["chat gpt-4o"].attributes or {})["gen_ai.usage.output_tokens"] == 2


def test_a_resumed_run_continues_the_trace_its_checkpoints_keep(
    spans: InMemorySpanExporter, sqlite_url: str
) -> None:
    wf = Workflow("asks")

    @wf.step(entry=True)
    def wait(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"said": ctx.interrupt({"question": "ship?"})}, END

    paused = run(wf, {}, store=sqlite_url)
    assert paused.status is RunStatus.INTERRUPTED
    first = by_name(spans.get_finished_spans())
    step = first["step wait"]
    # A pause is not a failure: the span says what happened, its status stays unset.
    assert step.status.status_code is StatusCode.UNSET
    assert (step.attributes or {})["savegame.outcome"] == "interrupted"
    spans.clear()

    done = resume(paused.run_id, value="yes", workflow=wf, store=sqlite_url)
    assert done.status is RunStatus.COMPLETED
    second = by_name(spans.get_finished_spans())
    assert set(second) == {"run asks", "step wait"}
    again = second["run asks"]
    assert again.context.trace_id == first["start asks"].context.trace_id
    assert parent_of(again) == first["start asks"].context.span_id
    assert (again.attributes or {})["savegame.start.checkpoint_id"] == paused.checkpoint_id


def test_a_step_that_raises_ends_every_span_and_marks_them_failed(
    spans: InMemorySpanExporter, unended: Unended, sqlite_url: str
) -> None:
    wf = Workflow("shop")

    @wf.step(entry=True)
    def fetch(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"order": ctx.call(broken, "A-1")}, END

    with pytest.raises(StepError):
        run(wf, {}, store=sqlite_url)
    assert unended.names == {}
    got = by_name(spans.get_finished_spans())
    assert set(got) == {"start shop", "run shop", "step fetch", "execute_tool broken"}
    for name in ("run shop", "step fetch", "execute_tool broken"):
        assert got[name].status.status_code is StatusCode.ERROR, name
    assert (got["execute_tool broken"].attributes or {})["error.type"] == "ConnectionError"
    # Only the type: the message (which may quote arguments) stays in the checkpoint.
    assert "no route" not in str(got["step fetch"].status.description)
    assert not any(s.events for s in got.values())
    # Nothing is left current either: the next span this thread starts is a root.
    assert not trace.get_current_span().get_span_context().is_valid


def test_a_run_inside_the_callers_span_joins_the_callers_trace(
    spans: InMemorySpanExporter, sqlite_url: str
) -> None:
    wf = Workflow("quick")

    @wf.step(entry=True)
    def only(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"ok": True}, END

    with trace.get_tracer("app").start_as_current_span("handle request") as outer:
        run(wf, {}, store=sqlite_url)
    got = by_name(spans.get_finished_spans())
    assert parent_of(got["start quick"]) == outer.get_span_context().span_id
    assert got["run quick"].context.trace_id == outer.get_span_context().trace_id


def test_a_traceparent_given_in_the_metadata_is_the_runs_parent(
    spans: InMemorySpanExporter, sqlite_url: str
) -> None:
    wf = Workflow("incoming")

    @wf.step(entry=True)
    def only(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {}, END

    given = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    run(wf, {}, store=sqlite_url, metadata={TRACE_KEY: given})
    start = by_name(spans.get_finished_spans())["start incoming"]
    assert f"{start.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert parent_of(start) == 0xB7AD6B7169203331


def test_without_a_tracer_provider_runs_go_on_and_checkpoints_keep_no_trace(
    sqlite_url: str,
) -> None:
    wf = Workflow("plain")

    @wf.step(entry=True)
    def only(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"n": ctx.call(lookup, "A-1")}, END

    result = run(wf, {}, store=sqlite_url)
    assert result.status is RunStatus.COMPLETED
    assert all(TRACE_KEY not in h.metadata for h in history(result.run_id, store=sqlite_url))


def test_without_opentelemetry_installed_the_hook_is_a_no_op(tmp_path: Any) -> None:
    # A fresh interpreter where `import opentelemetry` fails, as without savegame[otel].
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["opentelemetry"] = None
        from savegame import END, Workflow, run
        from savegame.client import history
        from savegame.runtime import _trace

        wf = Workflow("plain")

        @wf.step(entry=True)
        def only(state, ctx):
            return {{"ok": True}}, END

        url = "sqlite:///{tmp_path / "no-otel.db"}"
        result = run(wf, {{}}, store=url)
        assert _trace.tracer() is None
        assert all("traceparent" not in h.metadata for h in history(result.run_id, store=url))
        assert "savegame.tracing" not in sys.modules
        print(result.status.value)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "completed"


@pytest.mark.parametrize(
    "given", ["not a traceparent", "00-" + "0" * 32 + "-" + "0" * 16 + "-01", 42, "", "ff-zz"]
)
def test_a_malformed_traceparent_in_the_metadata_starts_a_new_trace(
    spans: InMemorySpanExporter, sqlite_url: str, given: Any
) -> None:
    wf = Workflow("odd")

    @wf.step(entry=True)
    def only(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {}, END

    result = run(wf, {}, store=sqlite_url, metadata={TRACE_KEY: given})
    assert result.status is RunStatus.COMPLETED
    got = by_name(spans.get_finished_spans())
    start = got["start odd"]
    assert start.parent is None and start.context.trace_id != 0
    assert got["run odd"].context.trace_id == start.context.trace_id
    # The run keeps the trace it really is in, not the string it was given.
    kept = {h.metadata[TRACE_KEY] for h in history(result.run_id, store=sqlite_url) if h.step}
    assert kept == {traceparent(start)}
