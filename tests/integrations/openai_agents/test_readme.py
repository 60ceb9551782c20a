"""The guide's example (docs/guides/openai-agents.md), run as a reader would: the SDK's
own OpenAI client (a model named by string, the SDK's default Responses API) pointed
at the local provider by the SDK's own variables; the refund waits for an approval and
runs once, and only the turn after it is asked again."""

from __future__ import annotations

from pathlib import Path

from tests.docs.pages import doc_example, run_example
from tests.provider import RESPONSES, FakeProvider

from .bank import script


def test_the_guides_example_runs(fake: FakeProvider, tmp_path: Path) -> None:
    script(
        fake,
        "responses",
        (None, [("lookup_order", {"order_id": "A-1"})]),
        (None, [("refund", {"order_id": "A-1", "amount": 120})]),
        ("Refunded 120 on A-1.", []),
    )
    out = run_example(
        tmp_path,
        doc_example("docs/guides/openai-agents.md"),
        env={"OPENAI_BASE_URL": fake.openai_url, "OPENAI_API_KEY": "test-key"},
        drop=("OPENAI_",),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["interrupted", "Refunded 120 on A-1."]
    assert [a.path for a in fake.asked] == [RESPONSES] * 3  # nothing else was asked
    last = fake.bodies(RESPONSES)[2]["input"][-1]
    assert last["type"] == "function_call_output", last
    assert last["output"].startswith("refunded 120.0 on A-1 under "), last
