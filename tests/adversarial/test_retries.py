"""Retries under an attacker with the database and no key.

The errors of failed attempts repeat what was called (a card number in a message), so
with keys they are sealed like the values they repeat: no plaintext copy anywhere. And
the attempt count that decides how many more attempts a run gets is authenticated: an
attempt entry edited to a lower number is refused, not taken as a fresh budget.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from savegame import END, Backoff, StepContext, StorageConfig, Workflow, resume, run, tool
from savegame.client import get_run, list_effects
from savegame.codec.crypto import Keyring
from savegame.errors import CorruptRecordError
from savegame.model import RunStatus

from .conftest import Raw

KEYS = StorageConfig(keyring=Keyring({"k1": os.urandom(32)}, active="k1"))
MARKER = "CARD-4111-1111-MARKER"
TINY = Backoff(initial=0.001, maximum=0.001, jitter=0)
tried: list[str] = []


@tool(retries=2, backoff=TINY)
def check_card(card: str) -> str:
    tried.append(card)
    raise ConnectionError(f"no answer for card {card}")


def card_workflow() -> Workflow:
    wf = Workflow("cards")

    @wf.step(entry=True, retries=1, backoff=TINY)
    def check(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"ok": ctx.call(check_card, state["card"])}, END

    return wf


def test_the_errors_of_failed_attempts_leave_no_plaintext_copy(raw: Raw) -> None:
    tried.clear()
    with pytest.raises(Exception, match="no answer for card"):
        run(card_workflow(), {"card": MARKER}, run_id="c", store=raw.url, storage=KEYS)
    assert len(tried) == 6  # 3 attempts of the tool in each of 2 executions of the step
    assert MARKER.encode() not in raw.dump()
    errors = [e.error or "" for e in list_effects("c", store=raw.url, storage=KEYS)]
    assert sum(MARKER in text for text in errors) == 6  # a person with the key reads them all
    assert get_run("c", store=raw.url, storage=KEYS).status is RunStatus.FAILED


def test_an_attempt_number_edited_down_is_refused(raw: Raw) -> None:
    tried.clear()
    wf = Workflow("cards-once")

    @wf.step(entry=True)
    def check(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"ok": ctx.call(check_card, state["card"])}, END

    with pytest.raises(Exception, match="no answer for card"):
        run(wf, {"card": "c-1"}, run_id="e", store=raw.url, storage=KEYS)
    assert len(tried) == 3
    # The budget of a resumed run is read from the last attempt: make it say "1 of 3".
    raw.execute(
        "UPDATE effects SET metadata = ? WHERE run_id = 'e' AND request_id = 'e:1:0:attempt:3'",
        ('{"attempt": 1, "of": 3}',),
    )
    with pytest.raises(CorruptRecordError, match="e:1:0:attempt:3"):
        resume("e", store=raw.url, workflow=wf, storage=KEYS)
    assert len(tried) == 3
