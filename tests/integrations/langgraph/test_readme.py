"""The LangGraph guide's example (docs/guides/langgraph.md), run as a reader would: a file,
run twice in one folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.pages import doc_example, run_example

pytest.importorskip("langgraph")


def test_the_durable_tool_example_sends_one_email(tmp_path: Path) -> None:
    example = doc_example("docs/guides/langgraph.md", "durable_tool")
    printed = []
    for _ in range(2):
        out = run_example(tmp_path, example)
        assert out.returncode == 0, out.stderr
        printed.append(out.stdout.strip())
    assert printed == ["email queued; close the ticket?", "ticket closed: yes"]
    assert (tmp_path / "outbox.txt").read_text() == "ann@example.com: Your refund is on its way\n"
