"""An order-refund assistant: the agent ``savegame demo`` pauses, kills and resumes.

The model is scripted (no network, same answers every time) but the loop is
the real one: each model turn and each tool round is a step, the message
history grows in the state, and the tools return the kind of records a
support back office would. Two tools change the world: ``issue_refund``
(idempotent on its request id, approval above ``LIMIT``, undone by
``cancel_refund``) and ``send_confirmation_email`` (not idempotent, but the
mail server can be asked whether a message went out). They act on the demo's
:class:`~savegame.demo.world.World` file, the stand-in for a payment provider
and a mail server. ``agent`` is importable as ``savegame.demo.refund:agent``,
which is how a fresh process finds it again from the reference stored with the run.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from savegame.agent import Agent, ScriptedModel
from savegame.demo.world import World
from savegame.effects import tool
from savegame.errors import ConfigurationError

#: Refunds above this need a person's approval before they are issued.
LIMIT = Decimal("100.00")

#: Called as ``after_effect(tool, request_id)`` once a write tool has acted on the
#: outside world but before savegame has recorded its result: the demo kills there.
after_effect: Callable[[str, str], None] | None = None

_world: World | None = None


def use_world(path: str | None) -> None:
    """Point the tools at the outside-world file at ``path`` (None: none)."""
    global _world
    _world = None if path is None else World(path)


def world() -> World:
    if _world is None:
        raise ConfigurationError("the demo's outside world is not set: call use_world(path)")
    return _world


QUESTION = (
    "Hi, I'm Dana Whitfield (customer C-2291). Order A-10423 arrived yesterday and the "
    "headphones have a cracked left ear cup. Can I get a refund?"
)

_ORDERS: dict[str, dict[str, Any]] = {
    "A-10423": {
        "order_id": "A-10423",
        "customer_id": "C-2291",
        "placed_on": "2024-11-02",
        "delivered_on": "2024-11-06",
        "status": "delivered",
        "payment": {"method": "visa", "last4": "4417"},
        "items": [
            {
                "sku": "SKU-HP-220",
                "name": "Aurora ANC headphones",
                "qty": 1,
                "unit_price": "149.00",
            },
            {"sku": "SKU-CB-010", "name": "USB-C cable (1 m)", "qty": 2, "unit_price": "9.50"},
        ],
        "shipping": {"carrier": "UPS", "tracking": "1Z999AA10123456784", "cost": "0.00"},
        "total": "168.00",
    }
}

_POLICIES: dict[str, dict[str, Any]] = {
    "electronics": {
        "category": "electronics",
        "window_days": 30,
        "damaged_on_arrival": {
            "refund": "full",
            "restocking_fee_pct": 0,
            "return_label": "prepaid",
        },
        "change_of_mind": {"refund": "full", "restocking_fee_pct": 15, "return_label": "customer"},
        "evidence_required": ["photo of damage"],
        "auto_approve_limit": "100.00",
    }
}

_CUSTOMERS: dict[str, dict[str, Any]] = {
    "C-2291": {
        "customer_id": "C-2291",
        "name": "Dana Whitfield",
        "email": "dana.whitfield@example.com",
        "since": "2019-04-17",
        "tier": "gold",
        "orders_last_12m": 14,
        "refunds_last_12m": 1,
        "open_tickets": 0,
        "fraud_flags": [],
    }
}


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order by id: items, prices, payment, delivery."""
    order = _ORDERS.get(order_id)
    return dict(order) if order else {"error": f"no order {order_id}"}


def get_refund_policy(category: str) -> dict[str, Any]:
    """The refund policy for a product category."""
    policy = _POLICIES.get(category)
    return dict(policy) if policy else {"error": f"no policy for {category}"}


def check_customer_history(customer_id: str) -> dict[str, Any]:
    """A customer's tenure, order and refund counts, and any fraud flags."""
    customer = _CUSTOMERS.get(customer_id)
    return dict(customer) if customer else {"error": f"no customer {customer_id}"}


