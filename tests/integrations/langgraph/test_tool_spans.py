"""A durable tool's calls are traced as ``ctx.call``'s are: one ``execute_tool`` span per
call, replayed or made, with its journal identity (the same everywhere)."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import HumanMessage
from langgraph.types import Command
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from savegame.langgraph import SavegameSaver
from tests.tracing.conftest import Unended, spans, unended  # noqa: F401 - the fixtures

from .test_tools import Ledger, conf, email_graph


def test_a_durable_tools_calls_are_traced(
    spans: InMemorySpanExporter,  # noqa: F811
    unended: Unended,  # noqa: F811
    sqlite_url: str,
    tmp_path: Path,
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    graph = email_graph(ledger).compile(checkpointer=SavegameSaver(sqlite_url))
    graph.invoke({"messages": [HumanMessage(content="hi")]}, conf("t1"))
    graph.invoke(Command(resume="yes"), conf("t1"))
    tools = [s for s in spans.get_finished_spans() if s.name == "execute_tool send_email"]
    # The draft sent before the interrupt, replayed when the node ran again, the follow-up.
    replayed = [(s.attributes or {}).get("savegame.replayed") for s in tools]
    assert replayed == [False, True, False]
    ids = [(s.attributes or {}).get("savegame.request_id") for s in tools]
    assert ids[0] == ids[1] and ids[1] != ids[2]
    assert len(ledger.calls()) == 2 and unended.names == {}
