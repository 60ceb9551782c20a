"""The examples run as users run them: a child process each, against the local provider
(tests/provider.py) on this process's thread, which counts what it was asked."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import provider

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.fixture
def fake() -> Iterator[provider.FakeProvider]:
    yield from provider.serve()


def example(
    name: str, *args: str, fake: provider.FakeProvider, cwd: Path, env: dict[str, str] | None = None
) -> str:
    """Run ``examples/<name>.py`` with ``args`` in ``cwd``; its output, checked for exit 0."""
    given = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "SAVEGAME_STORE": f"sqlite:///{cwd / 'runs.db'}",
        **(env or {}),
    }
    given.pop("OPENAI_API_KEY", None)
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), "--base-url", fake.openai_url, *args],
        cwd=cwd,
        env=given,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    return done.stdout
