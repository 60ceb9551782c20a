"""Someone with write access but no key tries to make a fork replay what it should not:
another run's results, or reused results after the fork diverged."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from savegame import StorageConfig, resume, run
from savegame.client import fork, history
from savegame.codec.crypto import Keyring
from savegame.errors import CorruptRecordError
from tests.adversarial.conftest import Raw
from tests.crash.fork_workload import lines, wf

KEYS = StorageConfig(keyring=Keyring({"k1": os.urandom(32)}, active="k1"))


@pytest.fixture(autouse=True)
def _ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAVEGAME_LEDGER", str(tmp_path / "ledger.txt"))


def _loaded(text: Any) -> dict[str, Any]:
    """A metadata column as stored: JSON text (SQLite) or a decoded jsonb (PostgreSQL)."""
    return text if isinstance(text, dict) else json.loads(text)


def _forked(raw: Raw, **edit: Any) -> str:
    origin = run(wf, {}, run_id="origin", store=raw.url, storage=KEYS)
    start = history(origin.run_id, store=raw.url, storage=KEYS)[-1]
    made = fork(start.checkpoint_id, run=False, store=raw.url, workflow=wf, storage=KEYS, **edit)
    return made.run_id


def test_a_fork_pointed_at_another_run_is_refused(raw: Raw) -> None:
    fork_id = _forked(raw)
    run(wf, {"factor": 7}, run_id="other", store=raw.url, storage=KEYS)
    [(text,)] = raw.execute("SELECT metadata FROM runs WHERE run_id = ?", (fork_id,))
    meta = _loaded(text)
    meta["fork"]["run"] = "other"
    raw.execute("UPDATE runs SET metadata = ? WHERE run_id = ?", (json.dumps(meta), fork_id))
    calls = lines()
    with pytest.raises(CorruptRecordError, match=f"run {fork_id}"):
        resume(fork_id, store=raw.url, workflow=wf, storage=KEYS)
    assert lines() == calls


def test_an_executed_mark_edited_to_reused_is_refused(raw: Raw) -> None:
    fork_id = _forked(raw)
    out = resume(fork_id, store=raw.url, workflow=wf, storage=KEYS)
    assert out.status.value == "completed"
    [(text, request_id)] = raw.execute(
        "SELECT metadata, request_id FROM effects WHERE run_id = ? LIMIT 1", (fork_id,)
    )
    meta = _loaded(text)
    meta["replay"] = "executed"
    raw.execute(
        "UPDATE effects SET metadata = ? WHERE run_id = ? AND request_id = ?",
        (json.dumps(meta), fork_id, request_id),
    )
    from savegame.client import verify

    report = verify(store=raw.url, storage=KEYS)
    assert not report.ok
    assert any(request_id in d.ident for d in report.damaged)
