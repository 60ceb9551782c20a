"""The ADK guide's example (docs/guides/adk.md), run as a reader would, its Gemini
client pointed at the local provider by google-genai's own variables
(``GOOGLE_GEMINI_BASE_URL``, ``GOOGLE_API_KEY``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.pages import doc_example, run_example
from tests.provider import GEMINI, FakeProvider, gemini

pytestmark = pytest.mark.slow  # a process that imports ADK


def test_the_adk_example_runs(fake: FakeProvider, tmp_path: Path) -> None:
    fake.script(
        GEMINI,
        gemini(None, [("lookup_order", {"order_id": "A-1"})]),
        gemini(None, [("refund", {"order_id": "A-1", "amount": 120})]),
        gemini("Refunded 120 on A-1."),
    )
    out = run_example(
        tmp_path,
        doc_example("docs/guides/adk.md"),
        env={"GOOGLE_GEMINI_BASE_URL": fake.root, "GOOGLE_API_KEY": "test-key"},
        drop=("GOOGLE_", "GEMINI_"),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["interrupted", "Refunded 120 on A-1."]
    assert [a.path for a in fake.asked] == [GEMINI] * 3  # nothing else was asked
    # the approval's resume asked only the turn after the refund
    last = fake.bodies(GEMINI)[2]["contents"][-1]["parts"][0]["functionResponse"]
    assert last["name"] == "refund"
    assert last["response"]["result"].startswith("refunded 120 on A-1 under "), last
