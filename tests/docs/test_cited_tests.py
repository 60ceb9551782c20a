"""A docs cell that cites a test names one that exists: the comparison tables in the
agent-SDK guides say "checked by this test", and a renamed or deleted test would leave
the claim standing unchecked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["agent-sdks.md", "openai-agents.md", "adk.md"]
#: Folders a guide's table names its tests in, besides ``tests/...`` paths given whole.
FOLDERS = {
    "agent-sdks.md": None,
    "openai-agents.md": "tests/integrations/openai_agents",
    "adk.md": "tests/integrations/adk",
}
CITED = re.compile(r"`((?:tests/[\w/]+/)?test_\w+\.py)(?:::(test_\w+))?")


def _cited(page: str) -> list[tuple[str, str | None]]:
    text = (ROOT / "docs" / "guides" / page).read_text()
    return [(m.group(1), m.group(2)) for m in CITED.finditer(text)]


@pytest.mark.parametrize("page", PAGES)
def test_every_test_a_guide_cites_exists(page: str) -> None:
    cited = _cited(page)
    assert cited, f"{page} cites no test"
    for file, name in cited:
        folder = FOLDERS[page]
        candidates = [ROOT / file] if file.startswith("tests/") else []
        if folder is not None and not file.startswith("tests/"):
            candidates.append(ROOT / folder / file)
        if not file.startswith("tests/") and folder is None:
            candidates += list((ROOT / "tests").rglob(file))
        found = [c for c in candidates if c.is_file()]
        assert found, f"{page} cites {file}, which is not a test file"
        if name is not None:
            assert any(re.search(rf"^(async )?def {name}\(", c.read_text(), re.M) for c in found), (
                f"{page} cites {file}::{name}, which is not a test in it"
            )
