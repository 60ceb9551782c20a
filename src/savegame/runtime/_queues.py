"""Queues for the worker fleet from the caller's side: declare one, see what is in each.

What a queue is, and how a store keeps its limits at claim time, is in
``stores/_queues.py``; ``submit(queue=...)`` puts a run in one and ``Worker(queues=...)``
takes only from some.
"""

from __future__ import annotations

from savegame.stores import Queue, QueueStats, Store, opened_store, queue_store


def declare_queue(
    name: str,
    *,
    concurrency: int | None = None,
    worker_concurrency: int | None = None,
    limit: int | None = None,
    period: float = 1.0,
    store: Store | str | None = None,
) -> Queue:
    """Declare a queue in the store (or change its limits), for every worker at once.

    Args:
        name: the queue's name, as ``submit(queue=...)`` and ``Worker(queues=...)`` say it.
        concurrency: at most this many of its runs execute at once across all workers.
        worker_concurrency: at most this many at once in one worker process.
        limit: at most this many of its runs start per ``period`` seconds (a rate limit).
        period: the rate limit's window, in seconds.
        store: a store with queues (SQLite, PostgreSQL), its URL, or None for the default.

    Returns:
        The queue as declared.

    Raises:
        ConfigurationError: a bad limit, or a store without queues.
    """
    queue = Queue(name, concurrency, worker_concurrency, limit, period)
    with opened_store(store) as s:
        queue_store(s, f"declare_queue({name!r})").declare_queue(queue)
    return queue


def list_queues(store: Store | str | None = None) -> list[QueueStats]:
    """Every queue declared in the store, by name, with its depth (queued runs), its runs
    executing now, those started in its rate window and its unfinished runs."""
    with opened_store(store, create=False) as s:
        return queue_store(s, "list_queues").list_queues()
