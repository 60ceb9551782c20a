"""Ten steps, each a read, a write and a model call, every one counted in a ledger file
outside the store (``SAVEGAME_LEDGER``): what a fork replays must not appear there twice.

``SAVEGAME_STEP_SLEEP`` slows each step down so a kill lands mid-fork.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from savegame import END, StepContext, Workflow, tool
from savegame.agent import ModelResponse, ToolSpec


def ledger(line: str) -> None:
    path = os.environ["SAVEGAME_LEDGER"]
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def lines() -> list[str]:
    path = os.environ["SAVEGAME_LEDGER"]
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


@tool(effect="read")
def fork_quote(item: int) -> dict[str, Any]:
    ledger(f"quote {item}")
    return {"item": item, "price": 10 * item}


@tool(effect="write", idempotent=True)
def fork_send(item: int, amount: int, *, request_id: str) -> dict[str, Any]:
    ledger(f"send {item} {amount} {request_id}")
    return {"id": f"S-{item}-{amount}"}


class CountingModel:
    name = "counting"

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        text = str(messages[-1]["content"])
        ledger(f"llm {text}")
        return ModelResponse(content=f"ok: {text}", input_tokens=3, output_tokens=2)


model = CountingModel()
wf = Workflow("fork-ten")


@wf.step(entry=True)
def work(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    delay = float(os.environ.get("SAVEGAME_STEP_SLEEP", "0"))
    if delay:
        time.sleep(delay)
    i = state.get("i", 0) + 1
    quote = ctx.call(fork_quote, item=i)
    amount = quote["price"] * state.get("factor", 1)
    sent = ctx.call(fork_send, item=i, amount=amount)
    reply = ctx.llm(model, [{"role": "user", "content": f"step {i} sent {amount}"}])
    if state.get("fail_at") == i:
        raise RuntimeError(f"step {i} fails")
    return (
        {"i": i, "total": state.get("total", 0) + amount, "sent": [*state.get("sent", []), sent["id"]],
         "said": reply.content},
        "work" if i < 10 else END,
    )  # fmt: skip
