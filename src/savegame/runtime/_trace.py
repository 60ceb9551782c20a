"""The tracing hook: spans for a run's executions, steps and calls, or nothing at all.

The runtime names what a span is and what it carries (savegame's ids, GenAI attributes
for model calls); :mod:`savegame.tracing` turns that into OpenTelemetry spans. That module
is imported lazily, the first time a span is asked for, and only when OpenTelemetry's API
is importable (``savegame[otel]``): without it every span here is a shared no-op and the
runtime has no dependency on it.

A run's trace outlives the process: :func:`anchor` ends a short ``start`` span when a run
is created and its ``traceparent`` is kept in every checkpoint's metadata
(:data:`TRACE_KEY`). An execution, here or in another process after a crash, starts its
span as a child of it, so every process that worked on the run is in one trace. The
anchor ends at once on purpose: a span that lasted the whole run would be lost with the
process that held it, leaving its children pointing at a parent no backend ever saw.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

#: The checkpoint metadata key holding the run's W3C ``traceparent`` (when traced).
TRACE_KEY = "traceparent"


class Span(Protocol):
    """What the runtime may do with an open span."""

    def set(self, attributes: Mapping[str, Any]) -> None:
        """Add attributes (a None value is left out)."""

    @property
    def traceparent(self) -> str | None:
        """This span's W3C ``traceparent``, or None when it has no valid context."""


class Tracer(Protocol):
    """What :mod:`savegame.tracing` offers the runtime."""

    def span(
        self,
        name: str,
        attributes: Mapping[str, Any],
        *,
        parent: str | None = None,
        client: bool = False,
    ) -> contextlib.AbstractContextManager[Span]:
        """A span, current while open, child of ``parent`` (a traceparent) or else of the
        current span; ended on exit, marked failed by an exception that is not a pause."""


class _Off:
    """The span of a process that does not trace: takes everything, keeps nothing."""

    def set(self, attributes: Mapping[str, Any]) -> None:
        pass

    @property
    def traceparent(self) -> str | None:
        return None


OFF: Span = _Off()

_UNSET: Any = object()
_tracer: Tracer | None = _UNSET


def tracer() -> Tracer | None:
    """The OpenTelemetry tracer, or None when OpenTelemetry's API is not installed."""
    global _tracer
    if _tracer is _UNSET:
        try:
            from savegame.tracing import OtelTracer
        except ImportError:
            _tracer = None
        else:
            _tracer = OtelTracer()
    return _tracer


#: What every span is when nothing traces: one reusable context manager, no allocation.
_QUIET: contextlib.AbstractContextManager[Span] = contextlib.nullcontext(OFF)


def span(
    name: str, attributes: Mapping[str, Any], *, parent: str | None = None, client: bool = False
) -> contextlib.AbstractContextManager[Span]:
    """A span named ``name`` (:data:`OFF` when not tracing)."""
    t = tracer()
    if t is None:
        return _QUIET
    return t.span(name, attributes, parent=parent, client=client)


def anchor(
    metadata: Mapping[str, Any], *, run_id: str, thread_id: str, workflow: str
) -> str | None:
    """The traceparent a new run keeps: that of a ``start`` span, a child of a
    ``traceparent`` given in the run's metadata, else of the caller's current span; None
    when nothing traces."""
    if tracer() is None:
        return None
    given = metadata.get(TRACE_KEY)
    attributes = {"savegame.run_id": run_id, "savegame.thread_id": thread_id,
                  "savegame.workflow": workflow}  # fmt: skip
    with span(
        f"start {workflow}", attributes, parent=given if isinstance(given, str) else None
    ) as opened:
        return opened.traceparent


def run_span(
    *, run_id: str, thread_id: str, workflow: str, step: int, checkpoint_id: str, parent: Any
) -> contextlib.AbstractContextManager[Span]:
    """One execution of a run, from checkpoint ``checkpoint_id`` (at ``step``)."""
    return span(
        f"run {workflow}",
        {
            "savegame.run_id": run_id,
            "savegame.thread_id": thread_id,
            "savegame.workflow": workflow,
            "savegame.start.step": step,
            "savegame.start.checkpoint_id": checkpoint_id,
            "savegame.resumed": step > 0,
        },
        parent=parent if isinstance(parent, str) else None,
    )


