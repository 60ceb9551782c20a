"""An Agents SDK run reads like any savegame run from the command line: ``savegame runs``,
``history``, ``effects`` (the tools by ``<agent>.<tool>``, the model calls), ``models``
(tokens and cost per model) and ``diff`` against its fork."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from savegame import RunStatus, run
from savegame.cli import app
from savegame.client import fork, history
from tests.provider import FakeProvider

from .bank import build, script


def cli(*args: str) -> str:
    out = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert out.exit_code == 0, out.stdout + out.stderr
    return out.stdout


def test_the_commands_show_an_agents_sdk_run(fake: FakeProvider, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    flow, _ = build("oai-cli", fake.openai_url, tmp_path / "ledger.jsonl")
    script(
        fake,
        "responses",
        (None, [("transfer", {"customer": "c1", "amount": 20})]),
        ("Sent 20.", []),
    )
    done = run(flow, {"question": "send 20"}, run_id="r1", store=url)
    assert done.status is RunStatus.COMPLETED

    assert "r1" in cli("runs", "--store", url)
    assert len(json.loads(cli("history", "r1", "--json", "--store", url))) == len(
        history("r1", store=url)
    )
    effects = cli("effects", "r1", "--store", url)
    assert "oai-cli.transfer" in effects and "llm:gpt-4o" in effects
    models = json.loads(cli("models", "r1", "--json", "--store", url))
    assert "gpt-4o" in json.dumps(models) and "24" in json.dumps(models)  # 2 x 12 tokens in

    forked = fork(history("r1", store=url)[-1].checkpoint_id, store=url, workflow=flow)
    assert forked.result is not None and forked.result.state == done.state
    assert "states are equal" in cli("diff", "r1", forked.result.run_id, "--store", url)
