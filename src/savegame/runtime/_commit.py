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

The runs of one event loop (``arun``) meet before the threads do (:class:`LoopCommit`):
each hands its save to the loop's committer and awaits a future, and the committer
sends what has queued to one io thread at a time, so a batch of N pays one thread
hop and one wake-up of the loop, not N of each (the hop costs as much as the commit:
0.10-0.15 ms on the 2-core VM of docs/benchmarks.md). A run alone hops at once, as
before; runs that arrive while a hop is out queue for the next. In the thread, the
batch joins the store's :class:`GroupCommit` like any other thread's puts, so the
sync promise holds as it did: each run's future resolves only once its checkpoint is
committed, or with the error that says why not.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, cast

from savegame.runtime._bridge import io_pool
from savegame.stores.base import BatchStore, Put, PutResult, Store

MAX_BATCH = 64
"""Puts per transaction at most: a long transaction holds the write lock (SQLite) and
the rows (PostgreSQL) longer, and the runs at the front of a batch wait for the last."""


@dataclass(slots=True)
class _Waiter:
    """One thread's puts: a sync run's one, or the batch of an event loop's runs."""

    store: BatchStore
    puts: Sequence[Put]
    done: bool = False
    written: list[PutResult | Exception] = field(default_factory=list)
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
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopCommit] = (
            weakref.WeakKeyDictionary()
        )

    def put(self, store: BatchStore, put: Put) -> PutResult:
        """Write ``put`` in the next batch and return when it is durable (or raise why not).

        ``store`` is this run's handle; a batch goes through its leader's."""
        outcome = self.put_many(store, (put,))[0]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def on_loop(self, loop: asyncio.AbstractEventLoop) -> LoopCommit:
        """The committer of ``loop``'s runs on this store (made on first use; called
        from the loop's own thread)."""
        found = self._loops.get(loop)
        if found is None:
            with self._lock:  # loops of other threads may add theirs meanwhile
                found = self._loops.get(loop)
                if found is None:
                    found = self._loops[loop] = LoopCommit(self)
        return found

    def waiting(self) -> int:
        """Puts queued and not yet being written, in threads and event loops (tests)."""
        with self._lock:
            queued = sum(len(w.puts) for w in self._queue)
            loops = list(self._loops.values())
        return queued + sum(len(c._queue) for c in loops)

    def put_many(self, store: BatchStore, puts: Sequence[Put]) -> list[PutResult | Exception]:
        """Write ``puts`` in the next batch, together; what each put got, in order.

        Raises:
            BaseException: the transaction failed as a whole; none of ``puts`` is written.
        """
        me = _Waiter(store, puts)
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
        return me.written

    def _lead(self, store: BatchStore) -> None:
        with self._lock:
            # Whole waiters, oldest first, up to max_batch puts (the first one whatever
            # its size: an event loop's batch is at most max_batch already).
            taken = total = 0
            for waiter in self._queue:
                if taken and total + len(waiter.puts) > self._max:
                    break
                taken += 1
                total += len(waiter.puts)
            batch, self._queue = self._queue[:taken], self._queue[taken:]
        puts = [put for waiter in batch for put in waiter.puts]
        results: list[PutResult | Exception] | None = None
        failure: BaseException | None = None
        try:
            if len(puts) == 1:
                # Alone: the plain write, without the savepoint a batch puts around each.
                results = [_put_one(store, puts[0])]
            elif puts:
                answered = store.put_checkpoints(puts)
                if len(answered) != len(puts):
                    # A store breaking the contract (a third party's): read below, a short
                    # list raised under the lock and left every waiter asleep for ever.
                    raise RuntimeError(
                        f"{type(store).__name__}.put_checkpoints answered {len(answered)} "
                        f"of {len(puts)} puts"
                    )
                results = answered
            else:
                results = []
        except BaseException as exc:  # the whole transaction failed: each run hears it
            failure = exc
        with self._lock:
            start = 0
            for waiter in batch:
                if results is None:
                    waiter.error = failure
                else:
                    waiter.written = results[start : start + len(waiter.puts)]
                    start += len(waiter.puts)
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


