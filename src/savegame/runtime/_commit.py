"""Group commit: checkpoints of runs that reach a boundary together share one transaction.

Each run's save still waits for its own checkpoint to be durable (the sync promise
is unchanged); what changes is that the runs waiting at the same moment pay for
one commit, one fsync on SQLite and one on PostgreSQL, instead of one each.

There is no committer thread and no timer: the first run to arrive while nothing is
being written writes at once, alone (a single run pays no extra hop or delay). Runs
that arrive while a write is in flight queue up; when it ends, one of them leads the
next write with everything queued by then. The batch grows with the load by itself,
as in a database's own group commit.

Runs share a committer when their stores have the same URL, whatever the handle: a
worker's slots each open their own (``savegame worker --concurrency N``), and their
checkpoints go in one transaction all the same, written through the handle of the
run that leads the write.

A put the store refuses (a lost lease, a missing blob) fails only its run; a write
that fails as a whole (the commit, the connection) fails every run in it, and none
of them was written (one transaction).
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from savegame.stores.base import BatchStore, Put, PutResult, Store

MAX_BATCH = 64
"""Puts per transaction at most: a long transaction holds the write lock (SQLite) and
the rows (PostgreSQL) longer, and the runs at the front of a batch wait for the last."""


@dataclass(slots=True)
class _Waiter:
    store: BatchStore
    put: Put
    done: bool = False
    written: PutResult | None = None
    error: BaseException | None = None
    next: threading.Event | None = None
    """Set when this run is done or is to lead; made only for a run that queues (a run
    alone, the usual case, does not pay for an Event: a Condition and two locks)."""


class GroupCommit:
    """Serialises one store's checkpoint writes into batches (see the module's docstring)."""

    def __init__(self, *, max_batch: int = MAX_BATCH) -> None:
        self._max = max_batch
        self._lock = threading.Lock()
        self._queue: list[_Waiter] = []
        self._writing = False

    def put(self, store: BatchStore, put: Put) -> PutResult:
        """Write ``put`` in the next batch and return when it is durable (or raise why not).

        ``store`` is this run's handle; a batch goes through its leader's."""
        me = _Waiter(store, put)
        with self._lock:
            self._queue.append(me)
            lead = not self._writing
            if lead:
                self._writing = True
            else:
                wake = me.next = threading.Event()
        while not lead:
            wake.wait()
            with self._lock:
                if me.done:
                    break
                # Woken to lead: the write before ended and this run was at the front.
                wake.clear()
                lead = True
        if lead:
            self._lead(me.store)
        if me.error is not None:
            raise me.error
        assert me.written is not None
        return me.written

    def _lead(self, store: BatchStore) -> None:
        with self._lock:
            batch, self._queue = self._queue[: self._max], self._queue[self._max :]
        results: list[PutResult | Exception] | None = None
        failure: BaseException | None = None
        try:
            if len(batch) == 1:
                # Alone: the plain write, without the savepoint a batch puts around each.
                results = [_put_one(store, batch[0].put)]
            else:
                answered = store.put_checkpoints([w.put for w in batch])
                if len(answered) != len(batch):
                    # A store breaking the contract (a third party's): read below, a short
                    # list raised under the lock and left every waiter asleep for ever.
                    raise RuntimeError(
                        f"{type(store).__name__}.put_checkpoints answered {len(answered)} "
                        f"of {len(batch)} puts"
                    )
                results = answered
        except BaseException as exc:  # the whole transaction failed: each run hears it
            failure = exc
        with self._lock:
            for i, waiter in enumerate(batch):
                if results is None:
                    waiter.error = failure
                else:
                    outcome = results[i]
                    if isinstance(outcome, Exception):
                        waiter.error = outcome
                    else:
                        waiter.written = outcome
                waiter.done = True
            if self._queue:
                # The next write is led by the oldest waiter, with what queued meanwhile
                # (queued, so it has its Event).
                first = self._queue[0].next
                assert first is not None
                first.set()
            else:
                self._writing = False
        for waiter in batch:
            if waiter.next is not None:
                waiter.next.set()


def _put_one(store: Store, put: Put) -> PutResult | Exception:
    try:
        return store.put_checkpoint(
            put.record, lease_token=put.lease_token, error=put.error, effects=put.effects,
            blobs=put.blobs, waiting=put.waiting, events=put.events,
        )  # fmt: skip
    except Exception as exc:  # refused: raised in the run's own thread, as without batching
        return exc


# Weak: a committer lives while a run writes through it (its Saver holds it), so a
# process that opens store after store (a file per tenant, a test suite) keeps none
# of the idle ones. An idle committer holds nothing: a new one is the same.
_committers: weakref.WeakValueDictionary[tuple[type, str], GroupCommit] = (
    weakref.WeakValueDictionary()
)
_committers_lock = threading.Lock()


def group_of(store: Store) -> GroupCommit | None:
    """The group committer of the store's URL, or None without ``group_commit``."""
    if not store.capabilities.group_commit or not isinstance(store, BatchStore):
        return None
    key = (type(store), store.url)
    with _committers_lock:
        found = _committers.get(key)
        if found is None:
            found = _committers[key] = GroupCommit()
        return found


def committer(store: Store) -> Callable[[Put], PutResult] | None:
    """How a run on ``store`` writes a checkpoint in a group; None without ``group_commit``."""
    group = group_of(store)
    return None if group is None else functools.partial(group.put, cast(BatchStore, store))
