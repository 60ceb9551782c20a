"""The runtime's spans as OpenTelemetry spans."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from savegame.signals import Cancel, Halt, Pause, Suspend

_PROPAGATOR = TraceContextTextMapPropagator()

#: Signals that stop a step on purpose: a span they leave through is not a failure.
_SIGNALS: dict[type[BaseException], str] = {
    Pause: "interrupted",
    Suspend: "waiting",
    Cancel: "cancelled",
    Halt: "interrupted",
}

try:
    _VERSION: str | None = version("savegame")
except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
    _VERSION = None


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    # OpenTelemetry refuses None (and warns); a value not known yet is left out instead.
    return {k: v for k, v in attributes.items() if v is not None}


class _Opened:
    """An OpenTelemetry span as the runtime's ``Span``."""

    __slots__ = ("_span",)

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def set(self, attributes: Mapping[str, Any]) -> None:
        self._span.set_attributes(_clean(attributes))

    @property
    def traceparent(self) -> str | None:
        if not self._span.get_span_context().is_valid:
            return None
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(self._span))
        return carrier.get("traceparent")


class _Quiet:
    """The span of a process with no tracer provider: nothing would be recorded."""

    def set(self, attributes: Mapping[str, Any]) -> None:
        pass

    @property
    def traceparent(self) -> str | None:
        return None


_QUIET = contextlib.nullcontext(_Quiet())

#: The API's providers that record nothing: the default until an application sets one.
_SILENT = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)


class OtelTracer:
    """Spans from the global tracer provider, looked up at each span.

    Not cached: a provider set after the first run (or replaced by a test) must get the
    spans, and the API's proxy tracer would keep the first real tracer it found.
    """

    def span(
        self,
        name: str,
        attributes: Mapping[str, Any],
        *,
        parent: str | None = None,
        client: bool = False,
    ) -> contextlib.AbstractContextManager[_Opened | _Quiet]:
        # With no provider set the API would hand out non-recording spans, at about the
        # cost of recording ones (measured: benchmarks/tracing_overhead.py); none at all
        # costs nothing, and nothing is lost: no backend would have seen them.
        if isinstance(trace.get_tracer_provider(), _SILENT):
            return _QUIET
        return self._span(name, attributes, parent, client)

    @contextlib.contextmanager
    def _span(
        self, name: str, attributes: Mapping[str, Any], parent: str | None, client: bool
    ) -> Iterator[_Opened]:
        context = None if parent is None else _PROPAGATOR.extract({"traceparent": parent})
        tracer = trace.get_tracer("savegame", _VERSION)
        opened = tracer.start_span(
            name,
            context=context,
            kind=SpanKind.CLIENT if client else SpanKind.INTERNAL,
            attributes=_clean(attributes),
            record_exception=False,
            set_status_on_exception=False,
        )
        # end_on_exit: the span ends however the block is left, a raising step included.
        with trace.use_span(
            opened, end_on_exit=True, record_exception=False, set_status_on_exception=False
        ):
            try:
                yield _Opened(opened)
            except BaseException as exc:
                outcome = next((v for k, v in _SIGNALS.items() if isinstance(exc, k)), None)
                if outcome is not None:
                    opened.set_attribute("savegame.outcome", outcome)
                else:
                    # The error's type only: its message may quote state or arguments,
                    # which an encrypted store never writes in plaintext anywhere (the
                    # message is in the run's failure checkpoint, sealed with the rest).
                    kind = type(exc).__qualname__
                    opened.set_status(Status(StatusCode.ERROR, kind))
                    opened.set_attribute("error.type", kind)
                raise
