"""savegame's spans through the OpenTelemetry API (``savegame[otel]``).

Imported only by the runtime's tracing hook (``runtime/_trace.py``), lazily, when
``opentelemetry-api`` is installed. It needs nothing else: with no tracer provider
configured the API hands out non-recording spans and nothing is sent; a provider the
application sets (an OTLP exporter to Jaeger, Langfuse, Phoenix ...) gets every span.
See ``docs/otel.md``.
"""

from savegame.tracing._otel import OtelTracer

__all__ = ["OtelTracer"]
