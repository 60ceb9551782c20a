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
import functools
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from savegame.stores.base import Store

T = TypeVar("T")
Io = Callable[..., Awaitable[Any]]
"""How the loop calls the store: ``await io(fn, *args, **kwargs)``."""


async def direct_io(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return fn(*args, **kwargs)


IO_THREADS = 64
"""Store calls of async runs at once. asyncio's default executor has ``cpu + 4``
threads (6 on 2 cores): 64 runs at a step boundary would queue for them, and group
commit (runtime/_commit.py) could put at most as many checkpoints in one transaction
as there are threads waiting in it."""

_io_pool: concurrent.futures.ThreadPoolExecutor | None = None
_io_pool_lock = threading.Lock()


def io_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The threads of async runs' store calls (made on first use)."""
    global _io_pool
    with _io_pool_lock:
        if _io_pool is None:
            # Threads start on demand, up to IO_THREADS, and idle ones are reused.
            _io_pool = concurrent.futures.ThreadPoolExecutor(IO_THREADS, "savegame-io")
        return _io_pool


def _forget_pool() -> None:
    # A forked child has none of the parent's threads: a pool carried over would
    # believe it had idle ones and never run the child's calls.
    global _io_pool, _io_pool_lock
    _io_pool, _io_pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


async def threaded_io(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    # As asyncio.to_thread does, the call sees the caller's context variables.
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(io_pool(), call)


def store_io(store: Store, io: Io) -> Io:
    """``io`` for calls to ``store``: inline where its calls do not block (memory://,
    where the hop to a thread and back cost more than the call: 0.08 ms a step)."""
    return io if store.capabilities.blocking else direct_io


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
