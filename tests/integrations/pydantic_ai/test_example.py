"""examples/pydantic_ai_bank_support.py runs, as a user runs it, against the local
provider: the card block waits for the person's "y", the model is asked each turn once,
and running the command again after the run ended asks nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.provider import CHAT, FakeProvider, chat

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "pydantic_ai_bank_support.py"
ADVICE = {"support_advice": "Your card is blocked, John.", "block_card": True, "risk": 8}


def example(fake: FakeProvider, store: str, *args: str, answer: str = "") -> str:
    env = {
        **os.environ,
        "SAVEGAME_MODEL_URL": fake.openai_url,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), *args, "--store", store],
        input=answer, capture_output=True, text=True, env=env, timeout=90, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_bank_support_example_blocks_a_card_once_approved(
    fake: FakeProvider, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'bank.db'}"
    fake.script(
        CHAT,
        chat(None, [("block_card", {})]),
        chat(None, [("final_result", ADVICE)]),
    )
    out = example(fake, store, "I just lost my card!", answer="y\n")
    assert "Approve? [y/N]" in out
    assert "completed: " + json.dumps(ADVICE, sort_keys=True) in out
    assert "blocked cards: {123: 'bank-support-1:1:" in out
    bodies = fake.bodies(CHAT)
    assert len(bodies) == 2
    # pydantic-ai's dynamic instructions reached the model, the tool's result came back.
    assert "The customer's name is 'John'" in json.dumps(bodies[0]["messages"])
    assert bodies[1]["messages"][-1] == {
        "role": "tool", "tool_call_id": "call_0", "content": "The card is blocked.",
    }  # fmt: skip

    again = example(fake, store, "I just lost my card!")
    assert "run bank-support-1 is completed: " + json.dumps(ADVICE, sort_keys=True) in again
    assert len(fake.bodies(CHAT)) == 2


def test_the_bank_support_example_answers_a_balance_query(
    fake: FakeProvider, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'bank.db'}"
    advice = {"support_advice": "Your balance is $123.45.", "block_card": False, "risk": 1}
    fake.script(
        CHAT,
        chat(None, [("customer_balance", {"include_pending": True})]),
        chat(None, [("final_result", advice)]),
    )
    out = example(fake, store, "What is my balance?", "--run-id", "balance-1")
    assert "completed: " + json.dumps(advice, sort_keys=True) in out
    assert fake.bodies(CHAT)[1]["messages"][-1]["content"] == "$123.45"
