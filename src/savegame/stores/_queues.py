"""Queues with limits for the worker fleet: what a queue is, and what a store that has them does.

A queue is declared in the store (``declare_queue``), so every worker and every submitter
sees the same limits. A run submitted to a queue carries its queue, priority and an
optional deduplication key in its row. The limits are decided by the store at claim time,
in the claim's own transaction (SQLite: under ``BEGIN IMMEDIATE``; PostgreSQL: under the
queues' row locks), so any number of worker processes together never exceed them:

- ``concurrency``: runs of the queue executing at once (a live lease), across all workers;
- ``worker_concurrency``: the same for one worker process (the lease owner);
- ``limit`` per ``period`` seconds: first starts (claims of a run never claimed before)
  in the last ``period`` seconds.

Only claims are limited: a ``resume`` from outside the fleet (or a blocking parent running
its children) takes a run's lease directly, and counts towards the limits while it runs.
Claims take the highest ``priority`` first, then the oldest (a run of no queue has
priority 0). A submit whose ``dedup_key`` names an unfinished run of that queue creates
nothing and gets that run (checked in the insert's transaction): a finished run frees the key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from savegame.errors import ConfigurationError, ConflictError
from savegame.model import CheckpointRecord, Lease, RunInfo
from savegame.stores.base import Store

#: The longest queue name and dedup key a store keeps.
MAX_NAME = 200


@dataclass(frozen=True, slots=True)
class Queue:
    """A queue's limits, as declared in the store (``savegame.client.declare_queue``)."""

    name: str
    concurrency: int | None = None
    """Runs of the queue executing at once across the fleet (None: no limit)."""
    worker_concurrency: int | None = None
    """Runs of the queue one worker process executes at once (None: no limit)."""
    limit: int | None = None
    """At most this many runs of the queue start per ``period`` (None: no rate limit)."""
    period: float = 1.0
    """Seconds of the rate limit's window."""

    def to_data(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "concurrency": self.concurrency,
            "worker_concurrency": self.worker_concurrency,
            "limit": self.limit,
            "period": self.period,
        }


@dataclass(frozen=True, slots=True)
class Enqueue:
    """Where a new run goes in the fleet: its queue, its priority, its deduplication key."""

    queue: str
    priority: int = 0
    """Higher is claimed sooner."""
    dedup_key: str | None = None
    """While a run of the queue with this key is unfinished, a submit with it gets that run."""


@dataclass(frozen=True, slots=True)
class QueueStats:
    """A queue and what is in it now (``savegame queues``)."""

    queue: Queue
    queued: int
    """Runs waiting for a worker: status queued, no live lease."""
    running: int
    """Runs executing now (a live lease)."""
    started: int
    """Runs started in the last ``period`` seconds (what the rate limit counts)."""
    unfinished: int
    """Runs of the queue not finished (queued, running, waiting, failed ...)."""


class DuplicateRunError(ConflictError):
    """``create_run`` found an unfinished run with the new run's queue and dedup key: that
    run is the answer (``submit`` returns it)."""

    def __init__(self, queue: str, dedup_key: str, run_id: str) -> None:
        self.queue = queue
        self.dedup_key = dedup_key
        self.run_id = run_id
        super().__init__(f"queue {queue!r} has an unfinished run {run_id} with key {dedup_key!r}")


