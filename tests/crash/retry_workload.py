"""Two workflows that retry, for the kill -9 in the middle of a wait.

The outside world is files in ``$RETRY_WORLD``: ``ledger.txt`` (a write that must
happen once), ``attempts.txt`` (every execution of the failing call or step).

``SAVEGAME_HOOK=backoff`` makes the process print ``HOOK backoff`` and block on stdin
when a wait between attempts begins (stamina's retry hook: the failed attempt is
journaled, the sleep not begun), so the parent's SIGKILL lands in the wait.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from stamina.instrumentation import RetryDetails, set_on_retry_hooks

from savegame import END, Backoff, StepContext, Workflow, tool

WAITS = Backoff(initial=0.001, maximum=0.001, jitter=0)


def in_the_wait(details: RetryDetails) -> None:
    if os.environ.get("SAVEGAME_HOOK") == "backoff":
        sys.stdout.write("HOOK backoff\n")
        sys.stdout.flush()
        sys.stdin.readline()


set_on_retry_hooks([in_the_wait])


def world(name: str) -> Path:
    return Path(os.environ["RETRY_WORLD"]) / name


def note(name: str, line: str) -> int:
    with world(name).open("a") as fh:
        fh.write(line + "\n")
    return len(world(name).read_text().splitlines())


@tool(effect="write", name="reserve")  # not idempotent: a second call reserves twice
def reserve(item: str) -> str:
    note("ledger.txt", f"reserve {item}")
    return f"reservation-{item}"


@tool(retries=2, backoff=WAITS, name="quote")
def quote(item: str) -> float:
    n = note("attempts.txt", "quote")
    raise ConnectionError(f"quote service down (attempt {n})")


tools = Workflow("retry-tools")


@tools.step(entry=True)
def buy(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    reservation = ctx.call(reserve, "book")
    return {"reservation": reservation, "price": ctx.call(quote, "book")}, END


steps = Workflow("retry-steps")


@steps.step(entry=True, retries=2, backoff=WAITS)
def ship(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    reservation = ctx.call(reserve, "lamp")
    n = note("attempts.txt", "ship")
    raise ConnectionError(f"courier down (execution {n}, {reservation})")
