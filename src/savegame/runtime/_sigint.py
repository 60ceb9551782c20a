"""Ctrl-C during a run: the first stops it at a step boundary, a second at once.

A terminal's Ctrl-C sends SIGINT to its whole foreground process group. Left to Python,
it raises KeyboardInterrupt wherever the main thread is (between a tool's call and its
journal entry, say); left to ``asyncio.run``, it cancels the main task, which a sync step
never yields to: the run went on to its end, and then its result was lost to a
KeyboardInterrupt all the same.

While ``run``/``resume`` (or ``arun``/``aresume``: :func:`holding_sigint`) execute in the
main thread, savegame's handler holds SIGINT (:class:`CtrlC`), and the run finds its stop
with :func:`current`:

- the first SIGINT asks a stop (:class:`StopRequest`; a person at a terminal is told so
  at once). The call in flight finishes; the step stops before its next call
  (``signals.Halt``: the state before the step is kept, its journal as recorded) or at
  its end, and the run is checkpointed ``interrupted`` there, to go on with ``resume``.
  A step that raises meanwhile is stopped the same, not failed: the group's SIGINT
  killed its tool's own process, likely. A wait that holds nothing unsaved (between a
  step's attempts, a blocking wait for a waiting run) ends at once;
- a second SIGINT does at once what the handler before would have done: Python's (and
  asyncio's) raise KeyboardInterrupt where the main thread is, a program's own is called.

When the last run leaves, the handler before is put back and the first SIGINT handed on:
a KeyboardInterrupt naming the run and where it stopped (:func:`interrupted`) unless the
run ended anyway; a program's own handler is called with it, late. Left alone: a SIGINT
that is ignored (a job a shell starts in the background), left to the OS, or handled
outside Python; and a run started in another thread (only the main thread may set a
handler: there Python's own behaviour stays).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from contextvars import ContextVar, Token
from dataclasses import dataclass
from types import FrameType
from typing import Any, ParamSpec, overload

from savegame.model import RunResult
from savegame.signals import Halt

Handler = Callable[[int, FrameType | None], Any]
P = ParamSpec("P")

_NOTICE = (
    b"\nsavegame: Ctrl-C: the run stops once its call in flight returns "
    b"(Ctrl-C again stops it at once)\n"
)


class StopRequest:
    """A stop asked of the runs executing in this process (the first Ctrl-C); called, it
    says whether it was asked. Asked from a signal handler, so what it wakes must be safe
    to call there (``loop.call_soon_threadsafe`` is)."""

    def __init__(self) -> None:
        self.asked = False
        self._wakers: list[Callable[[], None]] = []

    def __call__(self) -> bool:
        return self.asked

    def ask(self) -> None:
        self.asked = True
        for wake in tuple(self._wakers):
            wake()

    def on_ask(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake`` when the stop is asked; returns what takes it back."""
        self._wakers.append(wake)
        return lambda: self._wakers.remove(wake)


@dataclass
class _Hold:
    """SIGINT held for the runs in this process: the handler it was taken from, the stop."""

    previous: Handler
    request: StopRequest
    runs: int = 0


_hold: _Hold | None = None

# A context variable, not an argument: ``run`` drives its loop in another thread when it
# is called inside an event loop (runtime/_bridge.py), and the context goes along.
_current: ContextVar[StopRequest | None] = ContextVar("savegame_sigint", default=None)


def current() -> StopRequest | None:
    """The stop the run being started here polls (None: SIGINT is not held for it)."""
    return _current.get()


def _raises(handler: Handler) -> bool:
    """Whether ``handler`` answers SIGINT with a KeyboardInterrupt: Python's default, or
    ``asyncio.run``'s (a partial of its Runner's method: it cancels the main task, and the
    runner raises KeyboardInterrupt once the task has ended)."""
    if handler is signal.default_int_handler:
        return True
    owner = getattr(getattr(handler, "func", None), "__self__", None)
    return type(owner).__module__ == "asyncio.runners"


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    hold = _hold
    if hold is None:  # put back meanwhile; a signal that was already on its way
        raise KeyboardInterrupt
    if not hold.request.asked:
        # To a terminal only (a person pressed Ctrl-C: it may take a long model call to
        # see an effect), never into what a program reads (``--json`` lines). os.write,
        # not sys.stderr: the main thread may be inside a write to sys.stderr, and a
        # buffered stream refuses a reentrant call (a RuntimeError, in the step).
        with contextlib.suppress(OSError):
            if os.isatty(2):
                os.write(2, _NOTICE)
        hold.request.ask()
        return
    if _raises(hold.previous):
        raise KeyboardInterrupt
    hold.previous(signum, frame)