class QueueStore(Store, Protocol):
    """A store with ``Capabilities.queues``: declared queues, limits decided at claim time."""

    def declare_queue(self, queue: Queue) -> None:
        """Create the queue, or replace its limits (runs in it keep their place)."""
        ...

    def list_queues(self) -> list[QueueStats]:
        """Every declared queue with its counts, by name."""
        ...

    def create_run(
        self,
        run: RunInfo,
        first: CheckpointRecord,
        *,
        owner: str | None,
        ttl: float,
        blobs: Mapping[str, bytes] | None = None,
        sole: bool = False,
        queue: Enqueue | None = None,
    ) -> Lease:
        """As ``Store.create_run``; ``queue``: the run goes in that declared queue.

        Raises:
            NotFoundError: the queue is not declared.
            DuplicateRunError: an unfinished run of the queue has ``queue.dedup_key``.
        """
        ...

    def claim_run(
        self,
        owner: str,
        ttl: float,
        *,
        workflows: Sequence[str] | None = None,
        queues: Sequence[str] | None = None,
        versions: Sequence[str] | None = None,
    ) -> Lease | None:
        """As ``Store.claim_run``, never past a queue's limits; ``queues``: only runs of
        these queues (default: any run, of a queue with room or of none)."""
        ...

    def run_queue(self, run_id: str) -> Enqueue | None:
        """Where the run is in the fleet: its queue, priority and dedup key as it was
        created with them; None for a run of no queue.

        Raises:
            NotFoundError: no run of that id.
        """
        ...


def queue_store(store: Store, what: str) -> QueueStore:
    """``store`` as a QueueStore, or a ConfigurationError naming it and ``what`` needed it."""
    if not store.capabilities.queues:
        raise ConfigurationError(
            f"{what}: the {type(store).__name__} store has no queues (they are decided in the "
            "store at claim time); use SQLite or PostgreSQL"
        )
    return cast(QueueStore, store)


def queue_declared(store: QueueStore, name: str) -> bool:
    """Whether ``store`` has a queue named ``name`` (a run put in another is refused)."""
    return any(q.queue.name == name for q in store.list_queues())


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME:
        raise ConfigurationError(f"{what} must be a non-empty string of at most {MAX_NAME} chars")
    return value


def _count(value: Any, what: str, queue: str) -> Any:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigurationError(f"queue {queue!r}: {what} must be a whole number >= 1 or None")
    return value


def check_queue(queue: Queue) -> Queue:
    """``queue`` if its limits make sense, else a ConfigurationError naming the bad one."""
    name = _name(queue.name, "a queue name")
    _count(queue.concurrency, "concurrency", name)
    _count(queue.worker_concurrency, "worker_concurrency", name)
    _count(queue.limit, "limit", name)
    period = queue.period
    if isinstance(period, bool) or not isinstance(period, (int, float)) or not period > 0:
        raise ConfigurationError(f"queue {name!r}: period must be seconds > 0")
    return queue


def check_enqueue(enqueue: Enqueue) -> Enqueue:
    """``enqueue`` if its fields are sound, else a ConfigurationError."""
    _name(enqueue.queue, "a queue name")
    if isinstance(enqueue.priority, bool) or not isinstance(enqueue.priority, int):
        raise ConfigurationError(f"queue {enqueue.queue!r}: priority must be a whole number")
    if not -(2**31) <= enqueue.priority < 2**31:
        raise ConfigurationError(f"queue {enqueue.queue!r}: priority out of range (32 bits)")
    if enqueue.dedup_key is not None:
        _name(enqueue.dedup_key, "a dedup key")
    return enqueue


def check_queues(queues: Sequence[str] | None) -> list[str] | None:
    """A claimer's queue names as a list (None: any), each checked."""
    if queues is None:
        return None
    if isinstance(queues, str):
        raise ConfigurationError("queues must be a list of queue names, not one string")
    return [_name(q, "a queue name") for q in queues]


def with_room(rows: Sequence[Sequence[Any]]) -> tuple[list[str], list[str]]:
    """The queues a claimer may take a run of, and those it may start a new run of (the
    rate limit counts first starts only: a run taken over after its worker died, or woken,
    is no new start), from rows of ``(name, concurrency, worker_concurrency, limit,
    running, mine, started)`` counted in the claim's transaction."""
    room, starts = [], []
    for name, concurrency, per_worker, limit, running, mine, started in rows:
        if concurrency is not None and running >= concurrency:
            continue
        if per_worker is not None and mine >= per_worker:
            continue
        room.append(str(name))
        if limit is None or started < limit:
            starts.append(str(name))
    return room, starts
