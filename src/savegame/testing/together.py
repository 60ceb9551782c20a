"""Run calls at the same moment, each in its own thread: the contention tests' harness."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["together"]

T = TypeVar("T")


def together(calls: Sequence[Callable[[], T]]) -> list[T | BaseException]:
    """Each call's result, or the exception it raised, in the order given.

    A barrier releases all threads at once, so the calls really overlap; an
    exception is returned rather than lost inside its thread, so the caller
    asserts on every outcome.
    """
    barrier = threading.Barrier(len(calls))
    outcomes: dict[int, T | BaseException] = {}

    def run(index: int) -> None:
        barrier.wait()
        try:
            outcomes[index] = calls[index]()
        except BaseException as exc:  # handed back to the caller, not lost in the thread
            outcomes[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [outcomes[i] for i in range(len(calls))]
