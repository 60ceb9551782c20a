"""SIGKILL in the middle of a durable pydantic-ai run, then a resume in another process:
each model request is sent once (counted at the provider) and each write happens once
(counted in the outside ledger the tool writes).

The child runs the bank agent (``bank.py``) whose real OpenAIChatModel asks the
provider in this process. The model's first turn asks for a transfer (a write) and a
balance (a read); the child is killed in the balance, after the transfer's result was
journaled, or in the transfer itself, after the ledger line and before its result was
journaled (in doubt: the tool's ``reconcile`` finds the line by request id).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from savegame.client import list_effects, model_calls
from savegame.model import EffectKind, EffectStatus
from tests.crash.harness import kill_at_hook, run_to_end
from tests.provider import CHAT, FakeProvider, chat

from .bank import ledger_lines

pytestmark = pytest.mark.crash

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child.py")
ROUND = [("transfer", {"customer": "c1", "amount": 20}), ("balance", {"customer": "c1"})]


def env(fake: FakeProvider, ledger: Path) -> dict[str, str]:
    return {
        "SAVEGAME_MODEL_URL": fake.openai_url,
        "SAVEGAME_LEDGER": str(ledger),
        "SAVEGAME_INPUT": '{"question": "Send 20 from c1, then tell me the balance."}',
    }


@pytest.mark.parametrize("hook", ["balance:mid", "transfer:after"])
def test_a_kill_mid_tool_round_pays_no_model_twice_and_writes_once(
    fake: FakeProvider, tmp_path: Path, hook: str
) -> None:
    url, ledger = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "ledger.jsonl"
    fake.script(CHAT, chat(None, ROUND), chat("Sent 20; the balance is 100."))
    given = env(fake, ledger)

    killed = kill_at_hook("start", url, "run", hook, script=CHILD, env=given)
    assert killed.hooks == [hook], killed.stderr[-2000:]
    assert killed.returncode == -9
    assert len(fake.bodies(CHAT)) == 1
    assert len(ledger_lines(ledger)) == 1

    resumed = run_to_end("resume", url, "run", script=CHILD, env=given)
    assert resumed.done == "completed", (resumed.error, resumed.stderr[-2000:])
    # The turn the journal holds was not sent again; the next one once, with both results.
    bodies = fake.bodies(CHAT)
    assert len(bodies) == 2
    assert [m["role"] for m in bodies[1]["messages"]] == [
        "system", "user", "assistant", "tool", "tool",
    ]  # fmt: skip
    assert [m.get("content") for m in bodies[1]["messages"][3:]] == ["sent 20.0", "100.0"]
    # The transfer happened once, under the request id of its journal entry.
    [write] = [e for e in list_effects("run", store=url) if e.kind is EffectKind.WRITE]
    assert write.status is EffectStatus.DONE
    assert ledger_lines(ledger) == [{"request_id": write.request_id, "amount": 20.0}]
    assert write.metadata.get("reconciled") is (True if hook == "transfer:after" else None)
    # The journal holds each model request once: the one made before the kill, one after.
    assert [c.response.content for c in model_calls("run", store=url)] == [
        None, "Sent 20; the balance is 100.",
    ]  # fmt: skip
