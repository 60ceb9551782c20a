"""The models guide's example (docs/guides/models.md), run as a reader would, its OpenAI
client pointed at the local provider by the SDK's own variables (OPENAI_BASE_URL,
OPENAI_API_KEY); the agents guide's tool round and its table (docs/guides/agents.md)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from savegame.agent import ModelResponse, ToolCall
from tests.docs.pages import ROOT, doc_example, run_example
from tests.provider import CHAT, FakeProvider, chat


def test_the_real_models_example_runs(fake: FakeProvider, tmp_path: Path) -> None:
    fake.script(
        CHAT,
        chat(None, [("lookup_order", {"order_id": "A-1"})], usage=(50, 8, 0)),
        chat("A-1 totals 120.", usage=(80, 6, 64)),
    )
    out = run_example(
        tmp_path,
        doc_example("docs/guides/models.md"),
        env={"OPENAI_BASE_URL": fake.openai_url, "OPENAI_API_KEY": "test-key"},
        drop=("OPENAI_",),
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == ["gpt-4o 2 None", "gpt-4o 4 A-1 totals 120."]
    assert "cached_tokens=64" in lines[2] and "calls=2" in lines[2]
    assert [body["temperature"] for body in fake.bodies(CHAT)] == [0, 0]


def test_the_tool_round_example_runs(tmp_path: Path) -> None:
    out = run_example(tmp_path, doc_example("docs/guides/agents.md", "tool_call_id"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["A-1 is 120."]


def test_the_table_of_a_model_calls_answer_names_every_field() -> None:
    text = (ROOT / "docs" / "guides" / "agents.md").read_text()
    start = text.index("## What a model call returns, and how a tool's result goes back")
    rows = re.findall(r"^\| `(\w+)` \|", text[start : text.index("```python", start)], re.M)
    assert rows == [f.name for f in dataclasses.fields(ModelResponse)]
    assert [f.name for f in dataclasses.fields(ToolCall)] == ["id", "name", "arguments"]
