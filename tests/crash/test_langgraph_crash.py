"""A LangGraph run SIGKILLed inside a node that called write tools, then resumed in a
new process: each tool ran once (an idempotent one may be called again, with the same
request id), and a write killed mid-call is in doubt until a person settles it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

import savegame
from savegame.model import EffectStatus
from savegame.stores import open_store
from tests.crash.harness import kill_at_hook, run_to_end

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "langgraph_child.py")

pytestmark = pytest.mark.crash


def _ledger(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _tool_entries(url: str) -> list[Any]:
    store = open_store(url)
    try:
        return [e for e in store.list_effects(limit=10_000) if e.request_id.startswith("tool:")]
    finally:
        store.close()


@pytest.mark.parametrize("hook", ["after-send", "after-tools"])
def test_killed_after_a_write_returned_then_resumed_calls_nothing_again(
    tmp_path: Path, hook: str
) -> None:
    url = f"sqlite:///{tmp_path / 'lg.db'}"
    ledger = tmp_path / "ledger.jsonl"
    env = {"SAVEGAME_LEDGER": str(ledger)}
    killed = kill_at_hook("start", url, "t", hook, script=SCRIPT, env=env)
    assert killed.hooks == [hook], killed.stderr
    before = _ledger(ledger)
    resumed = run_to_end("resume", url, "t", script=SCRIPT, env=env)
    assert resumed.done == "completed", resumed.stderr
    calls = _ledger(ledger)
    assert [c["tool"] for c in calls].count("send_email") == 1
    assert [c["tool"] for c in calls].count("charge") == 1
    assert calls[: len(before)] == before
    assert {e.status for e in _tool_entries(url)} == {EffectStatus.DONE}


def test_an_idempotent_write_killed_mid_call_is_called_again_with_its_request_id(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'lg.db'}"
    ledger = tmp_path / "ledger.jsonl"
    env = {"SAVEGAME_LEDGER": str(ledger)}
    killed = kill_at_hook("start", url, "t", "in-charge", script=SCRIPT, env=env)
    assert killed.hooks == ["in-charge"], killed.stderr
    resumed = run_to_end("resume", url, "t", script=SCRIPT, env=env)
    assert resumed.done == "completed", resumed.stderr
    charges = [c for c in _ledger(ledger) if c["tool"] == "charge"]
    assert len(charges) == 2  # the outside system deduplicates on the request id
    assert charges[0]["request_id"] == charges[1]["request_id"]
    assert [c["tool"] for c in _ledger(ledger)].count("send_email") == 1


def test_a_write_killed_mid_call_is_in_doubt_until_resolved(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lg.db'}"
    ledger = tmp_path / "ledger.jsonl"
    env = {"SAVEGAME_LEDGER": str(ledger)}
    killed = kill_at_hook("start", url, "t", "in-send", script=SCRIPT, env=env)
    assert killed.hooks == ["in-send"], killed.stderr
    for _ in range(2):  # however often it is resumed, it is not sent again
        resumed = run_to_end("resume", url, "t", script=SCRIPT, env=env)
        assert resumed.error == "InDoubtEffectError", resumed.stderr
    assert [c["tool"] for c in _ledger(ledger)] == ["send_email"]
    (pending,) = [e for e in _tool_entries(url) if e.status is EffectStatus.PENDING]
    savegame.resolve(pending.run_id, pending.request_id, done=True, result="msg-1", store=url)
    resumed = run_to_end("resume", url, "t", script=SCRIPT, env=env)
    assert resumed.done == "completed", resumed.stderr
    assert [c["tool"] for c in _ledger(ledger)] == ["send_email", "charge"]
