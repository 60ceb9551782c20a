"""A support agent on the OpenAI Agents SDK, made durable by savegame, with a refund
a person must approve.

The agent is the SDK's own: an ``Agent`` with ``@function_tool`` tools, the refund
marked ``needs_approval=True`` as the SDK marks a tool that waits for a person. Run by
savegame's ``run_agent`` inside a workflow step, each model request and each tool call
is a journaled call of the step; the refund's approval is savegame's, so the process
may exit while it waits (``savegame approve`` or the UI decide it later) and the
refund is made once, under a request id the payment system can deduplicate on.

Kill the process at any point and run the same command again: the run goes on from
its journal, nothing the model answered is asked again and no refund is paid twice.

    OPENAI_API_KEY=sk-... python examples/openai_agents_support.py "Refund order A-1."
    SAVEGAME_MODEL_URL=http://127.0.0.1:8000/v1 python examples/... "Where is order A-1?"

With ``OPENAI_API_KEY`` alone the SDK speaks the Responses API to OpenAI; with
``SAVEGAME_MODEL_URL`` (any OpenAI-compatible server: vLLM, Ollama, llama.cpp, the
tests' local one) Chat Completions, unless ``--api responses``. ``--store`` picks the
store (an SQLite file by default), ``--yes`` approves the refund without asking.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from agents import (
    Agent,
    Model,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from savegame import END, RunStatus, StepContext, Workflow, approve, reject, resume, run
from savegame.client import get_checkpoint, get_run
from savegame.errors import NotFoundError
from savegame.integrations.openai_agents import request_id, run_agent

REFUNDS: dict[str, tuple[float, str]] = {}
"""The payment system (here, a dict): refunds by order, with the request id each was
sent under (a real one deduplicates on it)."""

ORDERS = {"A-1": {"id": "A-1", "item": "headphones", "total": 120.0, "status": "delivered"}}


@function_tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up by its id."""
    return ORDERS.get(order_id, {"id": order_id, "status": "unknown"})


@function_tool(needs_approval=True)
def refund(order_id: str, amount: float) -> str:
    """Refund an order, in full or in part."""
    REFUNDS[order_id] = (amount, request_id())
    return f"refunded {amount} on {order_id}"


def model(api: str) -> Model:
    url = os.environ.get("SAVEGAME_MODEL_URL")
    client = AsyncOpenAI(base_url=url, api_key=os.environ.get("OPENAI_API_KEY", "local"))
    name = os.environ.get("SAVEGAME_MODEL", "gpt-4o")
    if api == "chat":
        return OpenAIChatCompletionsModel(name, openai_client=client)
    return OpenAIResponsesModel(name, openai_client=client)


def support(api: str) -> Workflow:
    agent: Agent[Any] = Agent(
        name="support",
        instructions=(
            "You are a shop's support agent. Look an order up before you answer about it; "
            "refund a delivered order when the customer asks. Be brief."
        ),
        model=model(api),
        tools=[lookup_order, refund],
    )
    flow = Workflow("shop-support")

    @flow.step(entry=True)
    async def answer(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        done = await run_agent(ctx, agent, state["query"])
        return {"answer": done.final_output, "requests": done.usage["requests"]}, END

    return flow


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("query")
    parser.add_argument("--store", default="sqlite:///shop_support.db")
    parser.add_argument("--run-id", default="shop-support-1")
    parser.add_argument("--api", choices=["responses", "chat"], default=None)
    parser.add_argument("--yes", action="store_true", help="approve a refund without asking")
    args = parser.parse_args(argv)
    api = args.api or ("chat" if os.environ.get("SAVEGAME_MODEL_URL") else "responses")
    # The SDK would send its traces to OpenAI; savegame's journal is the record here.
    set_tracing_disabled(True)
    flow = support(api)

    try:
        status = get_run(args.run_id, store=args.store).status
    except NotFoundError:
        result = run(flow, {"query": args.query}, run_id=args.run_id, store=args.store)
    else:
        if status in (RunStatus.COMPLETED, RunStatus.FAILED):
            state = get_checkpoint(args.run_id, store=args.store).state
            print(f"run {args.run_id} is {status.value}: {state.get('answer')}")
            return dict(state)
        # Started before (and killed, or waiting for a person): on from its journal.
        print(f"run {args.run_id} is {status.value}: going on from its journal")
        result = resume(args.run_id, store=args.store, workflow=flow)
    while result.status is RunStatus.INTERRUPTED:
        ok = args.yes or input("The agent wants to refund the order. Approve? [y/N] ") == "y"
        if ok:
            decision = approve(args.run_id, store=args.store, workflow=flow, by="cli")
        else:
            decision = reject(args.run_id, reason="declined", store=args.store, workflow=flow)
        if decision.result is None:
            raise SystemExit(f"the run stopped: {decision.error}")
        result = decision.result
    print(f"{result.status.value}: {result.state.get('answer')}")
    print(f"refunds: {REFUNDS}")
    return dict(result.state)


if __name__ == "__main__":
    main()