class Job(Protocol):
    """One run's save, as an event loop's committer writes it (:class:`LoopCommit`)."""

    @property
    def store(self) -> BatchStore:
        """The run's handle: a batch goes through its first run's."""
        ...

    def prepare(self) -> Put:
        """In the io thread, before the batch: the put, with the blobs the store lacks."""
        ...

    def finish(self, outcome: PutResult | Exception, seconds: float) -> PutResult:
        """In the io thread, after the batch: the commit notice for what ``outcome``
        says was written, and what the run gets (or raise why not)."""
        ...


@dataclass(slots=True)
class _Queued:
    job: Job
    context: contextvars.Context
    """The run's context variables, as ``threaded_io`` would hand its call (spans)."""
    future: asyncio.Future[PutResult]


class LoopCommit:
    """The saves of one event loop's runs on one store, one io thread hop per batch.

    Lives on its loop's thread: the queue and the flag need no lock. The hop's
    completion, not a run's task, resolves the batch's futures and starts the next
    hop, so a run cancelled while it waits strands no one behind it (its save is
    written all the same, as a save already handed to a thread always was).
    """

    def __init__(self, group: GroupCommit) -> None:
        self._group = group
        self._queue: list[_Queued] = []
        self._writing = False

    def put(self, job: Job) -> asyncio.Future[PutResult]:
        """Queue ``job`` for the next hop; the future resolves once it is committed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[PutResult] = loop.create_future()
        self._queue.append(_Queued(job, contextvars.copy_context(), future))
        if not self._writing:
            self._hop(loop)
        return future

    def _hop(self, loop: asyncio.AbstractEventLoop) -> None:
        batch = self._queue[: self._group._max]
        del self._queue[: self._group._max]
        try:
            io_pool().submit(self._write_then_tell, loop, batch)
        except RuntimeError as exc:  # the pool is shut down: the interpreter is exiting
            self._writing = False
            for queued in batch:
                if not queued.future.done():
                    queued.future.set_exception(exc)
            return
        self._writing = True

    def _write_then_tell(self, loop: asyncio.AbstractEventLoop, batch: list[_Queued]) -> None:
        """In an io thread: write ``batch``, then hand the outcomes to the loop.

        Told with one ``call_soon_threadsafe`` straight to :meth:`_written`, not through
        ``run_in_executor``'s future, whose done callback would run one loop iteration
        later (a lone run's step paid 33k instructions more for it, 8 % of a step).
        """
        try:
            outcomes = self._write(batch)
        except BaseException as exc:  # a bug below: every run hears it rather than hang
            outcomes = [exc] * len(batch)
        with contextlib.suppress(RuntimeError):  # the loop is closed: no run of it waits
            loop.call_soon_threadsafe(self._written, batch, outcomes)

    def _write(self, batch: list[_Queued]) -> list[PutResult | BaseException]:
        """In an io thread: every job's upload, one batch, every job's notice."""
        outcomes: list[PutResult | BaseException] = []
        ready: list[tuple[int, Put]] = []
        for i, queued in enumerate(batch):
            try:
                ready.append((i, queued.context.run(queued.job.prepare)))
                outcomes.append(_NOT_YET)
            except Exception as exc:  # this run's upload failed: the others go on
                outcomes.append(exc)
        if not ready:
            return outcomes
        started = time.perf_counter()
        try:
            written: list[PutResult | Exception] = self._group.put_many(
                batch[ready[0][0]].job.store, [put for _, put in ready]
            )
        except Exception as exc:  # the transaction failed whole: each run in it hears it
            for i, _ in ready:
                outcomes[i] = exc
            return outcomes
        seconds = time.perf_counter() - started
        for (i, _), outcome in zip(ready, written, strict=True):
            try:
                outcomes[i] = batch[i].context.run(batch[i].job.finish, outcome, seconds)
            except Exception as exc:
                outcomes[i] = exc
        return outcomes

    def _written(self, batch: list[_Queued], outcomes: list[PutResult | BaseException]) -> None:
        for queued, outcome in zip(batch, outcomes, strict=True):
            if queued.future.done():
                continue  # its run was cancelled while it waited
            if isinstance(outcome, BaseException):
                queued.future.set_exception(outcome)
            else:
                queued.future.set_result(outcome)
        if self._queue:
            self._hop(asyncio.get_running_loop())
        else:
            self._writing = False


_NOT_YET = RuntimeError("savegame: a job's outcome was not set (a bug in LoopCommit._write)")


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