class CtrlC:
    """One run's hold on SIGINT: ``with CtrlC() as ctrl_c:`` around the run, then
    ``return ctrl_c.after(result)`` (see the module docstring)."""

    def __init__(self) -> None:
        self.request: StopRequest | None = None
        """The stop the run polls; None when SIGINT is left alone."""
        self._left: _Hold | None = None
        self._token: Token[StopRequest | None] | None = None

    def __enter__(self) -> CtrlC:
        global _hold
        if threading.current_thread() is not threading.main_thread():
            return self
        if _hold is None:
            previous = signal.getsignal(signal.SIGINT)
            if not callable(previous):
                return self  # SIG_IGN, SIG_DFL, or set outside Python: not ours to take
            _hold = _Hold(previous, StopRequest())
            signal.signal(signal.SIGINT, _on_sigint)
        _hold.runs += 1
        self.request = _hold.request
        self._token = _current.set(self.request)
        return self

    def __exit__(self, *exc: object) -> None:
        global _hold
        if self._token is not None:
            _current.reset(self._token)
        hold = _hold
        if self.request is None or hold is None:
            return
        hold.runs -= 1
        if hold.runs:
            return  # another run in this process still holds it
        # A handler a step set meanwhile is the program's: it stays.
        if signal.getsignal(signal.SIGINT) is _on_sigint:
            signal.signal(signal.SIGINT, hold.previous)
        _hold = None
        self._left = hold

    def after(self, result: RunResult) -> RunResult:
        """``result``, once the Ctrl-C the run stopped for is handed on (by the last run to
        leave, and only when it left with a result: an error it ended with is raised)."""
        hold = self._left
        if hold is None or not hold.request.asked:
            return result
        if not _raises(hold.previous):
            hold.previous(signal.SIGINT, sys._getframe(1))
            return result
        if result.status.finished:
            return result
        raise interrupted(result)


def interrupted(result: RunResult) -> KeyboardInterrupt:
    """The KeyboardInterrupt for a run a Ctrl-C stopped at ``result``: its message names the
    run, the step and the command that continues it; ``.result`` holds ``result``.

    Exactly KeyboardInterrupt, no subclass: Python ends a process that does not catch one
    by SIGINT (not exit status 1) only for that class, and a shell running the program in
    a loop stops the loop only then."""
    exc = KeyboardInterrupt(
        f"run {result.run_id} stopped at step {result.step}: "
        f"savegame resume {result.run_id} continues it"
    )
    exc.result = result  # type: ignore[attr-defined]
    return exc


def stopped_at(exc: BaseException) -> RunResult | None:
    """Where a Ctrl-C stopped the run ``exc`` (from :func:`interrupted`) is about, or None."""
    result = getattr(exc, "result", None)
    return result if isinstance(exc, KeyboardInterrupt) and isinstance(result, RunResult) else None


@overload
def holding_sigint(
    fn: Callable[P, Coroutine[Any, Any, RunResult]],
) -> Callable[P, Coroutine[Any, Any, RunResult]]: ...


@overload
def holding_sigint(fn: Callable[P, RunResult]) -> Callable[P, RunResult]: ...


def holding_sigint(fn: Callable[P, Any]) -> Callable[P, Any]:
    """``fn`` (``run``, ``arun`` ...) holding SIGINT while it executes (:class:`CtrlC`)."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def holding_async(*args: P.args, **kwargs: P.kwargs) -> RunResult:
            with CtrlC() as ctrl_c:
                result = await fn(*args, **kwargs)
            return ctrl_c.after(result)

        return holding_async

    @functools.wraps(fn)
    def holding(*args: P.args, **kwargs: P.kwargs) -> RunResult:
        with CtrlC() as ctrl_c:
            result = fn(*args, **kwargs)
        return ctrl_c.after(result)

    return holding


class _Scope:
    """Whether the task is still inside :func:`unless_stopped`, and whether it cancelled it."""

    inside = True
    fired = False


@contextlib.asynccontextmanager
async def unless_stopped(request: StopRequest | None) -> AsyncIterator[None]:
    """Around a wait that holds nothing unsaved: a stop asked before or during it raises
    Halt, the wait cancelled."""
    if request is None:
        yield
        return
    if request.asked:
        raise Halt()
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    scope = _Scope()

    def cancel() -> None:
        # On the loop, so it cannot race the block's end: past it, nothing is cancelled.
        if scope.inside and task is not None:
            scope.fired = True
            task.cancel()

    def wake() -> None:
        # Raised into whatever the main thread was running, an error would land there.
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(cancel)

    take_back = request.on_ask(wake)
    try:
        yield
    except asyncio.CancelledError:
        if not scope.fired:
            raise
        uncancel = getattr(task, "uncancel", None)  # Python 3.11+
        if uncancel is not None:
            uncancel()
        raise Halt() from None
    finally:
        scope.inside = False
        take_back()


__all__ = [
    "CtrlC",
    "StopRequest",
    "current",
    "holding_sigint",
    "interrupted",
    "stopped_at",
    "unless_stopped",
]
