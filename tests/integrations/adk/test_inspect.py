"""A durable ADK run is a run like any other: ``savegame runs``, ``history``, ``effects``,
``models`` and ``diff`` show it, the web UI's inbox shows its confirmation and decides
it; ``export`` writes it to a file that ``import`` loads into
another backend (SQLite file -> PostgreSQL), where a fork of the imported run replays
every model request and write from the journal: counted at the server and in the
ledger, nothing is asked or written again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from savegame import RunStatus, resume, run
from savegame.cli import app
from savegame.client import export_run, fork, history, import_run, list_effects, model_calls
from savegame.model import EffectKind
from tests import services
from tests.provider import GEMINI, FakeProvider, gemini

from .bank import build, ledger_lines

ASK = {"question": "Send 20 from c1, then tell me the balance."}


def script_transfer(fake: FakeProvider) -> None:
    fake.script(
        GEMINI,
        gemini(
            None, [("transfer", {"customer": "c1", "amount": 20}), ("balance", {"customer": "c1"})]
        ),
        gemini("Sent 20; the balance is 100."),
    )


def cli(*args: str) -> Any:
    out = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert out.exit_code == 0, out.stderr
    return out.stdout


def test_the_cli_shows_an_adk_run(fake: FakeProvider, tmp_path: Path) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("adk-cli", fake.root, ledger)
    script_transfer(fake)
    assert run(flow, ASK, run_id="r1", store=url).status is RunStatus.COMPLETED

    runs = json.loads(cli("runs", "--store", url, "--json"))
    assert [(r["run_id"], r["status"]) for r in runs] == [("r1", "completed")]
    assert "adk:adk_cli.transfer" in cli("effects", "r1", "--store", url)
    models = json.loads(cli("models", "r1", "--store", url, "--json"))
    assert [c["model"] for c in models["calls"]] == ["gemini-2.5-flash"] * 2
    assert models["models"]["gemini-2.5-flash"]["input_tokens"] == 24
    checkpoints = json.loads(cli("history", "r1", "--store", url, "--json"))
    oldest, newest = checkpoints[-1]["checkpoint_id"], checkpoints[0]["checkpoint_id"]
    changed = cli("diff", oldest, newest, "--store", url)
    assert "answer" in changed and "session" in changed


def test_export_import_into_postgres_and_a_replayed_fork_asks_and_writes_nothing(
    fake: FakeProvider, tmp_path: Path
) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("adk-moved", fake.root, ledger)
    script_transfer(fake)
    done = run(flow, ASK, run_id="r1", store=url)
    assert done.status is RunStatus.COMPLETED
    assert (len(fake.bodies(GEMINI)), len(ledger_lines(ledger))) == (2, 1)

    path = tmp_path / "r1.savegame"
    export_run("r1", path, store=url)
    with services.BACKENDS["postgres"](tmp_path) as other:
        import_run(path, store=other)
        assert [(c.request_id, c.response.content) for c in model_calls("r1", store=other)] == [
            (c.request_id, c.response.content) for c in model_calls("r1", store=url)
        ]
        kinds = [e.kind for e in list_effects("r1", store=other)]
        assert kinds.count(EffectKind.WRITE) == 1 and kinds.count(EffectKind.LLM) == 2

        first = history("r1", store=other)[-1]
        forked = fork(first.checkpoint_id, store=other, workflow=flow)
        assert forked.result is not None and forked.result.status is RunStatus.COMPLETED
        assert forked.result.state == done.state
        # Nothing asked, nothing written: both model requests and the transfer replayed.
        assert (len(fake.bodies(GEMINI)), len(ledger_lines(ledger))) == (2, 1)
        reused = json.loads(cli("models", forked.result.run_id, "--store", other, "--json"))
        # savegame models: both calls reused from the origin's journal, none paid again.
        assert [c["reused"] for c in reused["calls"]] == [True, True]
        assert (reused["total"]["calls"], reused["reused"]["calls"]) == (0, 2)


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_fork_with_another_question_replays_until_the_first_difference(
    fake: FakeProvider, tmp_path: Path, backend: str
) -> None:
    with services.BACKENDS[backend](tmp_path) as url:
        ledger = tmp_path / "ledger.jsonl"
        flow, _ = build("adk-branch", fake.root, ledger)
        script_transfer(fake)
        assert run(flow, ASK, run_id="r1", store=url).status is RunStatus.COMPLETED
        first = history("r1", store=url)[-1]
        fake.script(GEMINI, gemini("Your balance is 100."))
        forked = fork(
            first.checkpoint_id, store=url, workflow=flow, update={"question": "Balance?"}
        )
        assert forked.result is not None
        assert forked.result.state["answer"] == "Your balance is 100."
        # The changed question is a new model request; no transfer was made again.
        assert len(fake.bodies(GEMINI)) == 3 and len(ledger_lines(ledger)) == 1


def test_the_ui_inbox_shows_the_confirmation_and_decides_it(
    fake: FakeProvider, tmp_path: Path
) -> None:
    from starlette.testclient import TestClient

    from savegame.ui import create_app
    from tests.ui.conftest import ORIGIN, csrf_of

    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = build("adk-ui", fake.root, ledger)
    fake.script(
        GEMINI, gemini(None, [("block_card", {"customer": "c1"})]), gemini("Your card is blocked.")
    )
    paused = run(flow, {"question": "Block my card."}, run_id="r1", store=url)
    assert paused.status is RunStatus.INTERRUPTED
    with TestClient(create_app(url), base_url=ORIGIN) as c:
        inbox = c.get("/approvals").text
        assert "r1" in inbox and "adk:adk_ui.block_card" in inbox and "c1" in inbox
        form = {"interrupt_id": paused.interrupt_id or "", "by": "ana", "csrf_token": csrf_of(c)}
        done = c.post("/runs/r1/approve", data={**form, "confirmed": "1"}, follow_redirects=False)
        assert done.status_code in (302, 303), done.text
    [gate] = [e for e in list_effects("r1", store=url) if e.kind is EffectKind.APPROVAL]
    assert gate.metadata["by"] == "ana"
    # The UI recorded the decision; this agent's workflow is not importable by the UI's
    # process (built in a test function), so the run goes on where it loads.
    finished = resume("r1", store=url, workflow=flow)
    assert finished.status is RunStatus.COMPLETED
    assert [line.get("blocked") for line in ledger_lines(ledger)] == ["c1"]
    assert len(fake.bodies(GEMINI)) == 2
