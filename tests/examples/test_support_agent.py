"""examples/support_agent.py: a refund waits for a person, is made once when approved,
and a rejected one is explained by the model instead."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.provider import CHAT, FakeProvider, chat

from .conftest import example


def run_id(out: str) -> str:
    found = re.search(r"^run: (\S+)", out, re.MULTILINE)
    assert found, out
    return found.group(1)


def test_a_refund_waits_for_approval_and_is_made_once(fake: FakeProvider, tmp_path: Path) -> None:
    fake.script(
        CHAT,
        chat(None, [("lookup_order", {"order_id": "A-1"})]),
        chat(None, [("issue_refund", {"order_id": "A-1", "amount": 120})]),
        chat("Refunded 120 for your kettle (A-1)."),
    )
    asked = example(
        "support_agent", "ask", "A-1 arrived broken, refund me", fake=fake, cwd=tmp_path
    )
    assert 'waiting for approval: issue_refund {"amount": 120, "order_id": "A-1"}' in asked
    assert not (tmp_path / "refunds.jsonl").exists()  # nothing paid before a person said so
    run = run_id(asked)

    approved = example("support_agent", "approve", run, fake=fake, cwd=tmp_path)
    assert "answer: Refunded 120 for your kettle (A-1)." in approved
    [refund] = [json.loads(line) for line in (tmp_path / "refunds.jsonl").read_text().splitlines()]
    assert refund["order_id"] == "A-1" and refund["amount"] == 120
    assert refund["request_id"].startswith(run)
    # The model saw the order it looked up and the refund that was made.
    last = fake.bodies(CHAT)[-1]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert json.loads(last[3]["content"])["total"] == 120
    assert json.loads(last[5]["content"])["request_id"] == refund["request_id"]
    assert len(fake.bodies(CHAT)) == 3


def test_a_rejected_refund_is_not_made_and_the_model_hears_why(
    fake: FakeProvider, tmp_path: Path
) -> None:
    fake.script(
        CHAT,
        chat(None, [("issue_refund", {"order_id": "A-2", "amount": 45})]),
        chat("Sorry, A-2 is still in transit: no refund yet."),
    )
    asked = example("support_agent", "ask", "refund A-2", fake=fake, cwd=tmp_path)
    rejected = example(
        "support_agent",
        "reject",
        run_id(asked),
        "--reason",
        "not delivered",
        fake=fake,
        cwd=tmp_path,
    )
    assert "answer: Sorry, A-2 is still in transit" in rejected
    assert not (tmp_path / "refunds.jsonl").exists()
    told = fake.bodies(CHAT)[-1]["messages"][-1]
    assert told["role"] == "tool" and "not delivered" in told["content"]
