"""The demo's outside world: a payment provider and a mail server, in one small SQLite file.

It lives outside savegame's store on purpose: it is what a crash cannot roll
back. The provider deduplicates refunds on the caller's request id (as
Stripe's ``Idempotency-Key`` does); the mail server does not deduplicate but
can be asked whether a message with a given id went out. Every call that
arrives is counted, so the demo can show that a retried call was received twice
and carried out once.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS refunds (
    request_id TEXT PRIMARY KEY, refund_id TEXT NOT NULL UNIQUE, order_id TEXT NOT NULL,
    amount TEXT NOT NULL, destination TEXT NOT NULL, status TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS emails (
    request_id TEXT PRIMARY KEY, message_id TEXT NOT NULL UNIQUE, recipient TEXT NOT NULL,
    subject TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS calls (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, service TEXT NOT NULL, request_id TEXT NOT NULL,
    outcome TEXT NOT NULL
);
"""


@dataclass(frozen=True, slots=True)
class Summary:
    """What the outside world holds for one demo run."""

    refunds: list[dict[str, Any]]
    emails: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    """Every call received, in order: service, request id, outcome (done, deduplicated ...)."""


class World:
    """The payment provider and mail server of one demo run."""

    def __init__(self, path: str) -> None:
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=10)
        conn.row_factory = sqlite3.Row
        conn.executescript(_SCHEMA)
        return conn

    def _log(self, conn: sqlite3.Connection, service: str, request_id: str, outcome: str) -> None:
        conn.execute(
            "INSERT INTO calls (service, request_id, outcome) VALUES (?, ?, ?)",
            (service, request_id, outcome),
        )

    def refund(
        self, request_id: str, order_id: str, amount: Decimal, destination: str
    ) -> dict[str, Any]:
        """Refund once per request id; a repeated request gets the first refund back."""
        with closing(self._connect()) as conn, conn:
            conn.execute("BEGIN IMMEDIATE")
            row = _refund_for(conn, request_id)
            if row is None:
                (count,) = conn.execute("SELECT COUNT(*) FROM refunds").fetchone()
                refund_id = f"re_{count + 1:04d}"
                conn.execute(
                    "INSERT INTO refunds VALUES (?, ?, ?, ?, ?, 'issued')",
                    (request_id, refund_id, order_id, str(amount), destination),
                )
                self._log(conn, "payments", request_id, "refunded")
                row = _refund_for(conn, request_id)
            else:
                self._log(conn, "payments", request_id, "deduplicated")
            return _refund(row)

    def cancel_refund(self, refund_id: str) -> dict[str, Any]:
        with closing(self._connect()) as conn, conn:
            conn.execute(
                "UPDATE refunds SET status = 'cancelled' WHERE refund_id = ?", (refund_id,)
            )
            self._log(conn, "payments", refund_id, "cancelled")
            row = conn.execute("SELECT * FROM refunds WHERE refund_id = ?", (refund_id,)).fetchone()
            return _refund(row)

    def send_email(self, request_id: str, recipient: str, subject: str) -> dict[str, Any]:
        """Send a message; no deduplication (a mail server sends what it is given)."""
        with closing(self._connect()) as conn, conn:
            conn.execute("BEGIN IMMEDIATE")
            (count,) = conn.execute("SELECT COUNT(*) FROM emails").fetchone()
            message_id = f"msg_{count + 1:04d}"
            conn.execute(
                "INSERT INTO emails VALUES (?, ?, ?, ?)",
                (request_id, message_id, recipient, subject),
            )
            self._log(conn, "mail", request_id, "sent")
            return {"message_id": message_id, "to": recipient, "status": "sent"}

    def find_email(self, request_id: str) -> dict[str, Any] | None:
        """The message sent for ``request_id``, or None if none went out."""
        with closing(self._connect()) as conn:
            row = conn.execute(
                "SELECT * FROM emails WHERE request_id = ?", (request_id,)
            ).fetchone()
            if row is None:
                return None
            return {"message_id": row["message_id"], "to": row["recipient"], "status": "sent"}

    def summary(self) -> Summary:
        with closing(self._connect()) as conn:
            refunds = [dict(r) for r in conn.execute("SELECT * FROM refunds ORDER BY refund_id")]
            emails = [dict(r) for r in conn.execute("SELECT * FROM emails ORDER BY message_id")]
            calls = [dict(r) for r in conn.execute("SELECT * FROM calls ORDER BY seq")]
        return Summary(refunds, emails, calls)


def _refund_for(conn: sqlite3.Connection, request_id: str) -> Any:
    """The refund row issued for ``request_id``, or None."""
    return conn.execute("SELECT * FROM refunds WHERE request_id = ?", (request_id,)).fetchone()


def _refund(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "refund_id": row["refund_id"],
        "order_id": row["order_id"],
        "amount": Decimal(row["amount"]),
        "to": row["destination"],
        "status": row["status"],
    }
