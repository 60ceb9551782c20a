"""Retry schedules and timeouts, shared by tool calls and steps.

The waits between attempts come from stamina (exponential backoff with jitter, over
tenacity), so its instrumentation (logging, structlog, prometheus) and its test mode
(``stamina.set_testing(True, attempts=10, cap=True)``: no waits) apply to savegame's
retries too. What an attempt is, and whether a failed one may be tried again, is the
caller's: the journal rules for a tool call (:mod:`savegame.effects._attempts`), the
loop's for a step.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from savegame.errors import ConfigurationError, ModelTransientError, SavegameError, TimedOutError

if TYPE_CHECKING:
    import stamina

T = TypeVar("T")
RetryOn = tuple[type[Exception], ...]


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long to wait before attempt ``n + 1``: ``min(maximum, initial * multiplier **
    (n - 1) + random(0, jitter))`` seconds (stamina's schedule).

    ``@tool(backoff=0.5)`` is ``Backoff(initial=0.5, jitter=0.5)``.
    """

    initial: float = 0.1
    """The first wait, in seconds."""
    maximum: float = 5.0
    """No wait is longer."""
    multiplier: float = 2.0
    """Each wait is this many times the one before (before jitter)."""
    jitter: float = 1.0
    """Up to this many seconds added at random to each wait."""

    def __post_init__(self) -> None:
        for name in ("initial", "maximum", "jitter"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigurationError(f"Backoff.{name} must be a number >= 0, not {value!r}")
        if isinstance(self.multiplier, bool) or not (
            isinstance(self.multiplier, (int, float)) and self.multiplier >= 1
        ):
            raise ConfigurationError(f"Backoff.multiplier must be >= 1, not {self.multiplier!r}")


DEFAULT_BACKOFF = Backoff()


def as_backoff(value: Backoff | float) -> Backoff:
    if isinstance(value, Backoff):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigurationError(f"backoff must be a Backoff or seconds, not {value!r}")
    return Backoff(initial=float(value), maximum=max(float(value), 5.0), jitter=float(value))


def check_retries(retries: int, timeout: float | None, retry_on: Any, owner: str) -> RetryOn:
    """Refuse retry settings that do not make sense; return ``retry_on`` as a tuple."""
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ConfigurationError(f"{owner}: retries must be an int >= 0, not {retries!r}")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
    ):
        raise ConfigurationError(f"{owner}: timeout must be seconds > 0 or None, not {timeout!r}")
    kinds = retry_on if isinstance(retry_on, tuple) else (retry_on,)
    for kind in kinds:
        if not (isinstance(kind, type) and issubclass(kind, Exception)):
            raise ConfigurationError(f"{owner}: retry_on must be exception classes, not {kind!r}")
    return kinds


def retryable(error: BaseException, retry_on: RetryOn) -> bool:
    """Whether another attempt may help: ``error`` is one of ``retry_on`` and not one of
    savegame's own verdicts (a refused call, a non-deterministic step, a rejection, a
    lost lease: another attempt gets the same answer), except a timeout and a model
    provider's transient failure (a rate limit, a 5xx). Pauses, cancellation and in-doubt
    stops are not exceptions at all and never retried."""
    if not isinstance(error, retry_on):
        return False
    return not isinstance(error, SavegameError) or isinstance(
        error, (TimedOutError, ModelTransientError)
    )


def retry_wait(error: BaseException, retry_on: RetryOn) -> bool | float:
    """:func:`retryable`, as stamina's backoff hook: where the error says how long to
    wait (a provider's ``Retry-After`` on a ModelTransientError), that many seconds
    instead of the schedule's next wait; else whether to retry."""
    if not retryable(error, retry_on):
        return False
    wait = getattr(error, "retry_after", None) if isinstance(error, ModelTransientError) else None
    return float(wait) if isinstance(wait, (int, float)) and not isinstance(wait, bool) else True


def _schedule(retries: int, backoff: Backoff, done: int) -> dict[str, Any]:
    """stamina's arguments for the attempts left after ``done`` of ``retries + 1``; the
    waits go on from where the schedule was (a resumed run does not start it again)."""
    try:
        initial = backoff.initial * backoff.multiplier**done
    except OverflowError:
        initial = backoff.maximum
    return {
        "attempts": max(retries + 1 - done, 1),
        "timeout": None,
        "wait_initial": min(initial, backoff.maximum),
        "wait_max": backoff.maximum,
        "wait_jitter": backoff.jitter,
        "wait_exp_base": backoff.multiplier,
    }


def attempts(
    retries: int, backoff: Backoff, done: int, may_retry: Callable[[Exception], bool | float]
) -> Iterable[stamina.Attempt]:
    """stamina's attempts (``with attempt: ...``) left after ``done``; a failed one is
    tried again while ``may_retry(error)`` (a float: after that many seconds); the last
    error is raised as it came."""
    # Imported by the first retry: stamina and tenacity cost ~12 ms to import, paid
    # otherwise by every process that loads the runtime, most of them retrying nothing.
    import stamina

    return stamina.retry_context(on=_on(may_retry), **_schedule(retries, backoff, done))


def _on(may_retry: Callable[[Exception], bool | float]) -> Callable[[BaseException], bool | float]:
    """``may_retry`` as stamina 26.2 types ``on``: any BaseException; one that is not an
    Exception (a KeyboardInterrupt, a cancellation) is never tried again."""
    return lambda error: isinstance(error, Exception) and may_retry(error)


def aattempts(
    retries: int, backoff: Backoff, done: int, may_retry: Callable[[Exception], bool | float]
) -> AsyncIterable[stamina.Attempt]:
    """Async twin of :func:`attempts` (``async for``; the waits are ``asyncio.sleep``)."""
    import stamina  # see attempts

    return stamina.retry_context(on=_on(may_retry), **_schedule(retries, backoff, done))


class Expired(Exception):
    """Raised by :func:`within` and :func:`in_thread` when the time is up; the caller
    raises a TimedOutError naming what timed out."""


async def within(awaitable: Awaitable[T], seconds: float) -> T:
    """Await ``awaitable`` for at most ``seconds``, then cancel it and raise Expired.

    A TimeoutError the awaitable raises itself is its own, raised as it came.
    """
    if sys.version_info >= (3, 11):
        scope = asyncio.timeout(seconds)
        try:
            async with scope:
                return await awaitable
        except TimeoutError:
            if scope.expired():
                raise Expired() from None
            raise
    try:  # pragma: no cover - Python 3.10
        return await asyncio.wait_for(awaitable, seconds)
    except asyncio.TimeoutError:  # pragma: no cover - a distinct class before 3.11
        raise Expired() from None


def in_thread(fn: Callable[[], T], seconds: float, name: str) -> T:
    """Call ``fn`` in a daemon thread and wait at most ``seconds`` for it.

    A thread cannot be stopped: when the time is up it is left running (a daemon, so it
    does not hold the process up at exit) and Expired is raised; what it does after
    that is nobody's to record. An exception it raises in time is raised here.
    """
    outcome: list[Any] = []
    finished = threading.Event()
    context = contextvars.copy_context()

    def target() -> None:
        try:
            outcome.append((True, context.run(fn)))
        except BaseException as exc:
            outcome.append((False, exc))
        finally:
            finished.set()

    threading.Thread(target=target, name=f"savegame-{name}", daemon=True).start()
    if not finished.wait(seconds):
        raise Expired()
    ok, value = outcome[0]
    if not ok:
        raise value
    result: T = value
    return result
