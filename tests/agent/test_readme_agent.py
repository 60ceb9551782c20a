"""The agents guide's first example, run as a reader would: a file, run twice in one folder."""

from __future__ import annotations

from pathlib import Path

import savegame
from tests.docs.pages import doc_example, run_example


def test_the_agent_example_runs_twice(tmp_path: Path) -> None:
    # The second run asked ScriptedModel for a third answer (it continued the first
    # run's thread) and left a failed run behind.
    example = doc_example("docs/guides/agents.md")
    for _ in range(2):
        out = run_example(tmp_path, example)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("Order A-1 totals 120. Usage(")
    runs = savegame.client.list_runs(store=f"sqlite:///{tmp_path / 'savegame.db'}")
    assert [r.status.value for r in runs] == ["completed", "completed"]
