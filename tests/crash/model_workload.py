"""An agent and a custom step whose model is savegame.models.OpenAI talking to the test's
local provider (``SAVEGAME_MODEL_URL``), for the crash tests of real model calls.

``SAVEGAME_HOOK=<name>`` makes the process print ``HOOK <name>`` and block on stdin
there, so the parent's SIGKILL lands exactly at it: ``tools:mid`` (the agent's tool
round, after its first of two parallel calls), ``ask:after_llm`` (the step, after its
model call was journaled, before its checkpoint), ``stream:mid`` (a streamed call, at
its first chunk).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from savegame import END, Agent, StepContext, Workflow
from savegame.models import OpenAI

MODEL = OpenAI("gpt-4o", base_url=os.environ["SAVEGAME_MODEL_URL"], api_key="test-key")


def hook(name: str) -> None:
    if os.environ.get("SAVEGAME_HOOK") == name:
        sys.stdout.write(f"HOOK {name}\n")
        sys.stdout.flush()
        sys.stdin.readline()


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up by id."""
    if order_id == "A-1":
        hook("tools:mid")
    return {"id": order_id, "total": 120}


agent = Agent("model-crash", MODEL, [lookup_order], system="Be brief.", backoff=0)

ask = Workflow("model-step-crash")


@ask.step(entry=True)
def question(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    response = ctx.llm(MODEL, [{"role": "user", "content": state["question"]}])
    hook("ask:after_llm")
    return {"answer": response.content}, END


def on_chunk(piece: str) -> None:
    hook("stream:mid")


tell = Workflow("model-stream-crash")


@tell.step(entry=True)
def streamed(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    response = ctx.llm(MODEL, [{"role": "user", "content": state["question"]}], stream=on_chunk)
    return {"answer": response.content}, END
