"""The models guide's LocalServer example (docs/guides/models.md), run as a reader would:
a real model on the CPU, asked once. Skipped without the model, failed in CI."""

from __future__ import annotations

from pathlib import Path

from savegame.models._local import missing
from tests import services
from tests.docs.pages import doc_example, run_example


def test_the_local_model_example_asks_once(tmp_path: Path) -> None:
    lacking = missing()
    if lacking is not None:
        services.unusable(f"the local model is not there: {lacking}")
    out = run_example(tmp_path, doc_example("docs/guides/models.md", "LocalServer()"))
    assert out.returncode == 0, out.stderr
    answer, requests = out.stdout.strip().splitlines()[-2:]
    assert answer.strip() and requests == "1"
