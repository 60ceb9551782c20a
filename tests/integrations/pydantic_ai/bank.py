"""A small durable pydantic-ai agent for the tests: the real ``Agent`` and its real
``OpenAIChatModel`` talking to the test's local provider.

``balance`` is a read; ``transfer`` a write to the outside world (a ledger file, one
line per transfer with its request id) that ``reconcile`` can ask about by request id;
``block_card`` a write gated by a person's approval. ``SAVEGAME_HOOK=<name>`` makes the
process print ``HOOK <name>`` and block there, for a parent's SIGKILL: ``balance:mid``
(in the tool round, after the transfer), ``transfer:after`` (the ledger written, the
result not yet journaled).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from savegame import END, StepContext, Workflow
from savegame.integrations.pydantic_ai import SavegameDurability, request_id, run_agent

#: What the agent is told; a test changes it to play a redeploy with another prompt.
INSTRUCTIONS = {"text": "You are a bank's support agent. Be brief."}


def hook(name: str) -> None:
    if os.environ.get("SAVEGAME_HOOK") == name:
        sys.stdout.write(f"HOOK {name}\n")
        sys.stdout.flush()
        sys.stdin.readline()


def ledger_lines(ledger: Path) -> list[dict[str, Any]]:
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text().splitlines() if line]


def build(name: str, base_url: str, ledger: Path) -> tuple[Workflow, Agent[None, str]]:
    model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=base_url, api_key="k"))

    def found(request: str) -> Any:
        for line in ledger_lines(ledger):
            if line["request_id"] == request:
                return f"sent {line['amount']}"
        return None

    durability = SavegameDurability(
        tools={
            "transfer": {"effect": "write", "reconcile": found},
            "block_card": {"effect": "write", "approval": True},
        }
    )
    agent = Agent(
        model,
        name=name,
        instructions=lambda: INSTRUCTIONS["text"],
        capabilities=[durability],
    )

    @agent.tool_plain
    def balance(customer: str) -> float:
        """The customer's balance."""
        hook("balance:mid")
        return 100.0

    @agent.tool_plain
    def transfer(customer: str, amount: float) -> str:
        """Send money from the customer's account."""
        with ledger.open("a") as out:
            out.write(json.dumps({"request_id": request_id(), "amount": amount}) + "\n")
        hook("transfer:after")
        return f"sent {amount}"

    @agent.tool_plain
    def block_card(customer: str) -> str:
        """Block the customer's card."""
        with ledger.open("a") as out:
            out.write(json.dumps({"request_id": request_id(), "blocked": customer}) + "\n")
        return "blocked"

    flow = Workflow(name)

    @flow.step(entry=True)
    async def support(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        result = await run_agent(ctx, agent, state["question"])
        return {"answer": result.output}, END

    return flow, agent


flow: Workflow | None = None
if "SAVEGAME_MODEL_URL" in os.environ:  # the crash tests' child process
    flow, _ = build(
        "pai-crash", os.environ["SAVEGAME_MODEL_URL"], Path(os.environ["SAVEGAME_LEDGER"])
    )
