"""An Agents SDK run is traced like savegame's own (issue 32: the same everywhere): one
span per model request (``chat <model>``) and per tool call (``execute_tool <tool>``),
inside the step's span, every span ended across the approval's pause."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from savegame import RunStatus, approve, run
from tests.provider import FakeProvider
from tests.tracing.conftest import Unended, spans, unended  # noqa: F401 - the fixtures

from .bank import build, script

QUESTION = {"question": "Check c1's balance, then block their card."}


def test_a_run_is_traced_like_savegames_own(
    spans: InMemorySpanExporter,  # noqa: F811
    unended: Unended,  # noqa: F811
    fake: FakeProvider,
    tmp_path: Path,
) -> None:
    flow, _ = build("oai-spans", fake.openai_url, tmp_path / "ledger.jsonl", "chat")
    script(
        fake,
        "chat",
        (None, [("balance", {"customer": "c1"})]),
        (None, [("block_card", {"customer": "c1"})]),
        ("Your card is blocked.", []),
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
    tools = {s.name for s in finished if s.name.startswith("execute_tool ")}
    assert tools == {"execute_tool oai-spans.balance", "execute_tool oai-spans.block_card"}, got
    steps = {s.context.span_id for s in finished if s.name.startswith("step ") and s.context}
    assert all(s.parent is not None and s.parent.span_id in steps for s in model), got
    assert unended.names == {}
