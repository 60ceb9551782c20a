"""Queues for the worker fleet from the caller's side: declare one, see what is in each.

What a queue is, and how a store keeps its limits at claim time, is in
``stores/_queues.py``; ``submit(queue=...)`` puts a run in one and ``Worker(queues=...)``
takes only from some.
"""

from __future__ import annotations

from savegame.stores import Queue, QueueStats, Store, queue_store


def declare_queue(
    name: str,
    *,
    concurrency: int | None = None,
    worker_concurrency: int | None = None,
    limit: int | None = None,
    period: float = 1.0,
    store: Store,
) -> Queue:
    """Declare a queue in the store (or change its limits), for every worker at once.

    The operation behind ``Savegame.queues.declare`` (:class:`savegame.client.Queues`),
    which documents it, on the open ``store``.
    """
    queue = Queue(name, concurrency, worker_concurrency, limit, period)
    queue_store(store, f"declare_queue({name!r})").declare_queue(queue)
    return queue


def list_queues(*, store: Store) -> list[QueueStats]:
    """Every queue declared in the store, by name, with its depth (queued runs), its runs
    executing now, those started in its rate window and its unfinished runs.

    The operation behind ``Savegame.queues.list`` (:class:`savegame.client.Queues`), which
    documents it, on the open ``store``.
    """
    return queue_store(store, "list_queues").list_queues()
