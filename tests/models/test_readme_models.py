"""The README's Real models example, run as a reader would, its OpenAI client pointed at
the local provider by the SDK's own variables (OPENAI_BASE_URL, OPENAI_API_KEY)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.agent.test_readme_agent import SRC, readme_example
from tests.provider import CHAT, FakeProvider, chat


def test_the_real_models_example_runs(fake: FakeProvider, tmp_path: Path) -> None:
    fake.script(
        CHAT,
        chat(None, [("lookup_order", {"order_id": "A-1"})], usage=(50, 8, 0)),
        chat("A-1 totals 120.", usage=(80, 6, 64)),
    )
    (tmp_path / "example.py").write_text(readme_example("Real models"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SAVEGAME_", "OPENAI_"))}
    env.update(
        PYTHONPATH=os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH")) if p),
        OPENAI_BASE_URL=fake.openai_url,
        OPENAI_API_KEY="test-key",
    )
    out = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == ["gpt-4o 2 None", "gpt-4o 4 A-1 totals 120."]
    assert "cached_tokens=64" in lines[2] and "calls=2" in lines[2]
    assert [body["temperature"] for body in fake.bodies(CHAT)] == [0, 0]
