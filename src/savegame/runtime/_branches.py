"""Parallel branches inside a step: ``ctx.gather`` and ``ctx.map``.

A branch is a function of a context, ``async def branch(ctx)``, run concurrently with
the others on the step's event loop. Each gets a context of its own whose calls are
numbered within the branch: request ids ``<the step's call at the gather>:b<branch>:<n>``,
so they are the same whatever order the branches run or finish in and however many calls
each makes. (Coroutines of ``ctx.acall`` gathered directly would be numbered in the order
their threads reached the journal.) Every call is journaled as in a step of its own: a
write's intent before it, its result after, a model's response at once; a crash mid-way
re-executes the step, its finished calls replayed, only the unfinished ones called again.

All branches run to their end even when one raises (no call is left half done behind the
step's back); then the first error, in branch order, is raised. A fork reuses each
branch's calls from its origin while that branch makes the same calls
(:mod:`savegame.effects._replay`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from savegame.effects import Calls
from savegame.errors import ConfigurationError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Raised:
    error: BaseException


def branch_calls(calls: Calls, base: str, k: int) -> Calls:
    """The calls of branch ``k`` of the gather at request id ``base``: their own numbering;
    in a fork, each compared with the origin's call at the same place in the same branch."""
    prefix = f"{base}:b{k}"
    return Calls(
        calls.journal,
        run_id=calls.run_id,
        step=calls.step,
        node=calls.node,
        cancelled=calls._cancelled,
        replay=calls.replay,
        request_ids=lambda n: f"{prefix}:{n}",
    )


async def run_branches(
    contexts: Sequence[T],
    branches: Sequence[Callable[[T], Awaitable[Any]]],
    concurrency: int | None,
) -> list[Any]:
    """Each branch on its context, at most ``concurrency`` at once; results in order."""
    if concurrency is not None and (not isinstance(concurrency, int) or concurrency < 1):
        raise ConfigurationError(f"concurrency must be a whole number >= 1, not {concurrency!r}")
    gate = asyncio.Semaphore(concurrency) if concurrency is not None else None

    async def one(k: int) -> Any:
        try:
            if gate is None:
                return await branches[k](contexts[k])
            async with gate:
                return await branches[k](contexts[k])
        except BaseException as exc:  # kept until every branch has ended, then raised
            return _Raised(exc)

    outcomes = await asyncio.gather(*(one(k) for k in range(len(branches))))
    for outcome in outcomes:
        if isinstance(outcome, _Raised):
            raise outcome.error
    return list(outcomes)


def as_branches(
    fn: Callable[[Any, Any], Awaitable[Any]], items: Iterable[Any]
) -> list[Callable[[Any], Awaitable[Any]]]:
    """``fn(ctx, item)`` for each item, as branches."""
    return [partial(_with, fn, item) for item in items]


def _with(fn: Callable[[Any, Any], Awaitable[Any]], item: Any, ctx: Any) -> Awaitable[Any]:
    return fn(ctx, item)
