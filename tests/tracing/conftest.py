"""An OpenTelemetry SDK tracer provider with the in-memory exporter, set globally for one
test and taken away after it: the rest of the suite runs with none, as users do who
never configure tracing (and whose checkpoints then carry no ``traceparent``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from tests import provider


def _unset_provider() -> None:
    # The API lets a process set its provider once; its own test utilities reset these.
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


class Unended(SpanProcessor):
    """The spans started and not ended yet: what a crash-free test must leave empty."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.names[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        assert span.context is not None
        self.names.pop(span.context.span_id, None)


@pytest.fixture
def unended() -> Unended:
    return Unended()


@pytest.fixture
def spans(unended: Unended) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer_provider.add_span_processor(unended)
    _unset_provider()
    trace.set_tracer_provider(tracer_provider)
    try:
        yield exporter
    finally:
        tracer_provider.shutdown()
        _unset_provider()


@pytest.fixture(scope="module")
def _server() -> Iterator[provider.FakeProvider]:
    yield from provider.serve()


@pytest.fixture
def fake(_server: provider.FakeProvider) -> Iterator[provider.FakeProvider]:
    _server.reset()
    yield _server
    _server.reset()
