"""The pydantic-ai guide's example (docs/guides/pydantic-ai.md), run as a reader would, its OpenAI client pointed at
the local provider by the SDK's own variables: a server that speaks Chat Completions
only, as the local servers the guide names do (the example's ``openai:`` model once
went to the Responses API there, and ended in a traceback)."""

from __future__ import annotations

from pathlib import Path

from tests.docs.pages import doc_example, run_example
from tests.provider import CHAT, FakeProvider, chat


def test_the_pydantic_ai_example_runs(fake: FakeProvider, tmp_path: Path) -> None:
    fake.script(
        CHAT,
        chat(None, [("lookup_order", {"order_id": "A-1"})]),
        chat(None, [("refund", {"order_id": "A-1", "amount": 120})]),
        chat("Refunded 120 on A-1."),
    )
    out = run_example(
        tmp_path,
        doc_example("docs/guides/pydantic-ai.md"),
        env={"OPENAI_BASE_URL": fake.openai_url, "OPENAI_API_KEY": "test-key"},
        drop=("OPENAI_",),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["interrupted", "Refunded 120 on A-1."]
    assert [a.path for a in fake.asked] == [CHAT] * 3  # nothing else was asked
    bodies = fake.bodies(CHAT)
    # the approval's resume asked only the turn after the refund
    last = bodies[2]["messages"][-1]
    assert last["role"] == "tool", last
    assert last["content"].startswith("refunded 120.0 on A-1 under "), last
