"""``savegame replay`` as a CI job runs it: the support example recorded by its own command
line (a real SQLite file, the model on the local provider), exported, its store deleted,
then replayed from the file in fresh processes, as it is and changed three ways."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import provider
from tests.examples.conftest import EXAMPLES, ROOT, example
from tests.provider import CHAT, chat

pytestmark = pytest.mark.slow

SRC = str(ROOT / "src")


@pytest.fixture
def fake() -> Iterator[provider.FakeProvider]:
    yield from provider.serve()


def savegame(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m savegame ARGS`` in a fresh process: no provider URL, no key, no store."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SAVEGAME_", "OPENAI_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH")) if p)
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "savegame", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _variant(folder: Path, name: str, edit: str, new: str | None = None) -> str:
    """A copy of the example with one change: ``edit`` replaced by ``new``, or appended."""
    target = folder / name
    target.mkdir()
    shutil.copy(EXAMPLES / "_common.py", target)
    text = (EXAMPLES / "support_agent.py").read_text()
    if new is None:
        text += edit
    else:
        assert edit in text
        text = text.replace(edit, new)
    (target / "support_agent.py").write_text(text)
    return f"{target / 'support_agent.py'}:agent"


TRIAGE = """

class Triaged(Agent):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.workflow.add_step(self._triage, name="triage")

    def _receive(self, state, ctx):
        return super()._receive(state, ctx)[0], "triage"

    def _triage(self, state, ctx):
        return {"priority": "high"}, "llm"


agent = Triaged(
    "support", model(parser("").parse_args([])), [lookup_order, issue_refund], system=SYSTEM
)
"""


def test_an_exported_run_replays_in_a_fresh_process_without_its_store(
    fake: provider.FakeProvider, tmp_path: Path
) -> None:
    fake.script(
        CHAT,
        chat(None, [("lookup_order", {"order_id": "A-1"})]),
        chat(None, [("issue_refund", {"order_id": "A-1", "amount": 120})]),
        chat("Refunded 120 for your kettle (A-1)."),
    )
    asked = example(
        "support_agent", "ask", "A-1 arrived broken, refund me", fake=fake, cwd=tmp_path
    )
    found = re.search(r"^run: (\S+)", asked, re.MULTILINE)
    assert found, asked
    run = found.group(1)
    example("support_agent", "approve", run, fake=fake, cwd=tmp_path)
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    exported = savegame("export", run, "-o", "refund.sgrun", "--store", store, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    by_id = savegame(
        "replay", run, "--store", store, "--against", str(EXAMPLES / "support_agent.py:agent"),
        "--json", cwd=tmp_path,
    )  # fmt: skip
    assert by_id.returncode == 0, by_id.stderr
    assert json.loads(by_id.stdout)["runs"][0]["source"] == store
    (tmp_path / "runs.db").unlink()  # offline: the file is all a replay has
    requests, refunds = len(fake.asked), (tmp_path / "refunds.jsonl").read_text()
    assert requests == 3 and len(refunds.splitlines()) == 1

    same = savegame(
        "replay", "refund.sgrun", "--against", str(EXAMPLES / "support_agent.py:agent"),
        cwd=tmp_path,
    )  # fmt: skip
    assert same.returncode == 0, same.stdout + same.stderr
    assert f"run {run} (workflow 'support', from refund.sgrun): identical" in same.stdout
    assert "6 steps, 5 calls answered from the journal" in same.stdout

    prompt = _variant(tmp_path, "prompt", "Be brief.", "Be brief and kind.")
    currency = _variant(
        tmp_path, "currency", "amount: int, *, request_id: str",
        'amount: int, currency: str = "EUR", *, request_id: str',
    )  # fmt: skip
    step = _variant(tmp_path, "step", TRIAGE)
    outputs = {}
    for name, ref in (("prompt", prompt), ("currency", currency), ("step", step)):
        done = savegame("replay", "refund.sgrun", "--against", ref, cwd=tmp_path)
        assert done.returncode == 6, done.stdout + done.stderr
        assert "error: 1 run diverged from the code" in done.stderr
        outputs[name] = done.stdout
        (tmp_path / f"{name}.out").write_text(done.stdout)
    assert "first divergence at step 2 (llm), call 0" in outputs["prompt"]
    assert '+ "…ed orders, at most their total. Be brief and kind."' in outputs["prompt"]
    assert "first checkpoint that differs: step 1 (receive)" in outputs["prompt"]
    assert "first divergence at step 5 (tools), call 0" in outputs["currency"]
    assert '+ /arguments/currency: "EUR"' in outputs["currency"]
    assert "first divergence at step 3 (llm), call 0" in outputs["step"]
    assert "the journal holds: tool lookup_order" in outputs["step"]
    assert (
        "first checkpoint that differs: step 2 (recorded llm, replayed triage)" in outputs["step"]
    )

    as_json = savegame("replay", "refund.sgrun", "--against", step, "--json", cwd=tmp_path)
    report = json.loads(as_json.stdout)
    assert report["identical"] is False
    assert report["runs"][0]["divergence"]["position"] == "3:0"
    # Nothing was asked of the model, nothing refunded, by any replay.
    assert len(fake.asked) == requests
    assert (tmp_path / "refunds.jsonl").read_text() == refunds
