"""An ADK run is traced like savegame's own (issue 32: the same everywhere): one
span per model request (``chat <model>``) and per tool call (``execute_tool <tool>``),
inside the step's span, every span ended across the approval's pause."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from savegame import RunStatus, approve, run
from tests.provider import GEMINI, FakeProvider, gemini
from tests.tracing.conftest import Unended, spans, unended  # noqa: F401 - the fixtures

from .bank import build

QUESTION = {"question": "Check c1's balance, then block their card."}


def test_a_run_is_traced_like_savegames_own(
    spans: InMemorySpanExporter,  # noqa: F811
    unended: Unended,  # noqa: F811
    fake: FakeProvider,
    tmp_path: Path,
) -> None:
    flow, _ = build("adk-spans", fake.root, tmp_path / "ledger.jsonl")
    fake.script(
        GEMINI,
        gemini(None, [("balance", {"customer": "c1"})]),
        gemini(None, [("block_card", {"customer": "c1"})]),
        gemini("Your card is blocked."),
    )
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert run(flow, QUESTION, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    done = approve("r1", store=url, workflow=flow, by="ada")
    assert done.result is not None and done.result.status is RunStatus.COMPLETED

    finished = spans.get_finished_spans()
    got = [span.name for span in finished]
    # Two requests before the pause, and on resume the recorded ones replayed (traced as
    # replayed) and the third asked.
    model = [s for s in finished if s.name.startswith("chat ")]
    assert len([s for s in model if not (s.attributes or {}).get("savegame.replayed")]) == 3, got
    # ADK traces its own tools too (``execute_tool balance``); savegame's are the journal's.
    tools = {s.name for s in finished if s.name.startswith("execute_tool adk:")}
    assert tools == {"execute_tool adk:adk_spans.balance", "execute_tool adk:adk_spans.block_card"}
    # Inside the step's span, under ADK's own spans (its agent and model-call spans).
    by_id = {s.context.span_id: s for s in finished if s.context}

    def in_step(span: ReadableSpan) -> bool:
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
            if span.name.startswith("step "):
                return True
        return False

    assert all(in_step(s) for s in model), got
    assert unended.names == {}
