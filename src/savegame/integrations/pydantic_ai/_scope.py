"""Which savegame step a pydantic-ai run belongs to: the step's context, held in a
context variable for the run's duration.

A pydantic-ai run inside ``durable(ctx)`` (or :func:`run_agent`) is inside savegame's
durable container: its model requests and tool calls are journaled calls of that step.
Outside one the capability is transparent, as pydantic-ai's engines are outside their
workflows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from savegame.effects import Calls
from savegame.errors import ConfigurationError
from savegame.integrations._calling import RunningCall
from savegame.runtime import StepContext

_step: ContextVar[StepContext | None] = ContextVar("savegame_pydantic_ai_step", default=None)
_call = RunningCall(
    "savegame_pydantic_ai_request",
    "in a tool of an agent with SavegameDurability, run inside durable(ctx)",
)


@contextmanager
def durable(ctx: StepContext) -> Iterator[StepContext]:
    """Make the pydantic-ai runs started in this block journaled calls of ``ctx``'s step."""
    if ctx.calls is None:
        raise ConfigurationError(
            "durable(ctx): this context has no journal (it is not a running step's)"
        )
    token = _step.set(ctx)
    try:
        yield ctx
    finally:
        _step.reset(token)


def current() -> StepContext | None:
    """The step the running pydantic-ai run belongs to, or None outside ``durable``."""
    return _step.get()


def calls_of(ctx: StepContext) -> Calls:
    if ctx.calls is None:  # checked by durable(); a context's journal does not go away
        raise ConfigurationError("the step's context has no journal")
    return ctx.calls


calling = _call.calling


def request_id() -> str:
    """The request id of the tool call running now: stable across crashes and resumes,
    for the outside system to deduplicate a write on (what ``request_id`` is to a
    ``savegame.tool``).

    Raises:
        ConfigurationError: not inside a journaled tool call.
    """
    return _call.request_id()
