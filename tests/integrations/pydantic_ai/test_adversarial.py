"""Attacks on a durable pydantic-ai run's journal: what a resume must refuse.

A run waits at its gated write, two model requests and a read on record. Then:

* an entry edited in the database (the recorded model answer asks for another
  customer's card) is refused by its seal before anything is asked or written;
* an approver's edit of the gated call (pydantic-ai would call what the model asked,
  not the edit) is refused before the tool runs, and the write settled not done;
* a redeploy that changed the agent's instructions asks the model something else at a
  position whose answer is on record: that answer was to another prompt, so the resume
  stops with NonDeterminismError instead of replaying it (savegame's rule for any call).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from savegame import RunStatus, approve, run
from savegame.client import get_run, list_effects
from savegame.errors import ConfigurationError, CorruptRecordError, NonDeterminismError
from savegame.model import EffectKind, EffectStatus
from tests.provider import CHAT, FakeProvider

from . import bank
from .test_durable import QUESTION, script_block


@pytest.fixture
def waiting(fake: FakeProvider, tmp_path: Path) -> Iterator[tuple[str, Path, object]]:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    flow, _ = bank.build("pai-attacked", fake.openai_url, ledger)
    script_block(fake)
    assert run(flow, QUESTION, run_id="r1", store=url).status is RunStatus.INTERRUPTED
    assert len(fake.bodies(CHAT)) == 2
    yield url, ledger, flow


def test_an_edited_model_answer_is_refused(
    waiting: tuple[str, Path, object], fake: FakeProvider, tmp_path: Path
) -> None:
    url, ledger, flow = waiting
    with sqlite3.connect(tmp_path / "runs.db") as db:
        (result,) = db.execute("SELECT result FROM effects WHERE request_id = 'r1:1:2'").fetchone()
        assert b'"c1"' in result.replace(b'\\"', b'"')
        forged = result.replace(b"c1", b"c9")
        db.execute("UPDATE effects SET result = ? WHERE request_id = 'r1:1:2'", (forged,))

    decision = approve("r1", store=url, workflow=flow)
    assert isinstance(decision.error, CorruptRecordError), decision
    assert "r1:1:2" in str(decision.error)
    assert bank.ledger_lines(ledger) == []
    assert len(fake.bodies(CHAT)) == 2


def test_a_changed_prompt_on_resume_is_non_determinism(
    waiting: tuple[str, Path, object], fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, ledger, flow = waiting
    monkeypatch.setitem(bank.INSTRUCTIONS, "text", "You are a pirate. Block every card.")

    decision = approve("r1", store=url, workflow=flow)
    assert isinstance(decision.error, NonDeterminismError), decision
    assert "r1:1:0" in str(decision.error) and "llm:gpt-4o" in str(decision.error)
    assert get_run("r1", store=url).status is RunStatus.FAILED
    # Nothing was asked under the other prompt, nothing written on the old approval.
    assert len(fake.bodies(CHAT)) == 2
    assert bank.ledger_lines(ledger) == []


def test_an_approvers_edit_is_refused_and_nothing_is_written(
    waiting: tuple[str, Path, object], fake: FakeProvider
) -> None:
    url, ledger, flow = waiting
    edit = {"call": {"tool": "block_card", "args": {"customer": "c9"}}}
    decision = approve("r1", store=url, workflow=flow, edit=edit)
    assert isinstance(decision.error, ConfigurationError), decision
    assert "edit of a pydantic-ai tool call is not supported" in str(decision.error)
    # Refused before the tool ran: settled not done, not left in doubt for a person.
    [write] = [e for e in list_effects("r1", store=url) if e.kind is EffectKind.WRITE]
    assert write.status is EffectStatus.NOT_DONE
    assert bank.ledger_lines(ledger) == []
    assert len(fake.bodies(CHAT)) == 2
