"""One tool call's attempts: call the tool within its timeout, record the outcome, and
try again while that is safe.

``Calls.before`` has already decided the call must be made (no recorded result); here
it is made, once or, for a tool with ``retries``, until it succeeds, the budget runs
out (the last error is raised), or a failure stops it. Whether another attempt is safe
is the journal's rule, not the schedule's (``Calls.failed``): a read may always be
called again; a write only once its failure is settled not-done (idempotent, one of
its ``safe_errors``, or ``reconcile`` says it did not happen). Any other write that
raised is in doubt: the run stops for a person on that first error, never a blind retry.

Each failed attempt of a tool with retries is journaled at once, with its error, as
``<request id>:attempt:<n>``; a run killed while it waits for the next attempt goes on
counting from there when it resumes.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import replace
from typing import Any

from savegame.codec import encode_value
from savegame.effects._calls import Calls, PreparedCall
from savegame.effects._retry import Expired, aattempts, attempts, in_thread, retry_wait, within
from savegame.effects._tools import Tool
from savegame.errors import TimedOutError, describe
from savegame.model import EffectRecord, EffectStatus

_SETTLE_KEYS = frozenset({"raised", "reconciled", "resolved", "by", "at"})
"""Metadata an outcome adds to an entry, dropped from the intent of another attempt."""


def attempts_made(calls: Calls, request_id: str) -> tuple[int, int]:
    """(attempts journaled for the call at ``request_id``, how many of them count against
    its current budget): after a crash mid-backoff the budget goes on; once one ran out
    (the run failed), a new execution of the step gets a fresh one."""
    made = 0
    while calls.journal.get(f"{request_id}:attempt:{made + 1}") is not None:
        made += 1
    last = calls.journal.get(f"{request_id}:attempt:{made}") if made else None
    if last is None:
        return 0, 0
    number, of = last.metadata.get("attempt"), last.metadata.get("of")
    if not (isinstance(number, int) and isinstance(of, int)) or number >= of:
        return made, 0
    return made, number


def record_attempt(
    calls: Calls, prepared: PreparedCall, error: BaseException, number: int, of: int, made: int
) -> None:
    """Journal attempt ``number`` (of ``of``) of a call, which raised ``error``; committed at
    once, so a run killed while it waits to try again goes on counting."""
    entry = EffectRecord(
        run_id=calls.run_id,
        request_id=f"{prepared.request_id}:attempt:{made}",
        kind=prepared.kind,
        name=prepared.name,
        step=calls.step,
        node=calls.node,
        call_index=prepared.index,
        status=EffectStatus.FAILED,
        arguments=encode_value(prepared.arguments, "arguments"),
        error=describe(error),
        metadata={"attempt": number, "of": of},
    )
    calls.journal.intent(entry)


def again(calls: Calls, prepared: PreparedCall) -> PreparedCall:
    """Prepare another attempt of a call: a write settled not-done gets its intent committed
    again (same request id) before it is called; a read needs nothing."""
    entry = prepared.entry
    if entry is None:
        return prepared
    current = calls.journal.get(entry.request_id) or entry
    if current.status is not EffectStatus.NOT_DONE:
        return replace(prepared, entry=current)
    fresh = replace(
        current, status=EffectStatus.PENDING, result=None, error=None,
        completed_at=None, checksum="",
        metadata={k: v for k, v in current.metadata.items() if k not in _SETTLE_KEYS},
    )  # fmt: skip
    return replace(prepared, entry=calls.journal.intent(fresh))


class _Budget:
    """The attempts of one call in this execution, counted on from the journal's."""

    def __init__(self, calls: Calls, tool: Tool, prepared: PreparedCall) -> None:
        self.calls = calls
        self.tool = tool
        self.prepared = prepared
        self.made, self.done = attempts_made(calls, prepared.request_id)
        self.number = self.done

    def may_retry(self, error: Exception) -> bool | float:
        return retry_wait(error, self.tool.retry_on)

    def begin(self) -> PreparedCall:
        self.number += 1
        self.made += 1
        self.prepared = again(self.calls, self.prepared)
        return self.prepared

    def failed(self, error: Exception) -> None:
        """Journal this attempt's error (the call's own entry is settled first)."""
        if self.tool.retries:
            of = self.tool.retries + 1
            record_attempt(self.calls, self.prepared, error, self.number, of, self.made)


def invoke(calls: Calls, tool: Tool, prepared: PreparedCall) -> Any:
    """Make the call ``prepared`` (sync): one attempt, or as many as ``tool.retries`` allow.

    Raises:
        Exception: what the last attempt raised.
        NeedsAttention: a write that raised is in doubt.
    """
    budget = _Budget(calls, tool, prepared)
    if not tool.retries:
        return _attempt(budget)
    for attempt in attempts(tool.retries, tool.backoff, budget.done, budget.may_retry):
        with attempt:
            return _attempt(budget)
    raise AssertionError("unreachable: stamina raises the last attempt's error")


def _attempt(budget: _Budget) -> Any:
    calls, tool = budget.calls, budget.tool
    prepared = budget.begin()
    try:
        result = _call(calls, tool, prepared)
    except Exception as exc:
        happened = calls.failed(prepared, exc)
        if happened is not None:
            return happened.result
        budget.failed(exc)
        raise
    return calls.after(prepared, result)


def _call(calls: Calls, tool: Tool, prepared: PreparedCall) -> Any:
    if tool.timeout is None:
        return tool.invoke(prepared.arguments, prepared.request_id)
    try:
        return in_thread(
            lambda: tool.invoke(prepared.arguments, prepared.request_id), tool.timeout, tool.name
        )
    except Expired:
        raise TimedOutError(
            calls.run_id, calls.node, tool.timeout, tool=tool.name, abandoned=True
        ) from None


async def ainvoke(calls: Calls, tool: Tool, prepared: PreparedCall) -> Any:
    """Async twin of :func:`invoke`; journal writes run in a worker thread."""
    budget = _Budget(calls, tool, prepared)
    if not tool.retries:
        return await _aattempt(budget)
    async for attempt in aattempts(tool.retries, tool.backoff, budget.done, budget.may_retry):
        with attempt:
            return await _aattempt(budget)
    raise AssertionError("unreachable: stamina raises the last attempt's error")


async def _aattempt(budget: _Budget) -> Any:
    calls, tool = budget.calls, budget.tool
    prepared = await asyncio.to_thread(budget.begin)
    try:
        result = await _acall(calls, tool, prepared)
    except Exception as exc:
        happened = await asyncio.to_thread(calls.failed, prepared, exc)
        if happened is not None:
            return happened.result
        await asyncio.to_thread(budget.failed, exc)
        raise
    return await asyncio.to_thread(calls.after, prepared, result)


async def _acall(calls: Calls, tool: Tool, prepared: PreparedCall) -> Any:
    if tool.timeout is not None and not tool.is_async:
        # A sync tool blocks whatever thread it runs on: its own, so the loop goes on.
        return await asyncio.to_thread(_call, calls, tool, prepared)
    result = tool.invoke(prepared.arguments, prepared.request_id)
    if not inspect.isawaitable(result):
        return result
    if tool.timeout is None:
        return await result
    try:
        return await within(result, tool.timeout)
    except Expired:
        raise TimedOutError(calls.run_id, calls.node, tool.timeout, tool=tool.name) from None
