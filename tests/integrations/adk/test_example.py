"""examples/adk_support.py runs, as a user runs it, against the local provider: the
refund waits for the person's "y", the model is asked each turn once, and running the
command again after the run ended asks nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.provider import GEMINI, FakeProvider, gemini

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "adk_support.py"

pytestmark = pytest.mark.slow  # a process that imports ADK: a few seconds each


def example(fake: FakeProvider, store: str, *args: str, answer: str = "", code: int = 0) -> str:
    env = {
        **os.environ,
        "SAVEGAME_MODEL_URL": fake.root,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), *args, "--store", store],
        input=answer, capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == code, done.stderr[-3000:]
    return done.stdout + done.stderr


def test_the_support_example_refunds_once_approved(fake: FakeProvider, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'support.db'}"
    fake.script(
        GEMINI,
        gemini(None, [("lookup_order", {"order_id": "A-1"})]),
        gemini(None, [("refund", {"order_id": "A-1", "amount": 120})]),
        gemini("Refunded 120 on A-1."),
    )
    out = example(fake, store, "Order A-1 arrived broken, refund it.", answer="y\n")
    assert "Approve? [y/N]" in out
    assert "completed: Refunded 120 on A-1." in out
    assert "refunds: {'A-1': (120, 'adk-support-1:1:3')}" in out
    bodies = fake.bodies(GEMINI)
    assert len(bodies) == 3
    assert bodies[2]["contents"][-1]["parts"] == [
        {"functionResponse": {"name": "refund", "response": {"result": "refunded 120 on A-1"}}}
    ]

    again = example(fake, store, "Order A-1 arrived broken, refund it.")
    assert "run adk-support-1 is completed: Refunded 120 on A-1." in again
    assert len(fake.bodies(GEMINI)) == 3


def test_a_declined_refund_is_never_paid(fake: FakeProvider, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'support.db'}"
    fake.script(GEMINI, gemini(None, [("refund", {"order_id": "A-1", "amount": 120})]))
    out = example(fake, store, "Refund A-1.", "--run-id", "declined-1", answer="n\n", code=1)
    assert "the run stopped: run declined-1: call to adk:support.refund was rejected" in out
    assert "Error in plugin" not in out  # savegame's error, not ADK's wrapper of it
    assert "refunds:" not in out
    assert len(fake.bodies(GEMINI)) == 1
