"""examples/openai_agents_support.py runs, as a user runs it, against the local provider
(Chat Completions, and the Responses API with ``--api responses``): the refund waits
for the person's "y", the model is asked each turn once, and running the command again
after the run ended asks nothing; a "n" is the SDK's rejection, told to the model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.provider import FakeProvider

from .bank import path_of, script

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "openai_agents_support.py"

pytestmark = pytest.mark.slow


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


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_the_support_example_refunds_once_approved(
    fake: FakeProvider, tmp_path: Path, api: str
) -> None:
    store = f"sqlite:///{tmp_path / 'shop.db'}"
    script(
        fake,
        api,
        (None, [("lookup_order", {"order_id": "A-1"})]),
        (None, [("refund", {"order_id": "A-1", "amount": 120.0})]),
        ("Refunded 120.0 on A-1.", []),
    )
    out = example(fake, store, "Refund order A-1.", "--api", api, answer="y\n")
    assert "Approve? [y/N]" in out
    assert "completed: Refunded 120.0 on A-1." in out
    assert "refunds: {'A-1': (120.0, 'shop-support-1:1:3')}" in out
    bodies = fake.bodies(path_of(api))
    assert len(bodies) == 3
    assert "delivered" in json.dumps(bodies[1])  # the order the tool found reached the model

    again = example(fake, store, "Refund order A-1.", "--api", api)
    assert "run shop-support-1 is completed: Refunded 120.0 on A-1." in again
    assert len(fake.bodies(path_of(api))) == 3


def test_a_declined_refund_is_told_to_the_model(fake: FakeProvider, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'shop.db'}"
    script(
        fake,
        "chat",
        (None, [("refund", {"order_id": "A-1", "amount": 120.0})]),
        ("I could not refund it.", []),
    )
    out = example(fake, store, "Refund order A-1.", answer="n\n")
    assert "completed: I could not refund it." in out and "refunds: {}" in out
    told = fake.bodies(path_of("chat"))[1]["messages"][-1]
    assert told["role"] == "tool" and told["content"].startswith("Tool execution was not approved.")
