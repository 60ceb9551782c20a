"""Which savegame step an ADK run belongs to: the step's context and the order its tool
calls take, held in a context variable for the run's duration.

An ADK run started inside ``durable(ctx)`` (or by :func:`run_agent`) is inside
savegame's durable container: its model requests and tool calls are journaled calls of
that step. Outside one, :class:`SavegamePlugin` does nothing, as DBOS's plugin does
outside a workflow.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from savegame.effects import Calls
from savegame.errors import ConfigurationError
from savegame.integrations._calling import RunningCall
from savegame.runtime import StepContext


class Turnstile:
    """Lets the tool calls of one model answer in, one at a time, in the model's order.

    ADK runs a model answer's function calls as concurrent tasks, which reach the plugin
    in whatever order the loop schedules them. A journal numbers its calls by position,
    and a resumed step must find each call where the first execution put it: so a call
    waits for the ones the model listed before it, and runs whole (its write's intent,
    the tool, its result) before the next starts. A call the model did not list goes
    straight in; an AgentTool's agent runs in an invocation, and a turnstile, of its own.
    """

    def __init__(self) -> None:
        self._order: list[str] = []
        self._changed = asyncio.Condition()

    def expect(self, call_ids: list[str]) -> None:
        """The function calls of the model answer just handed to ADK, in its order."""
        self._order = list(call_ids)

    async def enter(self, call_id: str | None) -> bool:
        """Wait for ``call_id``'s turn; False when it has none (not a listed call)."""
        if call_id is None or call_id not in self._order:
            return False
        async with self._changed:
            await self._changed.wait_for(lambda: self._order[:1] == [call_id])
        return True

    async def leave(self, call_id: str | None) -> None:
        async with self._changed:
            if call_id in self._order:
                self._order.remove(call_id)
            self._changed.notify_all()


@dataclass
class Scope:
    """A step's context and what its ADK run needs beside it."""

    ctx: StepContext
    calls: Calls
    _turnstiles: dict[str, Turnstile] = field(default_factory=dict)

    def turnstile(self, invocation_id: str) -> Turnstile:
        """The turnstile of one ADK invocation (an AgentTool's agent runs in its own)."""
        return self._turnstiles.setdefault(invocation_id, Turnstile())


class Carried(BaseException):
    """An error raised inside one of the plugin's callbacks, on its way out of ADK.

    ADK's plugin manager catches every ``Exception`` a plugin raises, logs it with its
    traceback and raises a RuntimeError in its place: a rejected approval, a path that is
    not pure data, a model's own error would all reach the step as one type, logged as
    a plugin failure. Carried past it as a BaseException (as savegame's pauses are),
    :func:`durable` raises the error itself again.
    """

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


@contextmanager
def carried() -> Iterator[None]:
    """Carry what the block raises past ADK's plugin manager (:class:`Carried`)."""
    try:
        yield
    except Exception as exc:
        raise Carried(exc) from None


_running: set[int] = set()
"""The journals (``id(ctx.calls)``) an ADK run is going on in."""
_scope: ContextVar[Scope | None] = ContextVar("savegame_adk_scope", default=None)
_call = RunningCall(
    "savegame_adk_request",
    "in a tool of an ADK agent whose Runner has SavegamePlugin, run inside durable(ctx) or run_agent",
)


@contextmanager
def durable(ctx: StepContext) -> Iterator[StepContext]:
    """Make the ADK runs started in this block journaled calls of ``ctx``'s step."""
    if ctx.calls is None:
        raise ConfigurationError(
            "durable(ctx): this context has no journal (it is not a running step's)"
        )
    if id(ctx.calls) in _running:
        # Two turns of one step at once (asyncio.gather) would take the journal's
        # positions in whatever order their calls happened to come.
        raise ConfigurationError(
            f"run {ctx.run_id}, step {ctx.node!r}: an ADK run is already going on in this "
            "step; run its turns one after another (or in steps of their own)"
        )
    _running.add(id(ctx.calls))
    token = _scope.set(Scope(ctx, ctx.calls))
    try:
        yield ctx
    except Carried as carried:
        raise carried.error from carried.error.__cause__
    finally:
        _scope.reset(token)
        _running.discard(id(ctx.calls))


def current() -> Scope | None:
    """The step the running ADK run belongs to, or None outside ``durable``."""
    return _scope.get()


calling = _call.calling


def request_id() -> str:
    """The request id of the tool call running now: stable across crashes and resumes,
    for the outside system to deduplicate a write on (what ``request_id`` is to a
    ``savegame.tool``).

    Raises:
        ConfigurationError: not inside a journaled tool call.
    """
    return _call.request_id()