def calculate_refund(order_id: str, sku: str, reason: str) -> dict[str, Any]:
    """Compute the refund for one line of an order under the category policy."""
    order = _ORDERS[order_id]
    line = next(item for item in order["items"] if item["sku"] == sku)
    terms = _POLICIES["electronics"][reason]
    amount = Decimal(line["unit_price"]) * line["qty"]
    fee = (amount * terms["restocking_fee_pct"] / 100).quantize(Decimal("0.01"))
    # Money stays a Decimal in the state: savegame stores it exactly, as a tagged value.
    return {
        "order_id": order_id,
        "sku": sku,
        "reason": reason,
        "refund_amount": amount - fee,
        "restocking_fee": fee,
        "to": f"{order['payment']['method']} ending {order['payment']['last4']}",
        "return_label": terms["return_label"],
        "auto_approved": amount - fee <= Decimal(_POLICIES["electronics"]["auto_approve_limit"]),
    }


def _over_limit(arguments: dict[str, Any]) -> bool:
    return Decimal(str(arguments["amount"])) > LIMIT


def _acted(name: str, request_id: str) -> None:
    if after_effect is not None:
        after_effect(name, request_id)


@tool(effect="write", idempotent=True, compensate="cancel_refund", approval=_over_limit)
def issue_refund(order_id: str, amount: str, to: str, *, request_id: str) -> dict[str, Any]:
    """Refund an amount to the order's payment method (a person approves refunds over the limit)."""
    receipt = world().refund(request_id, order_id, Decimal(amount), to)
    _acted("issue_refund", request_id)
    return receipt


@tool(effect="write", idempotent=True)
def cancel_refund(order_id: str, *, result: dict[str, Any], request_id: str) -> dict[str, Any]:
    """Undo ``issue_refund`` (its compensation)."""
    return world().cancel_refund(result["refund_id"])


def _find_email(request_id: str) -> dict[str, Any] | None:
    return world().find_email(request_id)


@tool(effect="write", reconcile=_find_email)
def send_confirmation_email(to: str, subject: str, body: str, *, request_id: str) -> dict[str, Any]:
    """Email the customer; the request id goes out as the message's id."""
    sent = world().send_email(request_id, to, subject)
    _acted("send_confirmation_email", request_id)
    return sent


SCRIPT: list[Any] = [
    {
        "content": "Let me pull up that order.",
        "tool_calls": [
            {"id": "call_order", "name": "lookup_order", "arguments": {"order_id": "A-10423"}}
        ],
    },
    {
        "content": "The headphones are an electronics item; checking the policy and the account.",
        "tool_calls": [
            {
                "id": "call_policy",
                "name": "get_refund_policy",
                "arguments": {"category": "electronics"},
            },
            {
                "id": "call_history",
                "name": "check_customer_history",
                "arguments": {"customer_id": "C-2291"},
            },
        ],
    },
    {
        "content": "Damaged on arrival, inside the 30-day window, good standing. Computing the refund.",
        "tool_calls": [
            {
                "id": "call_refund",
                "name": "calculate_refund",
                "arguments": {
                    "order_id": "A-10423",
                    "sku": "SKU-HP-220",
                    "reason": "damaged_on_arrival",
                },
            }
        ],
    },
    {
        "content": "$149.00 is over the $100.00 auto-approve limit, so a supervisor approves it first.",
        "tool_calls": [
            {
                "id": "call_issue",
                "name": "issue_refund",
                "arguments": {"order_id": "A-10423", "amount": "149.00", "to": "visa ending 4417"},
            }
        ],
    },
    {
        "content": "Refund issued. Sending Dana the confirmation.",
        "tool_calls": [
            {
                "id": "call_email",
                "name": "send_confirmation_email",
                "arguments": {
                    "to": "dana.whitfield@example.com",
                    "subject": "Your refund for order A-10423",
                    "body": "We refunded $149.00 to your Visa ending 4417. A prepaid UPS "
                    "return label for the headphones is attached.",
                },
            }
        ],
    },
    (
        "I'm sorry the Aurora ANC headphones arrived damaged, Dana. They were damaged on arrival "
        "and you are within the 30-day window, so you get a full refund of $149.00 with no "
        "restocking fee, back to your Visa ending 4417; a supervisor approved it and it has been "
        "issued. The confirmation and a prepaid UPS return label are in your inbox. The USB-C "
        "cables from the same order are not affected."
    ),
]

agent = Agent(
    "refund-assistant",
    ScriptedModel(SCRIPT, cost_per_token=0.000002),
    [
        lookup_order,
        get_refund_policy,
        check_customer_history,
        calculate_refund,
        issue_refund,
        send_confirmation_email,
    ],
    system="You are a support agent for an electronics shop. Follow the refund policy exactly.",
)
