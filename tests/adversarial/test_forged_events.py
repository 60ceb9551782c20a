"""Someone with write access to the database but no key tries to answer a waiting run.

An event decides what ``ctx.wait_for`` returns, so with keys configured it must carry the
sender's authentication: one forged without the key (a row inserted straight into the
journal, or a send from a process that holds no key) is refused by name, never taken;
one edited after it was sent is refused the same way. A row edited to wake a run early
(``wake_at``) only makes it look again: the due time that decides is in its journal.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pytest

from savegame import END, RunStatus, StepContext, StorageConfig, Workflow, resume, run, send
from savegame.codec.crypto import Keyring
from savegame.errors import CorruptRecordError
from tests.adversarial.conftest import Raw

KEYS = StorageConfig(keyring=Keyring({"k1": os.urandom(32)}, active="k1"))

refunds = Workflow("refund-on-webhook")


@refunds.step(entry=True)
def wait_for_amount(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"refund": ctx.wait_for("approved_amount")}, END


sleeper = Workflow("sleeper")


@sleeper.step(entry=True)
def nap(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    ctx.sleep(timedelta(days=2))
    return {"woke": True}, END


def test_an_event_sent_without_the_key_is_refused(raw: Raw) -> None:
    waiting = run(refunds, {}, store=raw.url, storage=KEYS)
    assert waiting.status is RunStatus.WAITING
    send(waiting.run_id, "approved_amount", 1_000_000, store=raw.url)  # no keyring here
    with pytest.raises(CorruptRecordError):
        resume(waiting.run_id, store=raw.url, storage=KEYS)


def test_an_event_edited_after_it_was_sent_is_refused(raw: Raw) -> None:
    waiting = run(refunds, {}, store=raw.url, storage=KEYS)
    sent = send(waiting.run_id, "approved_amount", 30, store=raw.url, storage=KEYS)
    # The ciphertext cannot be edited into another amount; the plaintext status can.
    raw.execute(
        "UPDATE effects SET metadata = ? WHERE run_id = ? AND request_id = ?",
        ('{"by": "mallory"}', waiting.run_id, sent.request_id),
    )
    with pytest.raises(CorruptRecordError):
        resume(waiting.run_id, store=raw.url, storage=KEYS)


def test_a_run_woken_early_by_an_edited_row_sleeps_again(raw: Raw) -> None:
    waiting = run(sleeper, {}, store=raw.url, storage=KEYS)
    raw.execute("UPDATE runs SET wake_at = 0 WHERE run_id = ?", (waiting.run_id,))
    again = resume(waiting.run_id, store=raw.url, storage=KEYS)
    assert (again.status, again.state) == (RunStatus.WAITING, {})
