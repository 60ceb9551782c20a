"""One async loop behind both the sync and the async API.

The step loop is a coroutine. ``run``/``resume`` drive it with :func:`run_sync`
and call the store inline (:func:`direct_io`); ``arun``/``aresume`` await it and
call the store in a worker thread (:func:`threaded_io`) so an event loop is never
blocked on disk or network.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
Io = Callable[..., Awaitable[Any]]
"""How the loop calls the store: ``await io(fn, *args, **kwargs)``."""


async def direct_io(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return fn(*args, **kwargs)


async def threaded_io(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await asyncio.to_thread(fn, *args, **kwargs)


class _Box:
    """Holds a coroutine's result behind the plain object repr.

    On its way out, ``asyncio.run`` formats the repr of its SIGINT handler, which
    holds the finished main task and, through it, the task's result: a RunResult
    with the whole state (20 ms for a 4 MB conversation, on every run and resume).
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


async def _boxed(coro: Coroutine[Any, Any, T]) -> _Box:
    return _Box(await coro)


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end from sync code and return its result."""
    # Asked outside the ``except`` clause: a run started inside it would chain every
    # error a step raises to "RuntimeError: no running event loop".
    if _in_event_loop():
        # Called from inside an event loop (a notebook, a server): run on a private loop,
        # in the caller's context (its current span, for one: the run joins its trace).
        context = contextvars.copy_context()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            box = pool.submit(context.run, asyncio.run, _boxed(coro)).result()
    else:
        box = asyncio.run(_boxed(coro))
    value: T = box.value
    return value
