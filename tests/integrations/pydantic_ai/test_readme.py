"""The README's pydantic-ai example, run as a reader would, its OpenAI client pointed at
the local provider by the SDK's own variables."""

from __future__ import annotations

from pathlib import Path

from tests.provider import RESPONSES, FakeProvider, responses
from tests.readme import readme_example, run_example


def test_the_pydantic_ai_example_runs(fake: FakeProvider, tmp_path: Path) -> None:
    # pydantic-ai's "openai:" models speak the Responses API.
    fake.script(
        RESPONSES,
        responses(None, [("lookup_order", {"order_id": "A-1"})]),
        responses(None, [("refund", {"order_id": "A-1", "amount": 120})]),
        responses("Refunded 120 on A-1."),
    )
    out = run_example(
        tmp_path,
        readme_example("Real models", "SavegameDurability"),
        env={"OPENAI_BASE_URL": fake.openai_url, "OPENAI_API_KEY": "test-key"},
        drop=("OPENAI_",),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["interrupted", "Refunded 120 on A-1."]
    bodies = fake.bodies(RESPONSES)
    assert len(bodies) == 3  # the approval's resume asked only the turn after the refund
    last = bodies[2]["input"][-1]
    assert last["type"] == "function_call_output", last
    assert last["output"].startswith("refunded 120.0 on A-1 under "), last
