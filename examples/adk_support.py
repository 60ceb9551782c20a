"""A Google ADK support agent with a gated refund, made durable by savegame.

The agent is ADK's own: an ``LlmAgent`` on Gemini with two tools, ``lookup_order`` (a
read) and ``refund`` (a write: it pays money back). Two things are added: the
``SavegamePlugin`` on its Runner, which makes each model request and each tool call a
journaled call of a savegame step, and ADK's own ``require_confirmation`` on the
refund, which savegame turns into an approval a person decides (here at the prompt,
or with ``savegame approve`` / the UI inbox from anywhere, even after a restart).

Kill the process at any point and run the same command again: the run goes on from
its journal, nothing the model answered is asked again and no refund is paid twice.

    GOOGLE_API_KEY=... python examples/adk_support.py "Order A-1 arrived broken, refund it."
    SAVEGAME_MODEL_URL=http://127.0.0.1:8000 python examples/adk_support.py "..."

``SAVEGAME_MODEL_URL`` points the Gemini client at another server that speaks the Gemini
API (the tests' local one); ``--store`` picks the store (an SQLite file by default),
``--yes`` approves the refund without asking.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models import Gemini
from google.adk.runners import InMemoryRunner
from google.adk.tools import FunctionTool

from savegame import END, RunStatus, StepContext, Workflow, approve, reject, resume, run
from savegame.client import get_checkpoint, get_run
from savegame.errors import NotFoundError
from savegame.integrations.adk import SavegamePlugin, request_id, run_agent

ORDERS = {"A-1": {"total": 120.0, "status": "delivered"}}
REFUNDS: dict[str, tuple[float, str]] = {}
"""The payment system (here, a dict): refunds by order, with the request id the refund
was sent under, which a real one deduplicates on."""


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up: its total and status."""
    return {"order_id": order_id, **ORDERS.get(order_id, {"status": "unknown"})}


def refund(order_id: str, amount: float) -> str:
    """Refund an amount of an order to the customer."""
    REFUNDS[order_id] = (amount, request_id())  # the same id across crashes
    return f"refunded {amount} on {order_id}"


model = Gemini(
    model=os.environ.get("SAVEGAME_MODEL", "gemini-2.5-flash"),
    base_url=os.environ.get("SAVEGAME_MODEL_URL"),
    client_kwargs={"api_key": os.environ.get("GOOGLE_API_KEY", "local")},
)
agent = LlmAgent(
    name="support",
    model=model,
    instruction="You are a shop's support agent. Look the order up before a refund. Be brief.",
    tools=[lookup_order, FunctionTool(refund, require_confirmation=True)],
)
runner = InMemoryRunner(app=App(name="support", root_agent=agent, plugins=[SavegamePlugin()]))

support = Workflow("adk-support")


@support.step(entry=True)
async def answer(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    turn = await run_agent(ctx, runner, state["message"], session=state.get("session"))
    return {"answer": turn.text, "session": turn.session}, END


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("message")
    parser.add_argument("--store", default="sqlite:///adk_support.db")
    parser.add_argument("--run-id", default="adk-support-1")
    parser.add_argument("--yes", action="store_true", help="approve a refund without asking")
    args = parser.parse_args(argv)

    try:
        status = get_run(args.run_id, store=args.store).status
    except NotFoundError:
        result = run(support, {"message": args.message}, run_id=args.run_id, store=args.store)
    else:
        if status in (RunStatus.COMPLETED, RunStatus.FAILED):
            state = get_checkpoint(args.run_id, store=args.store).state
            print(f"run {args.run_id} is {status.value}: {state.get('answer')}")
            return dict(state)
        # Started before (and killed, or waiting for a person): on from its journal.
        print(f"run {args.run_id} is {status.value}: going on from its journal")
        result = resume(args.run_id, store=args.store, workflow=support)
    while result.status is RunStatus.INTERRUPTED:
        ok = args.yes or input("The agent wants to pay a refund. Approve? [y/N] ") == "y"
        if ok:
            decision = approve(args.run_id, store=args.store, workflow=support, by="cli")
        else:
            decision = reject(args.run_id, reason="declined", store=args.store, workflow=support)
        if decision.result is None:
            raise SystemExit(f"the run stopped: {decision.error}")
        result = decision.result
    print(f"{result.status.value}: {result.state.get('answer')}")
    print(f"refunds: {REFUNDS}")
    return dict(result.state)


if __name__ == "__main__":
    main()
