"""pydantic-ai's bank support agent (its documentation's first example), made durable.

The agent is pydantic-ai's own: a ``SupportOutput`` answer, the customer's name in
its instructions, a ``customer_balance`` tool over a database in its dependencies.
Two things are added: ``SavegameDurability`` on the agent, which makes each model
request and each tool call a journaled call of a savegame step, and a ``block_card``
tool that really blocks the card, a write that waits for a person's approval.

Kill the process at any point and run the same command again: the run goes on from
its journal, nothing the model answered is asked again and no card is blocked twice.

    OPENAI_API_KEY=sk-... python examples/pydantic_ai_bank_support.py "I just lost my card!"
    SAVEGAME_MODEL_URL=http://127.0.0.1:8000/v1 python examples/... "What is my balance?"

``SAVEGAME_MODEL_URL`` points the OpenAI model at any OpenAI-compatible server (the
tests' local one, vLLM, Ollama); ``--store`` picks the store (an SQLite file by default),
``--yes`` approves the block without asking.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field
from pydantic_ai import Agent, RunContext
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from savegame import END, RunStatus, StepContext, Workflow, approve, reject, resume, run
from savegame.client import get_checkpoint, get_run
from savegame.errors import NotFoundError
from savegame.integrations.pydantic_ai import SavegameDurability, request_id, run_agent

BLOCKED: dict[int, str] = {}
"""The bank's card system (here, a dict): card blocks by customer, with the request id
the block was sent under."""


class DatabaseConn:
    """A fake database, as in pydantic-ai's example."""

    async def customer_name(self, *, id: int) -> str | None:
        return "John" if id == 123 else None

    async def customer_balance(self, *, id: int, include_pending: bool) -> float:
        if id == 123:
            return 123.45 if include_pending else 100.00
        raise ValueError("Customer not found")


@dataclass
class SupportDependencies:
    customer_id: int
    db: DatabaseConn


class SupportOutput(BaseModel):
    support_advice: str = Field(description="Advice returned to the customer")
    block_card: bool = Field(description="Whether to block their card or not")
    risk: int = Field(description="Risk level of query", ge=0, le=10)


model = OpenAIChatModel(
    os.environ.get("SAVEGAME_MODEL", "gpt-4o"),
    provider=OpenAIProvider(
        base_url=os.environ.get("SAVEGAME_MODEL_URL"),
        api_key=os.environ.get("OPENAI_API_KEY", "local"),
    ),
)

support_agent = Agent(
    model,
    name="bank_support",
    deps_type=SupportDependencies,
    output_type=SupportOutput,
    instructions=(
        "You are a support agent in our bank, give the customer support and judge the "
        "risk level of their query. Block a card that was lost or stolen."
    ),
    capabilities=[SavegameDurability(tools={"block_card": {"effect": "write", "approval": True}})],
)


@support_agent.instructions
async def add_customer_name(ctx: RunContext[SupportDependencies]) -> str:
    customer_name = await ctx.deps.db.customer_name(id=ctx.deps.customer_id)
    return f"The customer's name is {customer_name!r}"


@support_agent.tool
async def customer_balance(ctx: RunContext[SupportDependencies], include_pending: bool) -> str:
    """Returns the customer's current account balance."""
    balance = await ctx.deps.db.customer_balance(
        id=ctx.deps.customer_id, include_pending=include_pending
    )
    return f"${balance:.2f}"


@support_agent.tool
async def block_card(ctx: RunContext[SupportDependencies]) -> str:
    """Blocks the customer's card."""
    # The card system can deduplicate on the request id: the same across crashes.
    BLOCKED[ctx.deps.customer_id] = request_id()
    return "The card is blocked."


support = Workflow("bank-support")


@support.step(entry=True)
async def answer(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    deps = SupportDependencies(customer_id=state["customer_id"], db=DatabaseConn())
    result = await run_agent(ctx, support_agent, state["query"], deps=deps)
    return {"answer": result.output.model_dump()}, END


def _shown(answer: Any) -> str:
    return json.dumps(answer, sort_keys=True)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("query")
    parser.add_argument("--customer", type=int, default=123)
    parser.add_argument("--store", default="sqlite:///bank_support.db")
    parser.add_argument("--run-id", default="bank-support-1")
    parser.add_argument("--yes", action="store_true", help="approve a card block without asking")
    args = parser.parse_args(argv)

    try:
        status = get_run(args.run_id, store=args.store).status
    except NotFoundError:
        given = {"customer_id": args.customer, "query": args.query}
        result = run(support, given, run_id=args.run_id, store=args.store)
    else:
        if status in (RunStatus.COMPLETED, RunStatus.FAILED):
            state = get_checkpoint(args.run_id, store=args.store).state
            print(f"run {args.run_id} is {status.value}: {_shown(state.get('answer'))}")
            return dict(state)
        # Started before (and killed, or waiting for a person): on from its journal.
        print(f"run {args.run_id} is {status.value}: going on from its journal")
        result = resume(args.run_id, store=args.store, workflow=support)
    while result.status is RunStatus.INTERRUPTED:
        ok = args.yes or input("The agent wants to block the card. Approve? [y/N] ") == "y"
        if ok:
            decision = approve(args.run_id, store=args.store, workflow=support, by="cli")
        else:
            decision = reject(args.run_id, reason="declined", store=args.store, workflow=support)
        if decision.result is None:
            raise SystemExit(f"the run stopped: {decision.error}")
        result = decision.result
    print(f"{result.status.value}: {_shown(result.state.get('answer'))}")
    print(f"blocked cards: {BLOCKED}")
    return dict(result.state)


if __name__ == "__main__":
    main()
