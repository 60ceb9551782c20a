"""A support agent that looks orders up and refunds them, a person approving each refund.

    python examples/support_agent.py ask "Order A-1 arrived broken, I want my money back"
    python examples/support_agent.py approve RUN      # the refund is made, once
    python examples/support_agent.py reject RUN --reason "over the limit"
    savegame replay run.sgrun --against examples/support_agent.py:agent   # after a change

``ask`` runs until the model wants to refund: the run is checkpointed as waiting and
the process ends; nothing waits in memory. ``approve`` records who approved which
call (bound to those arguments), continues the run, makes the refund and lets the
model answer. The refund is a journaled write with a request id: written to the
ledger (``$SUPPORT_LEDGER``, a JSON-lines file standing in for a payment API) exactly once,
whatever crashes or retries happen between the approval and the answer.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from _common import model, parser, report

from savegame import Agent, approve, reject, run, tool
from savegame.effects import ChatModel

ORDERS = {
    "A-1": {"id": "A-1", "item": "kettle", "total": 120, "status": "delivered"},
    "A-2": {"id": "A-2", "item": "toaster", "total": 45, "status": "in transit"},
}


def ledger() -> Path:
    """The refunds made: ``$SUPPORT_LEDGER``, or refunds.jsonl in the working directory."""
    return Path(os.environ.get("SUPPORT_LEDGER", "refunds.jsonl"))


SYSTEM = (
    "You are a support agent for a small shop. Look the order up before anything else. "
    "Refund only delivered orders, at most their total. Be brief."
)


@tool(effect="read")
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up by its id (like A-1)."""
    return ORDERS.get(order_id) or {"error": f"no order {order_id}"}


@tool(effect="write", idempotent=True, approval=True)
def issue_refund(order_id: str, amount: int, *, request_id: str) -> dict[str, Any]:
    """Refund an amount of an order to the customer."""
    # Idempotent by request id, as a payment API is: asked again with the same id (a
    # retry after a crash), it answers with the refund it already made.
    if ledger().exists():
        for line in ledger().read_text().splitlines():
            made = json.loads(line)
            if made["request_id"] == request_id:
                return made
    made = {"request_id": request_id, "order_id": order_id, "amount": amount}
    with ledger().open("a") as out:
        out.write(json.dumps(made) + "\n")
    return made


def support(chat: ChatModel) -> Agent:
    return Agent("support", chat, [lookup_order, issue_refund], system=SYSTEM)


#: The agent with the model the environment names, as `savegame replay --against
#: examples/support_agent.py:agent` loads it: a replay never calls the model.
agent = support(model(parser("").parse_args([])))


def main(argv: list[str]) -> int:
    parse = parser("A support agent with an approval-gated refund.")
    commands = parse.add_subparsers(dest="command", required=True)
    ask = commands.add_parser("ask", help="ask the agent")
    ask.add_argument("message")
    ask.add_argument("--thread", default=None, help="continue this conversation")
    decide = commands.add_parser("approve", help="approve the refund a run waits for")
    decide.add_argument("run_id")
    refuse = commands.add_parser("reject", help="refuse it; the model is told why")
    refuse.add_argument("run_id")
    refuse.add_argument("--reason", required=True)
    args = parse.parse_args(argv)

    agent = support(model(args))
    if args.command == "ask":
        result = run(agent, {"input": args.message}, thread_id=args.thread, store=args.store)
    else:
        if args.command == "approve":
            decision = approve(args.run_id, store=args.store, workflow=agent)
        else:
            decision = reject(args.run_id, reason=args.reason, store=args.store, workflow=agent)
        if decision.result is None:
            print(f"recorded, but the run did not continue here: {decision.error}")
            return 1
        result = decision.result
    report(result, args.store, "examples/support_agent.py")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