def step_span(
    run_id: str, step: int, name: str, *, traced: bool = True
) -> contextlib.AbstractContextManager[Span]:
    """One step, its retries included, and the checkpoint after it.

    ``traced``: False when the run's own span has no context (nothing traced when the
    execution started): then no step span is asked for either, which spares a step
    OpenTelemetry's look-up of its provider (an ``os.environ`` miss, about 13k
    instructions a step, 2 % of a ``memory://`` step). A provider set meanwhile gets
    the spans of the next execution.
    """
    if not traced:
        return _QUIET
    return span(
        f"step {name}",
        {"savegame.run_id": run_id, "savegame.step": step, "savegame.step.name": name},
    )


def tool_span(run_id: str, step: int, tool: str) -> contextlib.AbstractContextManager[Span]:
    """One ``ctx.call`` (GenAI's ``execute_tool``), replayed or made."""
    return span(
        f"execute_tool {tool}",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "savegame.run_id": run_id,
            "savegame.step": step,
        },
    )


def model_span(
    run_id: str, step: int, model: Any, name: str
) -> contextlib.AbstractContextManager[Span]:
    """One ``ctx.llm`` (GenAI's ``chat``): ``name`` is the model as the journal names it."""
    provider = getattr(model, "provider", None)
    return span(
        f"chat {name}",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": provider if isinstance(provider, str) else type(model).__name__,
            "gen_ai.request.model": name,
            "savegame.run_id": run_id,
            "savegame.step": step,
        },
        client=True,
    )


def answered(opened: Span, response: Any, *, replayed: bool) -> None:
    """A model call's answer on its span: GenAI usage, savegame's cost."""
    opened.set(
        {
            "gen_ai.response.model": response.model,
            "gen_ai.usage.input_tokens": response.input_tokens,
            "gen_ai.usage.output_tokens": response.output_tokens,
            "gen_ai.response.finish_reasons": (
                None if response.stop_reason is None else (response.stop_reason,)
            ),
            "savegame.cost_usd": response.cost_usd,
            "savegame.replayed": replayed,
        }
    )


def usage_attributes(usage: Any) -> dict[str, Any]:
    """A run's usage counters as span attributes (GenAI's token names)."""
    return {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "savegame.usage.cost_usd": usage.cost_usd,
        "savegame.usage.llm_calls": usage.llm_calls,
        "savegame.usage.tool_calls": usage.tool_calls,
    }


class CallTrace:
    """The span of one call an integration journals through a step's ``Calls`` (a
    framework's model request or tool call), traced as ``ctx.llm``'s and ``ctx.call``'s
    are: what to look up in ``savegame effects`` once the call is prepared, the answer's
    usage once it is known."""

    __slots__ = ("span",)

    def __init__(self, opened: Span) -> None:
        self.span = opened

    def prepared(self, prepared: Any) -> None:
        """The call's journal identity: its request id, kind, replayed or made."""
        self.span.set(
            {
                "savegame.request_id": prepared.request_id,
                "savegame.effect.kind": str(getattr(prepared.kind, "value", prepared.kind)),
                "savegame.replayed": prepared.replay,
            }
        )

    def answered(self, kept: Mapping[str, Any], *, replayed: bool) -> None:
        """A model call's answer as the journal keeps it (``ModelResponse.to_dict()``)."""
        reason = kept.get("stop_reason")
        self.span.set(
            {
                "gen_ai.response.model": kept.get("model"),
                "gen_ai.usage.input_tokens": int(kept.get("input_tokens") or 0),
                "gen_ai.usage.output_tokens": int(kept.get("output_tokens") or 0),
                "gen_ai.response.finish_reasons": None if reason is None else (str(reason),),
                "savegame.cost_usd": kept.get("cost_usd"),
                "savegame.replayed": replayed,
            }
        )


@contextlib.contextmanager
def traced_model_call(run_id: str, step: int, name: str, *, system: str) -> Iterator[CallTrace]:
    """A model request an integration journals, as a ``chat <name>`` span in the step's
    (``name``: the model as its entry names it, without ``llm:``; ``system``: GenAI's
    ``gen_ai.system``, the framework or provider)."""
    with span(
        f"chat {name}",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": system,
            "gen_ai.request.model": name,
            "savegame.run_id": run_id,
            "savegame.step": step,
        },
        client=True,
    ) as opened:
        yield CallTrace(opened)


@contextlib.contextmanager
def traced_tool_call(run_id: str, step: int, name: str) -> Iterator[CallTrace]:
    """A tool call an integration journals, as an ``execute_tool <name>`` span."""
    with tool_span(run_id, step, name) as opened:
        yield CallTrace(opened)
