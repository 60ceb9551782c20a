"""Which savegame step an Agents SDK run belongs to: the step's context, held in a
context variable for the run's duration, and the request id of the tool call running.

A run started by :class:`~savegame.integrations.openai_agents.SavegameRunner` (or
:func:`~savegame.integrations.openai_agents.run_agent`) sets it; the SDK's nested runs
(an agent called as a tool) happen inside the outer run's tool call, so they see it too.
Outside a step the integration is transparent.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from savegame.effects import Calls
from savegame.errors import ConfigurationError
from savegame.integrations._calling import RunningCall
from savegame.runtime import StepContext

_step: ContextVar[StepContext | None] = ContextVar("savegame_openai_agents_step", default=None)
_call = RunningCall(
    "savegame_openai_agents_request",
    "in a function tool of an agent run by savegame's runner, run_agent(ctx, ...)",
)
_nested: ContextVar[bool] = ContextVar("savegame_openai_agents_nested", default=False)


@contextmanager
def durable(ctx: StepContext) -> Iterator[StepContext]:
    """Make the Agents SDK runs started by savegame's runner in this block calls of
    ``ctx``'s step."""
    if ctx.calls is None:
        raise ConfigurationError(
            "openai-agents: this context has no journal (it is not a running step's)"
        )
    token = _step.set(ctx)
    try:
        yield ctx
    finally:
        _step.reset(token)


def current() -> StepContext | None:
    """The step the running Agents SDK run belongs to, or None outside one."""
    return _step.get()


def calls_of(ctx: StepContext) -> Calls:
    if ctx.calls is None:  # checked by durable(); a context's journal does not go away
        raise ConfigurationError("the step's context has no journal")
    return ctx.calls


calling = _call.calling


@contextmanager
def nested() -> Iterator[None]:
    """An agent called as a tool runs in this block: the SDK's ``Runner.run`` for it is
    made durable too (a guardrail's run, outside one, is left as the SDK runs it)."""
    token = _nested.set(True)
    try:
        yield
    finally:
        _nested.reset(token)


def in_agent_tool() -> bool:
    return _nested.get()


def request_id() -> str:
    """The request id of the tool call running now: stable across crashes and resumes,
    for the outside system to deduplicate a write on (what ``request_id`` is to a
    ``savegame.tool``).

    Raises:
        ConfigurationError: not inside a journaled tool call.
    """
    return _call.request_id()
