"""A traced run in a child process, each span written to a JSON-lines file as it ends.

``python traced_child.py start URL RUN_ID SPANS``: starts the run, which blocks in its
second step (saying ``BLOCKED``) until it is killed; ``resume``: resumes it to its end.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from savegame import END, StepContext, Workflow, resume, run, tool


class JsonLines(SpanExporter):
    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a") as fh:
            for span in spans:
                assert span.context is not None
                line = {
                    "name": span.name,
                    "trace_id": f"{span.context.trace_id:032x}",
                    "span_id": f"{span.context.span_id:016x}",
                    "parent_id": None if span.parent is None else f"{span.parent.span_id:016x}",
                    "pid": os.getpid(),
                    "attributes": dict(span.attributes or {}),
                }
                fh.write(json.dumps(line) + "\n")
            fh.flush()
            os.fsync(fh.fileno())  # the next line may be this process's last
        return SpanExportResult.SUCCESS


@tool
def lookup(order_id: str) -> dict[str, Any]:
    return {"id": order_id}


def workflow(block: bool) -> Workflow:
    wf = Workflow("crashy")

    @wf.step(entry=True)
    def one(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"order": ctx.call(lookup, "A-1")}, "two"

    @wf.step()
    def two(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        if block:
            print("BLOCKED", flush=True)
            time.sleep(120)
        return {"done": True}, END

    return wf


def main(mode: str, url: str, run_id: str, spans: str) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLines(spans)))
    trace.set_tracer_provider(provider)
    if mode == "start":
        run(workflow(block=True), {}, store=url, run_id=run_id)
    else:
        result = resume(run_id, workflow=workflow(block=False), store=url)
        print("DONE", result.status.value, flush=True)
    provider.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:5])
